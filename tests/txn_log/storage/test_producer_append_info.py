"""ProducerAppendInfo: the sequence/epoch rule table (P-10 steps 3-6, P-12, §15 behaviour 2),
transactions (P-25, B-03), markers (B-01, P-19, C-20, C-23) and validate-then-change (STYLE 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from txn_log.errors import (
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    TxnLogError,
)
from txn_log.record.batch_header import BatchHeader, Compression, make_attributes
from txn_log.storage.producer_append_info import (
    AppendOrigin,
    CompletedTxn,
    ProducerAppendInfo,
    TxnMetadata,
)
from txn_log.storage.producer_state_entry import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
)

TP = "orders-3"
PID = 4242
MAX_SEQ = (1 << 31) - 1
TS = 1_700_000_000_000


def data_header(
    base_offset: int,
    epoch: int,
    base_seq: int,
    count: int = 1,
    *,
    transactional: bool = False,
    control: bool = False,
    pid: int = PID,
    timestamp: int = TS,
) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset,
        batch_length=49 + 8 * count,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=make_attributes(Compression.NONE, transactional=transactional, control=control),
        last_offset_delta=count - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=base_seq,
        records_count=count,
    )


def info_for(
    entry: ProducerStateEntry, origin: AppendOrigin = AppendOrigin.CLIENT
) -> ProducerAppendInfo:
    return ProducerAppendInfo(TP, PID, entry, origin)


def after_batches(epoch: int, first_seq: int, batches: int, size: int) -> ProducerStateEntry:
    """The entry after ``batches`` client batches of ``size`` records from ``first_seq``."""
    info = info_for(ProducerStateEntry.empty(PID), AppendOrigin.REPLAY)
    for i in range(batches):
        seq = (first_seq + i * size) % (1 << 31)
        info.append_data_batch(data_header(100 + i * size, epoch, seq, size))
    return info.to_entry()


# States of the rule table. In STATES["e2"] the producer wrote six batches of two records at
# epoch 2: sequences 0-1 (offsets 100-101, now evicted), 2-3 .. 10-11 (offsets 102-111, cached).
STATES: dict[str, ProducerStateEntry] = {
    "unknown": ProducerStateEntry.empty(PID),
    "e2": after_batches(epoch=2, first_seq=0, batches=6, size=2),
    "e2_at_max": after_batches(epoch=2, first_seq=MAX_SEQ - 1, batches=1, size=2),
    "e2_before_max": after_batches(epoch=2, first_seq=MAX_SEQ - 3, batches=1, size=2),
    "e2_bumped": ProducerStateEntry(PID, producer_epoch=2, coordinator_epoch=0),
}

OK = "ok"
CACHED = "duplicate in the last-5 cache: answer with the original offsets"


@dataclass(frozen=True)
class Row:
    rule: str
    state: str
    epoch: int
    first_seq: int
    count: int
    outcome: object  # OK, CACHED or the error class


RULES = [
    Row("P-10.3 unknown producer, seq 0 -> insert", "unknown", 0, 0, 1, OK),
    Row("P-10.3 unknown producer, seq 0 at a high epoch", "unknown", 7, 0, 3, OK),
    Row("P-10.3/P-28 unknown producer, seq != 0", "unknown", 0, 5, 1, OutOfOrderSequenceError),
    Row("P-10.4 older epoch, next seq", "e2", 1, 12, 1, InvalidProducerEpochError),
    Row("P-10.4 older epoch, seq 0", "e2", 1, 0, 1, InvalidProducerEpochError),
    Row("P-10.5 same epoch, exactly last+1", "e2", 2, 12, 1, OK),
    Row("P-10.5 same epoch, last+1, multi-record", "e2", 2, 12, 4, OK),
    Row("P-10.5 retry of newest batch (cached)", "e2", 2, 10, 2, CACHED),
    Row("P-10.5 retry of oldest cached batch", "e2", 2, 2, 2, CACHED),
    Row("P-10.5 lower, evicted from cache", "e2", 2, 0, 2, DuplicateSequenceError),
    Row("P-10.5 lower, range matches no batch", "e2", 2, 10, 1, DuplicateSequenceError),
    Row("P-10.5 lower seq, across the wrap", "e2", 2, MAX_SEQ, 1, DuplicateSequenceError),
    Row("P-10.5 higher: gap of one", "e2", 2, 13, 1, OutOfOrderSequenceError),
    Row(
        "P-10.5 higher: largest gap 2^30-1", "e2", 2, 12 + (1 << 30) - 1, 1, OutOfOrderSequenceError
    ),
    Row(
        "P-10.5 2^30 past expected counts as behind",
        "e2",
        2,
        12 + (1 << 30),
        1,
        DuplicateSequenceError,
    ),
    Row("P-12 after 2^31-1 comes 0", "e2_at_max", 2, 0, 1, OK),
    Row("P-12 after 2^31-1, seq 1 is a gap", "e2_at_max", 2, 1, 1, OutOfOrderSequenceError),
    Row("P-12 retry of the batch ending at 2^31-1", "e2_at_max", 2, MAX_SEQ - 1, 2, CACHED),
    Row("P-12 batch straddling the wrap", "e2_before_max", 2, MAX_SEQ - 1, 4, OK),
    Row("P-10.6 newer epoch, seq 0", "e2", 3, 0, 1, OK),
    Row("P-10.6 newer epoch, continuing seq", "e2", 3, 12, 1, OutOfOrderSequenceError),
    Row("P-19 same epoch after a marker bump, seq 0", "e2_bumped", 2, 0, 1, OK),
    Row(
        "P-19 same epoch after a marker bump, seq != 0",
        "e2_bumped",
        2,
        7,
        1,
        OutOfOrderSequenceError,
    ),
    Row(
        "P-19 after a marker bump nothing is a duplicate",
        "e2_bumped",
        2,
        MAX_SEQ,
        1,
        OutOfOrderSequenceError,
    ),
]


@pytest.mark.parametrize("row", RULES, ids=[row.rule for row in RULES])
def test_sequence_and_epoch_rule_table(row: Row) -> None:
    entry = STATES[row.state]
    header = data_header(500, row.epoch, row.first_seq, row.count)
    duplicate = entry.find_duplicate_batch(header)
    info = info_for(entry)
    if row.outcome is OK:
        assert duplicate is None
        info.append_data_batch(header)
        updated = info.to_entry()
        assert updated.producer_epoch == row.epoch
        assert updated.last_seq == (row.first_seq + row.count - 1) % (1 << 31)
        assert updated.last_data_offset == 500 + row.count - 1
        assert updated.batch_metadata[-1].first_seq == row.first_seq
        kept = entry.batch_metadata if row.epoch == entry.producer_epoch else ()
        expected = (*kept, updated.batch_metadata[-1])[-NUM_BATCHES_TO_RETAIN:]
        assert updated.batch_metadata == expected
        return
    if row.outcome is CACHED:
        assert duplicate is not None
        assert (duplicate.first_seq, duplicate.last_seq) == (row.first_seq, header.last_sequence)
        # the original offsets, not the retry's: sequences map to offsets 100 + (seq - first)
        assert duplicate.first_offset < 500
        assert duplicate.last_offset == duplicate.first_offset + row.count - 1
        expected_error: type[TxnLogError] = DuplicateSequenceError
    else:
        assert duplicate is None
        assert isinstance(row.outcome, type) and issubclass(row.outcome, TxnLogError)
        expected_error = row.outcome
    with pytest.raises(expected_error) as raised:
        info.append_data_batch(header)
    assert type(raised.value) is expected_error
    assert info.to_entry() is entry  # STYLE 3: a refused batch changes nothing
    assert info.started_transactions() == ()


@pytest.mark.parametrize("row", RULES, ids=[row.rule for row in RULES])
def test_replay_applies_every_row_without_validation(row: Row) -> None:
    """P-20/P-24: the log is the truth; recovery applies what it holds."""
    info = info_for(STATES[row.state], AppendOrigin.REPLAY)
    info.append_data_batch(data_header(500, row.epoch, row.first_seq, row.count))
    assert info.to_entry().producer_epoch == row.epoch
    assert info.to_entry().last_data_offset == 500 + row.count - 1


def test_coordinator_origin_checks_epoch_but_not_sequence() -> None:
    info = info_for(STATES["e2"], AppendOrigin.COORDINATOR)
    info.append_data_batch(data_header(500, 2, 77))  # a gap: not checked for COORDINATOR
    assert info.to_entry().last_seq == 77
    with pytest.raises(InvalidProducerEpochError):
        info.append_data_batch(data_header(501, 1, 78))


def test_cache_keeps_exactly_the_last_five_batches() -> None:
    entry = after_batches(epoch=0, first_seq=0, batches=7, size=1)
    assert [b.last_seq for b in entry.batch_metadata] == [2, 3, 4, 5, 6]
    assert entry.find_duplicate_batch(data_header(999, 0, 1)) is None
    hit = entry.find_duplicate_batch(data_header(999, 0, 2))
    assert hit == BatchMetadata(last_seq=2, last_offset=102, offset_delta=0, timestamp=TS)
    assert entry.find_duplicate_batch(data_header(999, 1, 2)) is None  # other epoch


def test_later_batches_are_validated_against_earlier_ones_in_the_same_append() -> None:
    info = info_for(ProducerStateEntry.empty(PID))
    info.append_data_batch(data_header(0, 0, 0, 3))
    info.append_data_batch(data_header(3, 0, 3, 2))
    with pytest.raises(OutOfOrderSequenceError):
        info.append_data_batch(data_header(5, 0, 6))
    assert info.to_entry().last_seq == 4


def test_error_messages_name_partition_producer_offset_and_expected_vs_actual() -> None:
    with pytest.raises(OutOfOrderSequenceError) as gap:
        info_for(STATES["e2"]).append_data_batch(data_header(777, 2, 20))
    message = str(gap.value)
    assert TP in message and str(PID) in message and "offset 777" in message
    assert "expected 12" in message and "20" in message
    with pytest.raises(InvalidProducerEpochError) as stale:
        info_for(STATES["e2"]).append_data_batch(data_header(778, 1, 12))
    assert "epoch 1" in str(stale.value) and "stored epoch 2" in str(stale.value)
    assert "offset 778" in str(stale.value) and TP in str(stale.value)


def test_control_batch_is_not_a_data_batch() -> None:
    with pytest.raises(InvalidRecordError):
        info_for(STATES["e2"]).append_data_batch(data_header(500, 2, 12, control=True))


def test_base_offset_override_assigns_offsets() -> None:
    info = info_for(ProducerStateEntry.empty(PID))
    info.append_data_batch(data_header(0, 0, 0, 3, transactional=True), base_offset=40)
    assert info.to_entry().last_data_offset == 42
    assert info.started_transactions() == (TxnMetadata(PID, 40),)


# --- transactions (P-25, B-03) -------------------------------------------------------------


def test_first_transactional_batch_opens_a_transaction_at_its_base_offset() -> None:
    info = info_for(ProducerStateEntry.empty(PID))
    info.append_data_batch(data_header(10, 0, 0, 2, transactional=True))
    info.append_data_batch(data_header(15, 0, 2, 1, transactional=True))
    assert info.to_entry().current_txn_first_offset == 10
    assert info.started_transactions() == (TxnMetadata(PID, 10),)


def test_non_transactional_batch_during_open_transaction_is_invalid_txn_state() -> None:
    info = info_for(ProducerStateEntry.empty(PID))
    info.append_data_batch(data_header(10, 0, 0, transactional=True))
    before = info.to_entry()
    with pytest.raises(InvalidTxnStateError) as raised:
        info.append_data_batch(data_header(11, 0, 1))
    assert "offset 11" in str(raised.value) and "offset 10" in str(raised.value)
    assert info.to_entry() is before
    assert info.started_transactions() == (TxnMetadata(PID, 10),)


def test_commit_marker_completes_the_transaction_then_plain_batches_are_fine() -> None:
    info = info_for(ProducerStateEntry.empty(PID))
    info.append_data_batch(data_header(10, 0, 0, 3, transactional=True))
    completed = info.append_end_txn_marker(True, 0, 4, marker_offset=20, timestamp=TS + 5)
    assert completed == CompletedTxn(PID, first_offset=10, last_offset=20, is_aborted=False)
    entry = info.to_entry()
    assert entry.current_txn_first_offset is None
    assert entry.coordinator_epoch == 4 and entry.last_timestamp == TS + 5
    assert entry.last_seq == 2  # same epoch: the sequence carries on
    info.append_data_batch(data_header(21, 0, 3))
    assert info.to_entry().last_seq == 3


def test_abort_marker_reports_an_aborted_transaction() -> None:
    info = info_for(ProducerStateEntry.empty(PID))
    info.append_data_batch(data_header(10, 0, 0, transactional=True))
    completed = info.append_end_txn_marker(False, 0, 0, marker_offset=11, timestamp=TS)
    assert completed == CompletedTxn(PID, 10, 11, is_aborted=True)


# --- markers (B-01, P-19, C-20, C-23) --------------------------------------------------------


def open_txn_entry(epoch: int = 2, coordinator_epoch: int = 5) -> ProducerStateEntry:
    info = info_for(ProducerStateEntry(PID, epoch, coordinator_epoch=coordinator_epoch))
    info.append_data_batch(data_header(30, epoch, 0, 2, transactional=True))
    return info.to_entry()


def test_marker_with_stale_producer_epoch_is_rejected() -> None:
    entry = open_txn_entry()
    info = info_for(entry, AppendOrigin.COORDINATOR)
    with pytest.raises(InvalidProducerEpochError) as raised:
        info.append_end_txn_marker(True, 1, 5, marker_offset=40, timestamp=TS)
    assert "offset 40" in str(raised.value) and TP in str(raised.value)
    assert info.to_entry() is entry


def test_marker_from_zombie_coordinator_is_fenced() -> None:
    entry = open_txn_entry(coordinator_epoch=5)
    info = info_for(entry, AppendOrigin.COORDINATOR)
    with pytest.raises(TransactionCoordinatorFencedError) as raised:
        info.append_end_txn_marker(True, 2, 4, marker_offset=40, timestamp=TS)
    assert "4" in str(raised.value) and ">= 5" in str(raised.value)
    assert str(PID) in str(raised.value) and "offset 40" in str(raised.value)
    assert info.to_entry() is entry


def test_marker_with_same_or_newer_coordinator_epoch_is_accepted_and_recorded() -> None:
    info = info_for(open_txn_entry(coordinator_epoch=5), AppendOrigin.COORDINATOR)
    assert info.append_end_txn_marker(True, 2, 5, 40, TS) is not None
    info.append_end_txn_marker(True, 2, 9, 41, TS)
    assert info.to_entry().coordinator_epoch == 9


def test_duplicate_marker_is_harmless() -> None:
    info = info_for(open_txn_entry(), AppendOrigin.COORDINATOR)
    first = info.append_end_txn_marker(True, 2, 5, 40, TS)
    after_first = info.to_entry()
    assert first is not None
    assert info.append_end_txn_marker(True, 2, 5, 41, TS) is None  # C-20 retry
    assert info.to_entry().batch_metadata == after_first.batch_metadata
    assert info.to_entry().current_txn_first_offset is None


def test_newer_epoch_marker_bumps_the_epoch_and_requires_seq_zero() -> None:
    info = info_for(open_txn_entry(epoch=2), AppendOrigin.COORDINATOR)
    completed = info.append_end_txn_marker(False, 3, 5, 40, TS)  # P-18: timeout abort + bump
    assert completed == CompletedTxn(PID, 30, 40, is_aborted=True)
    bumped = info.to_entry()
    assert bumped.producer_epoch == 3 and bumped.is_empty
    with pytest.raises(InvalidProducerEpochError):  # the zombie at epoch 2
        info_for(bumped).append_data_batch(data_header(41, 2, 2))
    with pytest.raises(OutOfOrderSequenceError):
        info_for(bumped).append_data_batch(data_header(41, 3, 2))
    fresh = info_for(bumped)
    fresh.append_data_batch(data_header(41, 3, 0))
    assert fresh.to_entry().last_seq == 0


def test_marker_for_unknown_producer_inserts_it() -> None:
    info = info_for(ProducerStateEntry.empty(PID), AppendOrigin.COORDINATOR)
    assert info.append_end_txn_marker(True, 6, 2, 50, TS) is None  # P-19
    assert info.to_entry().producer_epoch == 6
    assert info.to_entry().coordinator_epoch == 2


def test_replayed_markers_are_applied_without_checks() -> None:
    info = info_for(open_txn_entry(epoch=2, coordinator_epoch=5), AppendOrigin.REPLAY)
    completed = info.append_end_txn_marker(True, 1, 0, 40, TS)
    assert completed == CompletedTxn(PID, 30, 40, is_aborted=False)


def test_entry_for_another_producer_is_refused() -> None:
    with pytest.raises(ValueError):
        ProducerAppendInfo(TP, PID + 1, ProducerStateEntry.empty(PID), AppendOrigin.CLIENT)
