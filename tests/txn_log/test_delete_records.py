"""DeleteRecords on the engine (``Log.delete_records``, Kafka's API 21; issue 25 item 7): the log
start moves into the middle of a segment, durably, only forward, and every reader honours it:
reads below it are out of range, the earliest offset is it, timestamp lookups start at it, the
LSO never falls below it (B-03, B-04), and retention deletes the segments wholly below it
(T-10) without moving it back. Refusals change nothing (STYLE 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import directory_bytes, open_transaction
from txn_log import (
    ConfigError,
    DeleteRecordsResult,
    InvalidTopicError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from txn_log.log import Log
from txn_log.storage.log_start_checkpoint import CHECKPOINT_FILE

T0 = TopicPartition("t", 0)


def produce(log: Log, count: int, *, topic: str = "t", key: bytes | None = None) -> None:
    """``count`` records, one batch each (so small segments roll between them)."""
    producer = log.producer()
    for _ in range(count):
        producer.send(topic, b"v%d" % log.partition_reader(TopicPartition(topic, 0)).log_end_offset,
                      key=key, partition=0)  # fmt: skip
        producer.flush()
    producer.close()


def offsets(log: Log, start: int, isolation: str = "read_committed") -> list[int]:
    return [r.offset for r in log.consumer(isolation).read(T0, start)]


@pytest.fixture
def log(tmp_path: Path) -> Log:
    opened = Log.open(tmp_path / "log", housekeeping_interval_ms=None)
    opened.create_topic("t", 1, {"segment.bytes": 200})
    produce(opened, 10)
    return opened


def test_the_log_start_moves_into_a_segment_and_readers_refuse_below_it(log: Log) -> None:
    reader = log.partition_reader(T0)
    bases = [s.base_offset for s in reader.segments]
    middle = next(b for b in bases if b > 0) + 1  # not a segment base: inside a segment
    assert middle not in bases
    assert log.delete_records({T0: middle}) == {T0: DeleteRecordsResult(T0, middle)}
    assert reader.log_start_offset == middle
    assert log.consumer().start_offset(T0) == middle
    assert offsets(log, middle) == list(range(middle, 10))
    with pytest.raises(OffsetOutOfRangeError, match=rf"offset {middle - 1} is outside the log "
                       rf"\[{middle}, 10\]"):  # fmt: skip
        log.consumer().read(T0, middle - 1)
    assert reader.offset_for_timestamp(0) == middle  # KIP-32 lookups start at the log start


def test_minus_one_is_the_high_watermark_and_the_start_only_moves_forward(log: Log) -> None:
    assert log.delete_records({T0: 6})[T0].low_watermark == 6
    assert log.delete_records({T0: 3})[T0].low_watermark == 6  # below the start: no change
    assert log.delete_records({T0: -1})[T0].low_watermark == 10
    assert log.partition_reader(T0).log_start_offset == 10
    assert offsets(log, 10) == []
    produce(log, 2)
    assert offsets(log, 10) == [10, 11]


@pytest.mark.parametrize("offset", [11, -2, 2**63 - 1])
def test_an_offset_outside_zero_to_the_high_watermark_is_refused_and_changes_nothing(
    log: Log, offset: int
) -> None:
    before = directory_bytes(log.path, content_only=True)
    result = log.delete_records({T0: offset})[T0]
    assert result.low_watermark == -1
    assert isinstance(result.error, OffsetOutOfRangeError)
    assert str(result.error) == (
        f"t-0: cannot delete records before offset {offset}: the offset must lie in [0, 10] "
        "(the high watermark), or be -1 for the high watermark"
    )
    assert directory_bytes(log.path, content_only=True) == before
    assert log.partition_reader(T0).log_start_offset == 0


def test_internal_compacted_and_unknown_partitions_are_refused_each_on_its_own(log: Log) -> None:
    """Kafka's per-partition answers: an internal topic is INVALID_TOPIC (17), a topic whose
    policy does not name delete POLICY_VIOLATION (44), a missing partition unknown (3); the
    other partitions of the same call go on."""
    log.create_topic("kv", 1, {"cleanup.policy": "compact"})
    log.create_topic("both", 1, {"cleanup.policy": "compact,delete"})
    produce(log, 3, topic="both", key=b"k")
    asked = {
        TopicPartition("__consumer_offsets", 0): 0,
        TopicPartition("__transaction_state", 0): -1,
        TopicPartition("kv", 0): 0,
        TopicPartition("t", 1): 0,
        TopicPartition("nowhere", 0): 0,
        TopicPartition("both", 0): 2,
        T0: 4,
    }
    results = log.delete_records(asked)
    kinds = {tp: type(r.error) for tp, r in results.items() if r.error is not None}
    assert kinds == {
        TopicPartition("__consumer_offsets", 0): InvalidTopicError,
        TopicPartition("__transaction_state", 0): InvalidTopicError,
        TopicPartition("kv", 0): PolicyViolationError,
        TopicPartition("t", 1): UnknownTopicOrPartitionError,
        TopicPartition("nowhere", 0): UnknownTopicOrPartitionError,
    }
    assert [results[tp].error.code for tp in kinds] == [17, 17, 44, 3, 3]  # type: ignore[union-attr]
    assert "cleanup.policy=compact" in str(results[TopicPartition("kv", 0)].error)
    assert results[TopicPartition("both", 0)].low_watermark == 2
    assert results[T0].low_watermark == 4
    assert not (log.path / "__consumer_offsets-0" / CHECKPOINT_FILE).exists()
    assert not (log.path / "kv-0" / CHECKPOINT_FILE).exists()


def test_a_read_only_log_refuses_before_anything_changes(log: Log) -> None:
    with Log.open(log.path, read_only=True) as inspecting, pytest.raises(ConfigError):
        inspecting.delete_records({T0: 3})
    assert log.partition_reader(T0).log_start_offset == 0


def test_the_start_survives_reopening_and_another_process_view_sees_it_at_once(
    log: Log,
) -> None:
    with Log.open(log.path, read_only=True) as other:
        view = other.partition_reader(T0)
        assert view.log_start_offset == 0  # opened before the deletion
        log.delete_records({T0: 7})
        assert view.log_start_offset == 7
        with pytest.raises(OffsetOutOfRangeError):
            list(view.read(6))
    log.close()
    with Log.open(log.path, housekeeping_interval_ms=None) as reopened:
        assert reopened.partition_reader(T0).log_start_offset == 7
        assert offsets(reopened, 7) == [7, 8, 9]


def test_retention_deletes_the_segments_wholly_below_the_start_and_keeps_it(log: Log) -> None:
    """T-10 (Kafka's deleteLogStartOffsetBreachedSegments): whatever retention.ms and
    retention.bytes say (unlimited here), a closed segment wholly below the start goes; the one
    holding the start stays, and the start stays where DeleteRecords put it."""
    reader = log.partition_reader(T0)
    bases = [s.base_offset for s in reader.segments]
    start = bases[2] + 1 if bases[2] + 1 < bases[3] else bases[2]
    log.delete_records({T0: start})
    housekeeping = log.run_housekeeping()
    assert housekeeping.partitions[T0].deleted_segments == tuple(bases[:2])
    assert housekeeping.partitions[T0].log_start_offset == start
    assert [s.base_offset for s in reader.segments] == bases[2:]
    assert reader.log_start_offset == start
    assert offsets(log, start) == list(range(start, 10))


def test_an_open_transaction_spanning_the_new_start_holds_the_lso_at_it_then_reads_on(
    log: Log,
) -> None:
    """B-03/B-04 with a start moved past a transaction's first offset (Kafka's
    maybeIncrementFirstUnstableOffset): the LSO goes from the transaction's first offset up to
    the start, never below it and never back; a read_committed reader at the start waits for
    the transaction, then reads its committed records from the start on."""
    producer = open_transaction(log, "tx", [("t", 0, b"a"), ("t", 0, b"b"), ("t", 0, b"c")])
    reader = log.partition_reader(T0)
    assert reader.last_stable_offset == 10
    log.delete_records({T0: 11})
    assert reader.last_stable_offset == 11
    assert offsets(log, 11) == []
    assert offsets(log, 11, "read_uncommitted") == [11, 12]
    producer.commit_transaction()
    assert reader.last_stable_offset == reader.log_end_offset == 14
    assert offsets(log, 11) == [11, 12]
    with Log.open(log.path, read_only=True) as other:  # replayed afresh: the same answers
        assert other.partition_reader(T0).last_stable_offset == 14


def test_an_aborted_transaction_that_began_below_the_start_stays_aborted(log: Log) -> None:
    producer = open_transaction(log, "tx", [("t", 0, b"a"), ("t", 0, b"b")])
    log.delete_records({T0: 11})
    assert log.partition_reader(T0).last_stable_offset == 11
    produce(log, 1)  # 12, after the transaction's records: held back by it
    assert offsets(log, 11) == []
    producer.abort_transaction()
    assert offsets(log, 11) == [12]
    assert offsets(log, 11, "read_uncommitted") == [11, 12]
