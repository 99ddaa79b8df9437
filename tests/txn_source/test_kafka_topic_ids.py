"""Issue 29 item 3: a Kafka-mode read task planned on a topic that was deleted and re-created
before it ran must never read the new topic's records (the embedded source's promise, kept
there with topic ids: ``txn_source.partition``). The plan carries the topic id the cluster
reported (AdminClient ``describe_topics``, KIP-516); the task checks it before and after it
reads. A changed id is data loss: ``OffsetOutOfRangeError`` under ``failOnDataLoss=true``, a
warning and nothing read under ``false``.

Against ``txnlog serve``, which reports topic ids as Kafka brokers since 2.8 do, and against
a server answering as an older broker, with none (the zero UUID: ``old_broker_serve``): then
tasks carry no id, as before.
"""

from __future__ import annotations

import dataclasses
import pickle
import uuid
from collections.abc import Iterator

import pytest

from offsets.admission import AdmissionLimit
from tests.txn_source.kafka_served import send, serving_a_new_log
from tests.txn_source.old_broker_serve import start_old_broker_serve
from tests.txn_wire.serve_process import ServeProcess
from txn_log.errors import OffsetOutOfRangeError
from txn_log.log import Log
from txn_source.kafka_partition import KafkaInputPartition, read_kafka_partition
from txn_source.options import parse_source_options
from txn_source.stream_planner import StreamPlanner


@pytest.fixture(scope="module")
def with_ids(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serving_a_new_log(tmp_path_factory, "topic-ids") as server:
        yield server


@pytest.fixture(scope="module")
def without_ids(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serving_a_new_log(tmp_path_factory, "no-topic-ids", start_old_broker_serve) as server:
        yield server


def plan(served: ServeProcess, topic: str) -> list[KafkaInputPartition]:
    options = parse_source_options(
        {
            "kafka.bootstrap.servers": served.bootstrap,
            "subscribe": topic,
            "startingOffsets": "earliest",
            "kafkaConsumer.pollTimeoutMs": "20000",
        },
        streaming=True,
    )
    planner = StreamPlanner(options)
    try:
        start = planner.initial_offsets()
        tasks = planner.plan(start, planner.latest_offset(start, AdmissionLimit()))
    finally:
        planner.close()
    assert all(isinstance(t, KafkaInputPartition) for t in tasks)
    return tasks  # type: ignore[return-value]


def read(task: KafkaInputPartition) -> list[bytes]:
    shipped = pickle.loads(pickle.dumps(task))
    return [v for b in read_kafka_partition(shipped) for v in b.column("value").to_pylist()]


def recreate(served: ServeProcess, topic: str, values: list[bytes]) -> None:
    with Log.open(served.path) as log:
        log.delete_topic(topic)
        log.create_topic(topic, partitions=1)
        send(log, topic, values)


def old_and_new(n: int) -> tuple[list[bytes], list[bytes]]:
    return [b"old-%d" % i for i in range(n)], [b"new-%d" % i for i in range(2 * n)]


def test_a_task_planned_before_its_topic_was_recreated_never_reads_the_new_records(
    with_ids: ServeProcess,
) -> None:
    """The issue's case: ``[0, 5)`` planned over old-0..4, the topic re-created and filled with
    new-0..9; the task must fail (failOnDataLoss=true, the default), naming the topic, the
    offsets and both ids, or read nothing (false); never new-0..4."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    old, new = old_and_new(5)
    with Log.open(with_ids.path) as log:
        log.create_topic(topic, partitions=1)
        send(log, topic, old)
    (task,) = plan(with_ids, topic)
    assert read(task) == old
    recreate(with_ids, topic, new)
    assert read(dataclasses.replace(task, fail_on_data_loss=False)) == []
    with pytest.raises(OffsetOutOfRangeError, match=rf"{topic}-0 is gone .*re-created"):
        read(task)
    (replanned,) = plan(with_ids, topic)  # a plan made after it names the new topic
    assert None is not task.topic_id != replanned.topic_id is not None
    assert read(replanned) == new


def test_a_cluster_reporting_no_topic_ids_plans_tasks_without_one(
    without_ids: ServeProcess,
) -> None:
    """A broker before 2.8 answers Metadata with the zero UUID (no id): the source takes that
    for "unknown", plans tasks without an id and reads them as before; a re-created topic is
    then noticed only when its offsets went back (``data_loss``)."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    with Log.open(without_ids.path) as log:
        log.create_topic(topic, partitions=1)
        send(log, topic, [b"v"])
    (task,) = plan(without_ids, topic)
    assert read(task) == [b"v"]
    assert task.topic_id is None
