"""Transactions end to end on the embedded log: §15 behaviours 1-11 and 13 of the checklist.

A new ``Log.open`` over the same directory is exactly what another process sees (every cache is
rebuilt from the files), so "restart" below means a fresh Log object. Real process kills are in
``processes/test_txn_crash_points.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import directory_bytes
from txn_log.clock import ManualClock
from txn_log.consumer.consumer import ConsumerRecord
from txn_log.errors import (
    ConfigError,
    InvalidProducerEpochError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    TxnLogError,
)
from txn_log.group.group_offsets import OffsetAndMetadata
from txn_log.log import Log
from txn_log.record.codec import encode_records
from txn_log.record.control import ControlType
from txn_log.topic_partition import TopicPartition

OUT0, OUT1, OUT2 = (TopicPartition("out", p) for p in range(3))
IN0 = TopicPartition("in", 0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock) -> Log:
    log = Log.open(tmp_path / "log", clock=clock)
    log.create_topic("out", partitions=3)
    log.create_topic("in", partitions=1)
    return log


def reopen(log: Log) -> Log:
    return Log.open(log.path, clock=log.clock)


def values(records: list[ConsumerRecord]) -> list[bytes | None]:
    return [r.value for r in records]


def committed_values(log: Log, tp: TopicPartition) -> list[bytes | None]:
    return values(log.consumer().read(tp, 0))


def files(path: Path) -> dict[str, bytes]:
    """Every byte the log holds (empty files that merely opening a partition creates aside)."""
    return directory_bytes(path, content_only=True)


# --- 1, 2: idempotence -----------------------------------------------------------------------


def test_1_idempotent_retry_leaves_one_copy(log: Log) -> None:
    """P-10 step 5, G-02: a batch resent with the same producer id, epoch and sequence (a
    lost acknowledgement) is answered with its original offsets, not written again."""
    producer = log.producer()
    producer.send("out", b"a", partition=0)
    producer.send("out", b"b", partition=0)
    (first,) = producer.flush()
    batch = encode_records(
        [(None, b"a", 1, ()), (None, b"b", 1, ())],
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=0,
        now_ms=1,
    )
    retry = log.partition_log(OUT0).append(batch)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (0, 1)
    assert (first.base_offset, first.last_offset) == (0, 1)
    producer.send("out", b"c", partition=0)
    producer.flush()
    assert committed_values(log, OUT0) == [b"a", b"b", b"c"]
    assert committed_values(reopen(log), OUT0) == [b"a", b"b", b"c"]


def test_2_sequence_gap_makes_the_producer_unusable(log: Log) -> None:
    """P-10, P-13: an out-of-order sequence is fatal; every later call raises it again."""
    producer = log.producer()
    producer.send("out", b"a", partition=0)
    producer.flush()
    producer._accumulator._sequences[OUT0] = 5  # white-box: the broker lost batches
    producer.send("out", b"b", partition=0)
    with pytest.raises(OutOfOrderSequenceError, match="expected 1"):
        producer.flush()
    with pytest.raises(OutOfOrderSequenceError, match="cannot be used again"):
        producer.send("out", b"c", partition=0)
    assert committed_values(log, OUT0) == [b"a"]


# --- 3, 4, 5: atomic commit, abort, LSO ---------------------------------------------------------


def test_3_atomic_multi_partition_commit_with_offsets(log: Log) -> None:
    """G-03, O-04: all partitions and the group offsets become visible together at commit."""
    producer = log.producer("copier")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(6):
        producer.send("out", b"v%d" % i, partition=i % 3)
    producer.send_offsets_to_transaction({IN0: 42}, "group")
    producer.flush()
    reader = log.consumer()
    assert [reader.read(tp, 0) for tp in (OUT0, OUT1, OUT2)] == [[], [], []]
    assert log.committed("group", [IN0]) == {IN0: None}
    producer.commit_transaction()
    assert [values(reader.read(tp, 0)) for tp in (OUT0, OUT1, OUT2)] == [
        [b"v0", b"v3"],
        [b"v1", b"v4"],
        [b"v2", b"v5"],
    ]
    assert log.committed("group", [IN0]) == {IN0: OffsetAndMetadata(42)}
    assert reopen(log).committed("group", [IN0]) == {IN0: OffsetAndMetadata(42)}


def test_4_abort_is_invisible_to_read_committed_only(log: Log) -> None:
    """B-13, F-32, G-07: aborted data is filtered; markers are never returned; offsets keep
    their gaps."""
    producer = log.producer("t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"kept-0", partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("out", b"aborted", partition=0)
    producer.send_offsets_to_transaction({IN0: 7}, "group")
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("out", b"kept-1", partition=0)
    producer.commit_transaction()
    committed = log.consumer().read(OUT0, 0)
    assert [(r.offset, r.value) for r in committed] == [(0, b"kept-0"), (4, b"kept-1")]
    uncommitted = log.consumer("read_uncommitted").read(OUT0, 0)
    assert [(r.offset, r.value) for r in uncommitted] == [
        (0, b"kept-0"),
        (2, b"aborted"),
        (4, b"kept-1"),
    ]  # 1, 3 and 5 are markers
    assert log.committed("group", [IN0]) == {IN0: None}
    (aborted,) = log.partition_log(OUT0).collect_aborted_txns(0, 6)
    assert (aborted.first_offset, aborted.last_offset) == (2, 3)


def test_5_open_transaction_pins_the_lso(log: Log) -> None:
    """B-03..B-07: read_committed stops at the first offset of the open transaction, even for
    non-transactional records after it; read_uncommitted reads past it; the marker moves it."""
    producer = log.producer("t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"txn", partition=0)
    producer.flush()
    plain = log.producer()
    plain.send("out", b"plain", partition=0)
    plain.flush()
    reader, dirty = log.consumer(), log.consumer("read_uncommitted")
    assert reader.end_offset(OUT0) == 0 and reader.read(OUT0, 0) == []
    assert dirty.end_offset(OUT0) == 2
    assert values(dirty.read(OUT0, 0)) == [b"txn", b"plain"]
    producer.commit_transaction()
    assert reader.end_offset(OUT0) == 3 == log.partition_log(OUT0).log_end_offset
    assert values(reader.read(OUT0, 0)) == [b"txn", b"plain"]


# --- 6, 7: fencing and recovery across sessions -------------------------------------------------


def test_6_zombie_is_fenced_everywhere(log: Log) -> None:
    """X-02, C-14, G-08: the new instance aborts the zombie's transaction; the zombie's send,
    add-partitions, send-offsets and commit all fail; none of its data is visible."""
    zombie = log.producer("task-0")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("out", b"zombie-1", partition=0)
    zombie.flush()
    successor = reopen(log).producer("task-0")
    successor.init_transactions()
    assert successor.producer_epoch == zombie.producer_epoch + 2  # fence-abort, then bump
    zombie.send("out", b"zombie-2", partition=0)  # buffered; the append must fail
    with pytest.raises(InvalidProducerEpochError):
        zombie.flush()
    for call in (
        lambda: zombie.send("out", b"zombie-3", partition=1),
        lambda: zombie.send_offsets_to_transaction({IN0: 1}, "group"),
        zombie.commit_transaction,
    ):
        with pytest.raises(TxnLogError):
            call()
    other = log.producer("task-1")  # a zombie caught at the coordinator itself
    other.init_transactions()
    stale = log.producer("task-1")
    stale.init_transactions()
    other.begin_transaction()
    other.send("out", b"x", partition=2)  # buffered: send() is asynchronous, as in Kafka
    with pytest.raises(ProducerFencedError):
        other.flush()  # AddPartitionsToTxn before the first write is refused
    assert [committed_values(log, tp) for tp in (OUT0, OUT1, OUT2)] == [[], [], []]
    assert log.consumer().end_offset(OUT0) == log.partition_log(OUT0).log_end_offset


def test_7_next_instance_aborts_an_abandoned_transaction(log: Log) -> None:
    """X-03, G-04: a crash before EndTxn leaves the transaction open; the next
    init_transactions() aborts it before the new instance starts work."""
    crashed = log.producer("job")
    crashed.init_transactions()
    crashed.begin_transaction()
    crashed.send("out", b"lost", partition=1)
    crashed.flush()  # ...and the process dies here
    restarted = reopen(log)
    assert restarted.consumer().end_offset(OUT1) == 0
    successor = restarted.producer("job")
    successor.init_transactions()
    assert restarted.consumer().end_offset(OUT1) == 2  # data + ABORT marker
    assert committed_values(restarted, OUT1) == []
    successor.begin_transaction()
    successor.send("out", b"redone", partition=1)
    successor.commit_transaction()
    assert committed_values(restarted, OUT1) == [b"redone"]


# --- 8: timeouts -------------------------------------------------------------------------------


def test_8_transaction_timeout_aborts_and_fences(log: Log, clock: ManualClock) -> None:
    """C-25, P-18, X-03: past its timeout a transaction is aborted with an epoch bump by the
    next process that touches the coordinator or plans a read; the zombie is then fenced."""
    producer = log.producer("slow", transaction_timeout_ms=100)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"late", partition=0)
    producer.flush()
    reader = reopen(log).consumer()
    assert reader.end_offset(OUT0) == 0
    clock.advance(600)
    assert reader.end_offset(OUT0) == 2  # the reader's planning aborted it
    assert reader.read(OUT0, 0) == []
    with pytest.raises(ProducerFencedError):
        producer.send("out", b"later", partition=0)
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction()
    assert committed_values(log, OUT0) == []


def test_8_timeout_above_the_maximum_is_refused(log: Log) -> None:
    """E-11, CFG-07: the maximum is 15 minutes; nothing is written for a refused request."""
    before = files(log.path)
    producer = log.producer("greedy", transaction_timeout_ms=900_001)
    with pytest.raises(InvalidTransactionTimeoutError, match=r"900001.*900000"):
        producer.init_transactions()
    assert files(log.path) == before
    log.producer("fine", transaction_timeout_ms=900_000).init_transactions()


# --- 9, 10: coordinator restart and stale markers ---------------------------------------------


def test_9_retried_end_txn_after_a_coordinator_restart(log: Log) -> None:
    """C-20, X-06, T13: after COMPLETE, a retried EndTxn with the same command is OK and a
    mismatched one is InvalidTxnState; the state reloads from the state log."""
    producer = log.producer("t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"x", partition=0)
    producer.commit_transaction()
    coordinator = reopen(log).coordinator
    coordinator.end_txn("t", producer.producer_id, producer.producer_epoch, True)
    with pytest.raises(InvalidTxnStateError):
        coordinator.end_txn("t", producer.producer_id, producer.producer_epoch, False)
    (metadata,) = coordinator.transactions()
    assert metadata.state.name == "COMPLETE_COMMIT"
    assert committed_values(log, OUT0) == [b"x"]


def test_9_duplicate_markers_are_harmless(log: Log) -> None:
    """C-20: a roll-forward may write a marker twice; the second one completes nothing."""
    producer = log.producer("t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"x", partition=0)
    producer.commit_transaction()
    again = log.partition_log(OUT0).append_marker(
        ControlType.COMMIT,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        coordinator_epoch=0,
    )
    assert again.completed_txn is None
    assert committed_values(log, OUT0) == [b"x"]
    assert log.consumer().end_offset(OUT0) == log.partition_log(OUT0).log_end_offset == 3


# --- 11: crash recovery of the partition side --------------------------------------------------


def test_11_open_and_aborted_transactions_are_rebuilt_on_reopen(log: Log) -> None:
    """P-24, P-25: LSO, open transactions and the aborted index come back from the files."""
    first = log.producer("a")
    first.init_transactions()
    first.begin_transaction()
    first.send("out", b"aborted", partition=0)
    first.flush()
    first.abort_transaction()
    second = log.producer("b")
    second.init_transactions()
    second.begin_transaction()
    second.send("out", b"open", partition=0)
    second.flush()
    restarted = reopen(log)
    plog = restarted.partition_log(OUT0)
    assert plog.last_stable_offset == 2 < plog.log_end_offset == 3
    assert [t.first_offset for t in plog.collect_aborted_txns(0, 3)] == [0]
    second.commit_transaction()
    assert committed_values(restarted, OUT0) == [b"open"]


# --- 13: interleaved transactions and seeks ----------------------------------------------------


def test_13_interleaved_transactions_and_seeks(log: Log) -> None:
    """B-13, B-14: two producers interleave on one partition, one commits and one aborts;
    read_committed returns exactly the committed records in offset order, from any start."""
    a, b = log.producer("a"), log.producer("b")
    for producer in (a, b):
        producer.init_transactions()
        producer.begin_transaction()
    for i in range(3):
        a.send("out", b"a%d" % i, partition=0)
        a.flush()
        b.send("out", b"b%d" % i, partition=0)
        b.flush()
    b.abort_transaction()
    a.commit_transaction()
    reader = log.consumer()
    records = reader.read(OUT0, 0)
    assert [(r.offset, r.value) for r in records] == [(0, b"a0"), (2, b"a1"), (4, b"a2")]
    for start in range(8):  # a seek into the middle rebuilds the aborted filter (B-14)
        assert values(reader.read(OUT0, start)) == [r.value for r in records if r.offset >= start]
    assert values(reader.read(OUT0, 1, 5)) == [b"a1", b"a2"]
    assert reader.read(OUT0, 0, max_records=2)[-1].value == b"a1"
    assert reader.end_offset(OUT0) == 8


# --- bad input ---------------------------------------------------------------------------------


def test_bad_calls_are_typed_errors_and_change_nothing(log: Log) -> None:
    producer = log.producer("t")
    producer.init_transactions()
    before = files(log.path)
    with pytest.raises(InvalidTxnStateError, match=r"commit_transaction.*in transaction"):
        producer.commit_transaction()
    with pytest.raises(InvalidTxnStateError, match="outside a transaction"):
        producer.send("out", b"x")
    with pytest.raises(ConfigError, match="non-empty string"):
        log.producer("")
    with pytest.raises(ConfigError, match="read_committed, read_uncommitted"):
        log.consumer("serializable")
    producer.begin_transaction()
    with pytest.raises(InvalidTxnStateError, match="begin_transaction"):
        producer.begin_transaction()
    assert files(log.path) == before
