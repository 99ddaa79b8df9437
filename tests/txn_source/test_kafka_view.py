"""Kafka mode's driver view and planning (issue 16 item 2) against a real ``txnlog serve``
process: partitions from the cluster's metadata, offsets from ListOffsets at the query's
isolation level (the LSO under read_committed), timestamps from offsets_for_times, the same
answers as the embedded ``LogView`` over the same log, and planning that makes Kafka tasks
held back at an open transaction."""

from __future__ import annotations

import pickle

import pytest

from offsets.admission import AdmissionLimit
from offsets.partition_offsets import PartitionOffsets
from tests.txn_source.kafka_served import cluster_of, log, send, served, topic
from tests.txn_wire.serve_process import ServeProcess
from txn_log.consumer.read_committed import IsolationLevel
from txn_log.errors import ConfigError, OffsetOutOfRangeError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_source.kafka_partition import KafkaInputPartition, read_kafka_partition
from txn_source.kafka_view import KafkaView
from txn_source.log_view import LogView
from txn_source.options import Assign, Subscribe, SubscribePattern, parse_source_options
from txn_source.reader import TxnLogBatchReader
from txn_source.schema import kafka_schema
from txn_source.source_view import open_view
from txn_source.stream_planner import StreamPlanner

__all__ = ["log", "served", "topic"]  # fixtures

T0 = 1_700_000_000_000


def view(served: ServeProcess, level: IsolationLevel = IsolationLevel.READ_COMMITTED) -> KafkaView:
    return KafkaView(cluster_of(served), level)


def options(served: ServeProcess, topic: str, streaming: bool = True, **extra: str):  # type: ignore[no-untyped-def]
    given = {
        "kafka.bootstrap.servers": served.bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "kafkaConsumer.pollTimeoutMs": "20000",
        **extra,
    }
    return parse_source_options(given, streaming=streaming)


def read_all(tasks: list[object]) -> list[bytes]:
    out: list[bytes] = []
    for task in tasks:
        assert isinstance(task, KafkaInputPartition)
        for batch in read_kafka_partition(pickle.loads(pickle.dumps(task))):
            out.extend(batch.column("value").to_pylist())
    return out


def test_b07_t17_offsets_at_each_isolation_level_are_the_embedded_views(
    served: ServeProcess, log: Log, topic: str
) -> None:
    """B-07 through the wire: latest is the LSO under read_committed, the high watermark under
    read_uncommitted; earliest, log end and timestamps (T-17: capped at the LSO) agree with
    ``LogView`` on the same log."""
    log.create_topic(topic, partitions=2)
    producer = log.producer("ts")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(4):
        producer.send(topic, b"v%d" % i, partition=0, timestamp_ms=T0 + 10 * i)
    producer.commit_transaction()
    held = send(log, topic, [b"o0", b"o1"], txn_id="open", end="open")
    tp, empty = TopicPartition(topic, 0), TopicPartition(topic, 1)
    try:
        for level in IsolationLevel:
            with view(served, level) as kafka, LogView(str(served.path), level) as local:
                for part in (tp, empty):
                    got = (kafka.earliest(part), kafka.latest(part), kafka.log_end(part))
                    assert got == (local.earliest(part), local.latest(part), local.log_end(part))
                missing = [TopicPartition(topic, 2), TopicPartition(f"{topic}-none", 0)]
                bounds = kafka.log_bounds([tp, empty, *missing])
                assert bounds == local.log_bounds([tp, empty, *missing])
                assert bounds == {tp: (0, 7), empty: (0, 0), missing[0]: None, missing[1]: None}
                for ts in (T0 - 1, T0 + 15, T0 + 30, T0 + 31, 2 * T0):
                    assert kafka.for_timestamp(tp, ts) == local.for_timestamp(tp, ts)
        with view(served) as kafka:
            assert (kafka.latest(tp), kafka.log_end(tp)) == (5, 7)
            assert kafka.for_timestamp(tp, T0 + 15) == 2
            assert kafka.for_timestamp(tp, T0 + 31) == 5  # the marker's time: capped at the LSO
            assert kafka.for_timestamp(tp, 2 * T0) is None  # every record is older
        with view(served, IsolationLevel.READ_UNCOMMITTED) as kafka:
            assert kafka.latest(tp) == 7
    finally:
        held.abort_transaction()


def test_partitions_from_the_cluster_metadata(served: ServeProcess, log: Log, topic: str) -> None:
    log.create_topic(topic, partitions=3)
    log.create_topic(f"{topic}-other", partitions=1)
    with view(served) as kafka:
        assert kafka.partitions(Subscribe((topic, "missing"))) == [
            TopicPartition(topic, p) for p in range(3)
        ]
        pattern = kafka.partitions(SubscribePattern(f"{topic}.*|__.*"))
        assert pattern == [
            *(TopicPartition(topic, p) for p in range(3)),
            TopicPartition(f"{topic}-other", 0),
        ]  # Kafka's internal topics never match a pattern
        assigned = Assign((TopicPartition(topic, 2),))
        assert kafka.partitions(assigned) == [TopicPartition(topic, 2)]
        with pytest.raises(ConfigError, match=rf"partition {topic}-3 does not exist.*0\.\.2"):
            kafka.partitions(Assign((TopicPartition(topic, 3),)))
        with pytest.raises(ConfigError, match="topic 'missing' does not exist in Kafka cluster"):
            kafka.partitions(Assign((TopicPartition("missing", 0),)))
        assert kafka.exists(TopicPartition(topic, 2)) and not kafka.exists(TopicPartition(topic, 3))


def test_b05_stream_planning_holds_back_at_an_open_transaction_and_skips_aborted_ones(
    served: ServeProcess, log: Log, topic: str
) -> None:
    """B-05: a micro-batch ends at the LSO, the first offset of the open transaction, and
    moves on only when it ends; the aborted record is planned over but never read."""
    log.create_topic(topic, partitions=1)
    tp = TopicPartition(topic, 0)
    send(log, topic, [b"c1", b"c2"])  # 0, 1, marker 2
    send(log, topic, [b"x1"], end="abort")  # 3, marker 4
    held = send(log, topic, [b"o1"], txn_id="open", end="open")  # 5
    send(log, topic, [b"c3"])  # 6, marker 7: after the open transaction
    planner = StreamPlanner(options(served, topic))
    try:
        start = planner.initial_offsets()
        assert start == PartitionOffsets.of({tp: 0})
        end = planner.latest_offset(start, AdmissionLimit())
        assert end == PartitionOffsets.of({tp: 5})  # the LSO: the open transaction's first
        tasks = planner.plan(start, end)
        assert all(isinstance(t, KafkaInputPartition) for t in tasks)
        assert read_all(tasks) == [b"c1", b"c2"]
        assert planner.latest_offset(end, AdmissionLimit()) == end  # held while it is open
        held.commit_transaction()  # 8
        later = planner.latest_offset(end, AdmissionLimit())
        assert later == PartitionOffsets.of({tp: 9})
        assert read_all(planner.plan(end, later)) == [b"o1", b"c3"]
    finally:
        planner.close()


def test_max_offsets_per_trigger_splits_a_backlog(
    served: ServeProcess, log: Log, topic: str
) -> None:
    log.create_topic(topic, partitions=1)
    for i in range(5):
        send(log, topic, [b"%d-%d" % (i, j) for j in range(3)])  # 4 offsets each
    planner = StreamPlanner(options(served, topic, maxOffsetsPerTrigger="6"))
    seen: list[bytes] = []
    position = planner.initial_offsets()
    try:
        for _ in range(10):
            end = planner.latest_offset(position, AdmissionLimit(max_rows=6))
            if end == position:
                break
            assert end[TopicPartition(topic, 0)] - position[TopicPartition(topic, 0)] <= 6
            seen += read_all(planner.plan(position, end))
            position = end
    finally:
        planner.close()
    assert seen == [b"%d-%d" % (i, j) for i in range(5) for j in range(3)]
    assert position == PartitionOffsets.of({TopicPartition(topic, 0): 20})


def test_planning_reports_offsets_deleted_before_the_batch_as_data_loss(
    served: ServeProcess, log: Log, topic: str
) -> None:
    """failOnDataLoss against the log start, as in embedded mode."""
    log.create_topic(topic, partitions=1, config={"segment.bytes": 200, "retention.bytes": 1})
    for i in range(6):
        send(log, topic, [b"v%d" % i])
    tp = TopicPartition(topic, 0)
    planner = StreamPlanner(options(served, topic))
    lenient = StreamPlanner(options(served, topic, failOnDataLoss="false"))
    try:
        start = planner.initial_offsets()
        end = planner.latest_offset(start, AdmissionLimit())
        assert log.partition_log(tp).delete_old_segments()
        kept = log.partition_log(tp).log_start_offset
        with pytest.raises(OffsetOutOfRangeError, match=rf"offsets \[0, {kept}\) of {tp}"):
            planner.plan(start, end)
        tasks = lenient.plan(start, end)
        assert [t.start for t in tasks] == [kept]  # type: ignore[attr-defined]
        left = read_all(tasks)
        assert left and left == [b"v%d" % i for i in range(6)][-len(left) :]
    finally:
        planner.close()
        lenient.close()


def test_batch_planning_resolves_starting_and_ending_offsets_in_kafka_mode(
    served: ServeProcess, log: Log, topic: str
) -> None:
    log.create_topic(topic, partitions=1)
    send(log, topic, [b"a", b"b", b"c"])  # 0..2, marker 3
    send(log, topic, [b"d"])  # 4, marker 5
    given = {
        "startingOffsets": f'{{"{topic}": {{"0": 1}}}}',
        "endingOffsets": f'{{"{topic}": {{"0": 5}}}}',
    }
    reader = TxnLogBatchReader(
        {"kafka.bootstrap.servers": served.bootstrap, "subscribe": topic, **given},
        kafka_schema(False),
    )
    tasks = reader.partitions()
    assert [(t.start, t.end) for t in tasks] == [(1, 5)]  # type: ignore[attr-defined]
    assert read_all(list(tasks)) == [b"b", b"c", b"d"]
    with pytest.raises(ConfigError, match="past the log end offset 6"):
        TxnLogBatchReader(
            {
                "kafka.bootstrap.servers": served.bootstrap,
                "subscribe": topic,
                "endingOffsets": f'{{"{topic}": {{"0": 7}}}}',
            },
            kafka_schema(False),
        ).partitions()


def test_the_view_is_picked_by_the_location(served: ServeProcess, topic: str) -> None:
    with open_view(options(served, topic)) as picked:
        assert isinstance(picked, KafkaView)
    local = parse_source_options({"path": str(served.path), "subscribe": topic})
    with open_view(local) as picked:
        assert isinstance(picked, LogView)
