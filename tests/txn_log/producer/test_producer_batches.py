"""The producer's Arrow path (issue 13 item 3): ``send_batch`` goes through the same buffers,
registration, sequences (P-08, P-09), split rule (F-09) and memory bound as ``send()``, and
``prepare_transaction`` (KIP-939's first phase) leaves a durable transaction open for the
coordinator's atomic commit (C-16, C-36, C-38, P-13)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.txn_log.producer.test_producer_errors import (  # the same log: topics out and small
    LIMIT,
    OUT0,
    OUT1,
    SMALL0,
    assert_consecutive_sequences,
)
from txn_log.clock import ManualClock
from txn_log.coordinator.txn_ref import TxnRef
from txn_log.errors import (
    ConfigError,
    InvalidRecordError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionAbortableError,
    UnknownTopicOrPartitionError,
)
from txn_log.log import Log
from txn_log.producer.producer import PartitionWrites
from txn_log.record.batch_header import BatchHeader
from txn_log.topic_partition import TopicPartition


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log", clock=ManualClock())
    log.create_topic("out", partitions=2)
    log.create_topic("small", partitions=1, config={"max.message.bytes": LIMIT})
    return log


def rows(start: int, count: int, *, size: int = 10) -> pa.RecordBatch:
    values = [f"{i:0>{size}}".encode() for i in range(start, start + count)]
    keys = [f"k{i}".encode() for i in range(start, start + count)]
    return pa.record_batch(
        [pa.array(keys, pa.binary()), pa.array(values, pa.binary())], names=["key", "value"]
    )


def values(log: Log, tp: TopicPartition, level: str = "read_committed") -> list[bytes | None]:
    return [r.value for r in log.consumer(level).read(tp, 0)]


def headers(log: Log, tp: TopicPartition) -> list[BatchHeader]:
    return [h for h, _ in log.partition_log(tp).read(0) if not h.is_control]


def test_arrow_batches_and_records_share_one_path_and_keep_send_order(log: Log) -> None:
    """Records and Arrow batches sent to one partition land in send order, with one run of
    sequence numbers (P-08, P-09), invisible until the commit (C-36)."""
    producer = log.producer("t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_batch(OUT0, rows(0, 3))
    producer.send("out", b"%010d" % 3, partition=0)
    producer.send_batch(OUT0, rows(4, 2))
    producer.send_batch(OUT1, pa.Table.from_batches([rows(6, 2), rows(8, 2)]))
    producer.flush()
    assert values(log, OUT0) == []
    producer.commit_transaction()
    assert values(log, OUT0) == [b"%010d" % i for i in range(6)]
    assert values(log, OUT1) == [b"%010d" % i for i in range(6, 10)]
    assert_consecutive_sequences(headers(log, OUT0))
    assert all(h.is_transactional for h in headers(log, OUT0))


def test_a_partition_buffer_leaves_at_batch_size_and_all_stay_within_buffer_memory(
    log: Log,
) -> None:
    """A buffer is appended before it passes batch.size; before buffering past
    buffer.memory, the largest buffers are appended (Kafka's producer blocks send())."""
    piece = rows(0, 100)
    producer = log.producer(batch_size=piece.nbytes * 3, buffer_memory=piece.nbytes * 4)
    for start in range(0, 4_000, 100):
        producer.send_batch(OUT0 if start % 200 else OUT1, rows(start, 100))
    assert producer.peak_buffered_bytes <= piece.nbytes * 4
    producer.flush()
    for tp in (OUT0, OUT1):
        found = headers(log, tp)
        assert max(h.records_count for h in found) <= 300, "a batch past batch.size"
        assert_consecutive_sequences(found)
    got = sorted(values(log, OUT0) + values(log, OUT1))
    assert got == [b"%010d" % i for i in range(4_000)]


def test_memory_is_bounded_over_many_partitions(tmp_path: Path) -> None:
    log = Log.open(tmp_path, clock=ManualClock())
    log.create_topic("wide", partitions=8)
    piece = rows(0, 50)
    producer = log.producer(batch_size=1 << 20, buffer_memory=piece.nbytes * 5)
    for n in range(80):
        producer.send_batch(TopicPartition("wide", n % 8), rows(n * 50, 50))
    assert producer.peak_buffered_bytes <= piece.nbytes * 5
    producer.flush()
    total = sum(len(values(log, tp)) for tp in log.partitions("wide"))
    assert total == 80 * 50


def test_a_batch_too_large_for_the_topic_is_split_with_consecutive_sequences(log: Log) -> None:
    """F-09 and the one split rule: an Arrow batch that encodes past max.message.bytes is
    appended in parts, in order, each with the next sequence."""
    rng = random.Random(13)
    payload = [rng.randbytes(300) for _ in range(200)]  # does not compress
    producer = log.producer("t", compression="gzip")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_batch(SMALL0, pa.record_batch([pa.array(payload, pa.binary())], ["value"]))
    producer.commit_transaction()
    found = headers(log, SMALL0)
    assert len(found) >= 6  # 60 KB in batches of at most 10 KB
    assert all(h.size_in_bytes <= LIMIT for h in found)
    assert_consecutive_sequences(found)
    assert values(log, SMALL0) == payload
    assert producer.transaction_writes() == {}  # no transaction open: nothing counted


def test_a_row_too_large_alone_fails_and_the_transaction_is_abortable_only(log: Log) -> None:
    producer = log.producer("t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_batch(OUT0, rows(0, 2))
    with pytest.raises(Exception, match=r"small-0: record of .* max.message.bytes of 10000"):
        producer.send_batch(SMALL0, rows(0, 1, size=LIMIT + 1))
    with pytest.raises(TransactionAbortableError):
        producer.commit_transaction()
    producer.abort_transaction()
    assert values(log, OUT0) == [] and values(log, SMALL0) == []
    producer.begin_transaction()  # usable again after the abort
    producer.send_batch(OUT0, rows(5, 1))
    producer.commit_transaction()
    assert values(log, OUT0) == [b"%010d" % 5]


@pytest.mark.parametrize(
    ("tp", "records", "error", "match"),
    [
        (TopicPartition("out", 2), rows(0, 1), UnknownTopicOrPartitionError, r"0\.\.1"),
        (TopicPartition("nope", 0), rows(0, 1), UnknownTopicOrPartitionError, "nope"),
        (OUT0, [b"not arrow"], ConfigError, "RecordBatch or Table"),
        (("out", 0), rows(0, 1), ConfigError, "TopicPartition"),
        (TopicPartition("__transaction_state", 0), rows(0, 1), Exception, "internal"),
    ],
)
def test_bad_sends_are_refused_before_anything_is_buffered(
    log: Log, tp: Any, records: Any, error: type[Exception], match: str
) -> None:
    producer = log.producer()
    with pytest.raises(error, match=match):
        producer.send_batch(tp, records)
    assert producer.peak_buffered_bytes == 0
    producer.flush()
    assert values(log, OUT0, "read_uncommitted") == []


def test_unusable_columns_fail_at_the_append_naming_the_column(log: Log) -> None:
    producer = log.producer()
    producer.send_batch(OUT0, pa.record_batch([pa.array([1, 2])], names=["value"]))
    with pytest.raises(InvalidRecordError, match="value"):
        producer.flush()


def test_prepare_leaves_a_durable_transaction_for_the_atomic_commit(log: Log) -> None:
    """KIP-939's first phase: appended and durable, still owned, not visible; whoever holds
    the prepared state commits it (the coordinator's atomic commit)."""
    producer = log.producer("task-0")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_batch(OUT0, rows(0, 3))
    producer.send_batch(OUT1, rows(3, 1))
    prepared = producer.prepare_transaction()
    assert producer.transaction_writes() == {
        OUT0: PartitionWrites(3, 1),
        OUT1: PartitionWrites(1, 1),
    }
    assert values(log, OUT0) == [] and len(values(log, OUT0, "read_uncommitted")) == 3
    with pytest.raises(InvalidTxnStateError, match="outside a transaction"):
        producer.send_batch(OUT0, rows(9, 1))
    with pytest.raises(InvalidTxnStateError, match="prepared"):
        producer.commit_transaction()
    ref = TxnRef(prepared.transactional_id, prepared.producer_id, prepared.producer_epoch)
    assert log.coordinator.commit_transactions("ledger", 0, [ref])
    assert values(log, OUT0) == [b"%010d" % i for i in range(3)]


def test_a_prepared_instance_fenced_meanwhile_hears_that_it_was_fenced(log: Log) -> None:
    """A send after prepare is refused; when a newer instance fenced this one meanwhile, the
    error says so (fatal, P-13), and the abort of the stale instance is a no-op for the new."""
    stale = log.producer("task-0")
    stale.init_transactions()
    stale.begin_transaction()
    stale.send_batch(OUT0, rows(0, 1))
    stale.prepare_transaction()
    fresh = log.producer("task-0")
    fresh.init_transactions()  # fences ``stale`` and aborts its transaction (C-24)
    with pytest.raises(ProducerFencedError):
        stale.send_batch(OUT0, rows(1, 1))
    with pytest.raises(ProducerFencedError):
        stale.abort_transaction()
    fresh.begin_transaction()
    fresh.send_batch(OUT0, rows(2, 1))
    fresh.commit_transaction()
    assert values(log, OUT0) == [b"%010d" % 2]


def test_prepare_of_a_fenced_instance_fails(log: Log) -> None:
    stale = log.producer("task-0")
    stale.init_transactions()
    stale.begin_transaction()
    stale.send_batch(OUT0, rows(0, 1))
    log.producer("task-0").init_transactions()
    with pytest.raises(ProducerFencedError):
        stale.prepare_transaction()


def test_register_partitions_opens_the_transaction_before_any_append(log: Log) -> None:
    """C-16: registered ahead of its records, the partition holds the LSO (an open
    transaction) even while the records are still buffered."""
    producer = log.producer("task-0")
    producer.init_transactions()
    producer.begin_transaction()
    producer.register_partitions([OUT0, OUT1])
    assert [m.transactional_id for m in log.coordinator.open_transactions("task")] == ["task-0"]
    producer.send_batch(OUT0, rows(0, 1))
    producer.abort_transaction()
    assert log.coordinator.open_transactions("task") == []
    assert values(log, OUT0, "read_uncommitted") == []  # dropped from the buffer, never written


def test_batches_with_other_columns_for_one_partition_keep_their_order(log: Log) -> None:
    """Arrow batches of different schemas cannot share a record batch: the buffered ones are
    appended first, so each is encoded on its own and send order holds."""
    producer = log.producer()
    producer.send_batch(OUT0, rows(0, 2))  # key and value
    producer.send_batch(OUT0, pa.record_batch([pa.array([b"%010d" % 2])], names=["value"]))
    producer.send_batch(OUT0, rows(3, 1))
    producer.flush()
    assert values(log, OUT0) == [b"%010d" % i for i in range(4)]
    assert [r.key for r in log.consumer().read(OUT0, 0)] == [b"k0", b"k1", None, b"k3"]
