"""Issue 29 item 1: a re-run batch in Kafka mode gives every task the position it had.

The Kafka sink's ledger says "task *i* of batch *N* committed", *i* being the task's position
in the source's plan. So re-planning batch *N* from the same two positions must give the same
tasks in the same positions, whatever happened to the log in between: a partition or topic
deleted (``failOnDataLoss=false``) and a log start moved past the checkpointed start both
change only what a task reads (less, or nothing), never which position it holds.

Each test drives the source and the sink in the order Spark calls them against a real
``txnlog serve``: plan batch 0, run some of its tasks (each commits its own transaction with
its ledger record), the driver "dies" (nothing more of that attempt runs), the log changes,
batch 0 is planned again from the same offsets and every task runs; then the output must hold
every record still in the log (and every one committed before the change) exactly once.
"""

from __future__ import annotations

import pickle
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity
from commit_protocol.kafka_backend import KafkaBackend
from commit_protocol.messages import TaskCommit
from offsets.admission import AdmissionLimit
from tests.txn_source.kafka_served import cluster_of, log, send, served
from tests.txn_wire.serve_process import ServeProcess
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_source.kafka_partition import KafkaInputPartition, read_kafka_partition
from txn_source.options import parse_source_options
from txn_source.stream_planner import StreamPlanner

__all__ = ["log", "served"]  # fixtures


@pytest.fixture
def names() -> Iterator[tuple[str, str, str, str]]:
    """Three input topics (sorted as ta < tb < tc) and an output topic of one test."""
    tag = uuid.uuid4().hex[:8]
    yield (f"ta-{tag}", f"tb-{tag}", f"tc-{tag}", f"out-{tag}")


def planner(served: ServeProcess, topics: Sequence[str], **extra: str) -> StreamPlanner:
    given = {
        "kafka.bootstrap.servers": served.bootstrap,
        "subscribe": ",".join(topics),
        "startingOffsets": "earliest",
        "failOnDataLoss": "false",
        "kafkaConsumer.pollTimeoutMs": "20000",
        **extra,
    }
    return StreamPlanner(parse_source_options(given, streaming=True))


class SparkLikeBatch:
    """Batch 0 of one Kafka-mode sink, its tasks run the way Spark runs them: task *i* reads
    input partition *i* and writes what it read (``value``, ``key``) to ``out``."""

    def __init__(self, served: ServeProcess, out: str) -> None:
        self.backend = KafkaBackend(cluster_of(served), ledger_topic=f"ledger-{out}", timeout_s=30)
        self.backend.create_topic(out, 1)
        self.out = out
        sink = SinkIdentity(f"spark-query-{out}", f"p-{out}", f"g-{out}")
        self.protocol = SinkCommitProtocol(self.backend, sink)

    def run_task(self, task: int, partition: Any) -> TaskCommit:
        transaction = self.protocol.begin_task(0, task)
        if transaction is None:
            return self.protocol.skipped_task(0, task, 0)
        shipped = pickle.loads(pickle.dumps(partition))  # to an executor
        assert isinstance(shipped, KafkaInputPartition)
        for batch in read_kafka_partition(shipped):
            transaction.write(TopicPartition(self.out, 0), batch.select(["key", "value"]))
        return self.protocol.prepare_task(transaction, 0, task, 0)

    def rerun(self, again: StreamPlanner, start: Any, end: Any) -> None:
        """The restarted driver: batch 0 planned again from the same positions, every task
        run, the batch committed."""
        replanned = again.plan(start, end)
        again.close()
        messages = [self.run_task(i, task) for i, task in enumerate(replanned)]
        assert self.protocol.commit(0, messages)

    def close(self) -> None:
        self.backend.close()


def output(log: Log, topic: str) -> Counter[bytes]:
    consumer = log.consumer("read_committed")
    return Counter(r.value for tp in log.partitions(topic) for r in consumer.read(tp, 0))


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def test_a_topic_deleted_before_the_rerun_shifts_no_task(
    served: ServeProcess, log: Log, names: tuple[str, str, str, str]
) -> None:
    """The issue's reproduction: ``[ta, tb, tc]``, task 0 (ta) commits, the driver dies, ta is
    deleted; the re-run must not give tb position 0 (found committed, skipped: tb lost)."""
    ta, tb, tc, out = names
    for name in (ta, tb, tc):
        log.create_topic(name, partitions=1)
        send(log, name, values(name, 5))
    first = planner(served, [ta, tb, tc])
    start = first.initial_offsets()
    end = first.latest_offset(start, AdmissionLimit())
    tasks = first.plan(start, end)
    first.close()
    assert [t.topic for t in tasks] == [ta, tb, tc]  # type: ignore[attr-defined]
    batch = SparkLikeBatch(served, out)
    try:
        assert batch.run_task(0, tasks[0]).committed  # then the driver dies
        log.delete_topic(ta)
        batch.rerun(planner(served, [ta, tb, tc]), start, end)
    finally:
        batch.close()
    assert output(log, out) == Counter(values(ta, 5) + values(tb, 5) + values(tc, 5))


def test_a_log_start_moved_before_the_rerun_shifts_no_task(
    served: ServeProcess, log: Log, names: tuple[str, str, str, str]
) -> None:
    """``minPartitions`` splits ta ``[0, 12)`` and tb ``[0, 12)`` in two each; tasks 0
    (ta's first half) and 2 (tb's first half) commit, the driver dies, retention moves ta's
    log start. Re-planned from the same offsets, ta's committed task is not re-run trimmed
    (a duplicate), no task of tb shifts onto a committed position (a loss), and every record
    of ta still in the log is read once: only the deleted offsets of the task that had not
    committed are lost, as failOnDataLoss=false permits."""
    ta, tb, _, out = names
    log.create_topic(ta, partitions=1, config={"segment.bytes": 200, "retention.bytes": 1})
    log.create_topic(tb, partitions=1)
    for i in range(6):  # one transaction a value: offsets 0..11, markers between
        send(log, ta, [f"{ta}-{i}".encode()])
        send(log, tb, [f"{tb}-{i}".encode()])
    first = planner(served, [ta, tb], minPartitions="4")
    start = first.initial_offsets()
    end = first.latest_offset(start, AdmissionLimit())
    tasks = first.plan(start, end)
    first.close()
    spans = [(t.topic, t.start, t.end) for t in tasks]  # type: ignore[attr-defined]
    assert spans == [(ta, 0, 6), (ta, 6, 12), (tb, 0, 6), (tb, 6, 12)]
    batch = SparkLikeBatch(served, out)
    try:
        assert batch.run_task(0, tasks[0]).committed
        assert batch.run_task(2, tasks[2]).committed  # then the driver dies
        tp = TopicPartition(ta, 0)
        assert log.partition_log(tp).delete_old_segments()
        log_start = log.partition_log(tp).log_start_offset
        assert 6 < log_start < 12
        batch.rerun(planner(served, [ta, tb], minPartitions="4"), start, end)
    finally:
        batch.close()
    # ta's values sit at even offsets (a commit marker after each): value i at offset 2 i
    kept_of_ta = [f"{ta}-{i}".encode() for i in range(3, 6) if 2 * i >= log_start]
    expected = values(ta, 3) + kept_of_ta + values(tb, 6)
    assert output(log, out) == Counter(expected)
