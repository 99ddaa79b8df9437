"""Kafka mode's read task (issue 16 item 2) against a real ``txnlog serve`` process: an assigned
read_committed confluent-kafka consumer stops on its position reaching the planned end, never
on "the record at end-1 arrived" (markers and aborted records leave gaps: SPARK-25005), emits
the embedded source's schema in bounded batches, and reports data loss as embedded mode does.

The log of most tests, partition 0 of a fresh topic:

    0 a0  1 a1  2 a2  3 COMMIT | 4 x0  5 x1  6 ABORT | 7 b0  8 b1  9 COMMIT | 10 o0  11 o1 (open)

so the last stable offset is 10 and the high watermark 12.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from offsets.offset_range import OffsetRange
from tests.txn_source.kafka_served import cluster_of, log, send, served, topic
from tests.txn_wire.serve_process import ServeProcess
from txn_log.consumer.read_committed import IsolationLevel
from txn_log.errors import OffsetOutOfRangeError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_source import kafka_clients, kafka_partition
from txn_source.kafka_partition import KafkaInputPartition, read_kafka_partition
from txn_source.kafka_view import KafkaClientError
from txn_source.log_view import LogView
from txn_source.partition import TxnLogInputPartition, read_partition
from txn_source.schema import arrow_kafka_schema

__all__ = ["log", "served", "topic"]  # fixtures

POLL_TIMEOUT_MS = 20_000  # far above any read here: a read that waits for it would fail a test
A, B, X, OPEN = [b"a0", b"a1", b"a2"], [b"b0", b"b1"], [b"x0", b"x1"], [b"o0", b"o1"]


@pytest.fixture
def gapped(log: Log, topic: str) -> Iterator[str]:
    """The log of the module docstring; the open transaction is aborted at the end."""
    log.create_topic(topic, partitions=1)
    send(log, topic, A)
    send(log, topic, X, end="abort")
    send(log, topic, B)
    producer = send(log, topic, OPEN, txn_id="open", end="open")
    yield topic
    producer.abort_transaction()


def task(
    served: ServeProcess, topic: str, start: int, end: int, **changes: Any
) -> KafkaInputPartition:
    planned = KafkaInputPartition(
        cluster=cluster_of(served),
        topic=topic,
        partition=0,
        start=start,
        end=end,
        isolation_level="read_committed",
        include_headers=False,
        fail_on_data_loss=True,
        poll_timeout_ms=POLL_TIMEOUT_MS,
    )
    return pickle.loads(pickle.dumps(dataclasses.replace(planned, **changes)))


def read(p: KafkaInputPartition) -> list[tuple[int, bytes]]:
    return [(r["offset"], r["value"]) for b in read_kafka_partition(p) for r in b.to_pylist()]


def at(offsets: list[int], values: list[bytes]) -> list[tuple[int, bytes]]:
    return list(zip(offsets, values, strict=True))


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (0, 3, at([0, 1, 2], A)),  # ends at the commit marker
        (0, 4, at([0, 1, 2], A)),  # ends just past the marker: the next record is 7
        (0, 5, at([0, 1, 2], A)),  # ends inside the aborted transaction
        (0, 6, at([0, 1, 2], A)),  # ends at the abort marker
        (4, 7, []),  # only aborted records and a marker: nothing, and no wait
        (5, 9, at([7, 8], B)),
        (0, 8, at([0, 1, 2, 7], [*A, b"b0"])),  # offset 8 arrives and is dropped
        (0, 10, at([0, 1, 2, 7, 8], A + B)),  # ends at the LSO, the last offset a marker
        (9, 10, []),  # one marker
    ],
)
def test_read_committed_stops_on_position_not_on_the_record_at_end_minus_one(
    served: ServeProcess, gapped: str, start: int, end: int, expected: list[tuple[int, bytes]]
) -> None:
    assert read(task(served, gapped, start, end)) == expected


def test_a_range_ending_at_the_lso_never_reads_the_open_transaction_held_back(
    served: ServeProcess, gapped: str
) -> None:
    """The range planned at the LSO (10) ends there although records 10 and 11 are fetched
    by read_uncommitted; read_uncommitted reads everything up to the high watermark."""
    assert read(task(served, gapped, 0, 10))[-1] == (8, b"b1")
    uncommitted = task(served, gapped, 0, 12, isolation_level="read_uncommitted")
    assert read(uncommitted) == at([0, 1, 2, 4, 5, 7, 8, 10, 11], A + X + B + OPEN)


def test_batches_have_the_embedded_schema_and_a_bounded_size(
    served: ServeProcess, gapped: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka_partition, "MAX_ROWS_PER_BATCH", 2)
    for headers in (False, True):
        batches = list(read_kafka_partition(task(served, gapped, 0, 10, include_headers=headers)))
        assert [b.num_rows for b in batches] == [2, 2, 1]
        assert all(b.schema == arrow_kafka_schema(headers) for b in batches)


def test_a_worker_reuses_its_consumer_and_no_task_sees_another_tasks_records(
    served: ServeProcess, log: Log, gapped: str
) -> None:
    """One consumer reads task after task (``kafka_clients``), each exactly its own range,
    whatever the last one had fetched beyond its end; a task whose reader stops early closes
    its consumer instead of handing it back."""
    other = gapped + "-other"
    log.create_topic(other, partitions=2)
    for partition in (0, 1):
        producer = log.producer(f"o{partition}")
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(5):
            producer.send(other, b"p%d-%d" % (partition, i), partition=partition)
        producer.commit_transaction()
    kafka_clients.close_idle()
    assert read(task(served, gapped, 0, 3)) == at([0, 1, 2], A)  # 7, 8, ... fetched beyond
    ((reused, _),) = kafka_clients._idle[(cluster_of(served), IsolationLevel.READ_COMMITTED)]
    assert read(task(served, other, 1, 3, partition=1)) == at([1, 2], [b"p1-1", b"p1-2"])
    assert read(task(served, other, 2, 4)) == at([2, 3], [b"p0-2", b"p0-3"])
    assert read(task(served, gapped, 5, 9)) == at([7, 8], B)
    assert [
        c for c, _ in kafka_clients._idle[(cluster_of(served), IsolationLevel.READ_COMMITTED)]
    ] == [reused]
    stopped = read_kafka_partition(task(served, other, 0, 5, partition=1))
    next(stopped)
    stopped.close()  # Spark stopped reading (a limit): the consumer is not handed back
    assert kafka_clients._idle[(cluster_of(served), IsolationLevel.READ_COMMITTED)] == []
    assert read(task(served, other, 0, 5, partition=1)) == at(
        [0, 1, 2, 3, 4], [b"p1-%d" % i for i in range(5)]
    )


def test_the_same_rows_as_the_embedded_source_on_the_same_log(
    served: ServeProcess, log: Log, topic: str
) -> None:
    """Every column, headers and keys included, from the served log and from its files."""
    log.create_topic(topic, partitions=1)
    producer = log.producer("h")
    producer.init_transactions()
    for n in range(3):
        producer.begin_transaction()
        for i in range(4):
            producer.send(
                topic,
                None if i == 3 else b"v%d-%d" % (n, i),
                key=None if i == 2 else b"k%d" % i,
                partition=0,
                headers=[("h", b"x"), ("n", None)] if i == 1 else None,
                timestamp_ms=1_700_000_000_000 + n * 10 + i,
            )
        if n == 1:
            producer.flush()
            producer.abort_transaction()
        else:
            producer.commit_transaction()
    tp = TopicPartition(topic, 0)
    with LogView(str(served.path), IsolationLevel.READ_COMMITTED) as view:
        end = view.latest(tp)
        aborted = view.aborted_txns(OffsetRange(tp, 0, end))
    embedded = TxnLogInputPartition(
        topic=topic,
        partition=0,
        start=0,
        end=end,
        isolation_level="read_committed",
        include_headers=True,
        fail_on_data_loss=True,
        path=str(served.path),
        aborted_txns=aborted,
    )
    expected = [r for b in read_partition(embedded) for r in b.to_pylist()]
    kafka = task(served, topic, 0, end, include_headers=True)
    got = [r for b in read_kafka_partition(kafka) for r in b.to_pylist()]
    assert len(expected) == 8 and end == 15
    assert got == expected


@pytest.fixture
def shrinking(log: Log, topic: str) -> str:
    """One partition whose old segments retention may delete: offsets 0..11 (6 commits)."""
    log.create_topic(topic, partitions=1, config={"segment.bytes": 200, "retention.bytes": 1})
    for i in range(6):
        send(log, topic, [b"v%d" % i])
    return topic


def test_offsets_deleted_after_planning_are_data_loss(
    served: ServeProcess, log: Log, shrinking: str
) -> None:
    tp = TopicPartition(shrinking, 0)
    planned = task(served, shrinking, 0, 12)
    assert log.partition_log(tp).delete_old_segments()
    kept = log.partition_log(tp).log_start_offset
    assert kept > 0
    with pytest.raises(OffsetOutOfRangeError, match=rf"offsets \[0, {kept}\) of {tp} were deleted"):
        read(planned)
    lenient = read(dataclasses.replace(planned, fail_on_data_loss=False))
    assert lenient and lenient[0][0] >= kept
    assert [v for _, v in lenient] == [b"v%d" % i for i in range(6 - len(lenient), 6)]


def test_a_deleted_topic_is_data_loss(served: ServeProcess, log: Log, shrinking: str) -> None:
    planned = task(served, shrinking, 0, 12)
    log.delete_topic(shrinking)
    with pytest.raises(OffsetOutOfRangeError, match=rf"{shrinking}-0 is gone"):
        read(planned)
    assert read(dataclasses.replace(planned, fail_on_data_loss=False)) == []


def test_a_range_reaching_into_an_open_transaction_fails_naming_the_offset_after_the_timeout(
    served: ServeProcess, gapped: str
) -> None:
    """B-05: never planned (the source plans up to the LSO), but a task that asks for it does
    not hang: its position stops at the LSO, and after kafkaConsumer.pollTimeoutMs the task
    fails naming the partition and offset, not as data loss."""
    reaching = task(served, gapped, 0, 12, poll_timeout_ms=1500)
    with pytest.raises(
        KafkaClientError, match=rf"{gapped}-0 .*stopped at offset 10, below the planned end 12"
    ):
        read(reaching)
