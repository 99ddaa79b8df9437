"""ProducerStateManager: open transactions and the LSO (B-03, B-04, B-10), expiration (P-26),
snapshots and recovery (P-21..P-25), validate-then-change (STYLE 3).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from txn_log.clock import ManualClock
from txn_log.errors import (
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    StorageError,
)
from txn_log.record.batch_header import BatchHeader, Compression, make_attributes
from txn_log.storage.producer_append_info import AppendOrigin, CompletedTxn, TxnMetadata
from txn_log.storage.producer_snapshot import read_snapshot
from txn_log.storage.producer_state import ProducerStateManager
from txn_log.storage.producer_state_entry import ProducerStateEntry

TP = "payments-0"
A, B, C = 11, 22, 33
DAY_MS = 86_400_000


def header(
    pid: int,
    offset: int,
    seq: int,
    count: int = 1,
    *,
    epoch: int = 0,
    txn: bool = False,
    timestamp: int = 0,
) -> BatchHeader:
    return BatchHeader(
        base_offset=offset,
        batch_length=49 + 8 * count,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=make_attributes(Compression.NONE, transactional=txn),
        last_offset_delta=count - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        records_count=count,
    )


class Harness:
    """Drives a manager the way the partition log does (module docstring protocol)."""

    def __init__(self, directory: Path, clock: ManualClock | None = None) -> None:
        self.clock = clock or ManualClock()
        self.manager = ProducerStateManager(directory, TP, clock=self.clock)

    def data(
        self,
        pid: int,
        offset: int,
        seq: int,
        count: int = 1,
        *,
        epoch: int = 0,
        txn: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> None:
        info = self.manager.prepare_update(pid, origin)
        info.append_data_batch(
            header(pid, offset, seq, count, epoch=epoch, txn=txn, timestamp=self.clock.time_ms())
        )
        self.manager.update(info)
        self.manager.update_map_end_offset(offset + count)

    def marker(
        self, pid: int, offset: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0
    ) -> tuple[CompletedTxn | None, int | None]:
        info = self.manager.prepare_update(pid, AppendOrigin.COORDINATOR)
        completed = info.append_end_txn_marker(
            commit, epoch, coordinator_epoch, offset, self.clock.time_ms()
        )
        self.manager.update(info)
        self.manager.update_map_end_offset(offset + 1)
        if completed is None:
            return None, None
        lso = self.manager.last_stable_offset_for(completed)
        self.manager.complete_txn(completed)
        return completed, lso


@pytest.fixture
def log(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


# --- first unstable offset and the LSO (B-03, B-04, B-10, §15.13) -------------------------------


def test_first_unstable_offset_with_interleaved_transactions(log: Harness) -> None:
    m = log.manager
    assert m.first_unstable_offset() is None  # B-04: nothing open -> LSO = high watermark
    log.data(C, 0, 0)  # a plain idempotent batch never pins the LSO
    log.data(A, 1, 0, 2, txn=True)
    log.data(B, 3, 0, txn=True)
    log.data(A, 4, 2, txn=True)
    log.data(C, 5, 1)
    assert m.first_unstable_offset() == 1
    assert m.ongoing_transactions() == [TxnMetadata(A, 1), TxnMetadata(B, 3)]

    completed, lso = log.marker(A, 6, commit=True)
    assert completed == CompletedTxn(A, 1, 6, is_aborted=False)
    assert lso == 3  # B's open transaction still pins the LSO
    assert m.first_unstable_offset() == 3

    log.data(A, 7, 3, txn=True)  # A opens a new transaction after B's
    completed, lso = log.marker(B, 8, commit=False)
    assert completed == CompletedTxn(B, 3, 8, is_aborted=True)
    assert lso == 7  # the earliest *other* open transaction: A's new one
    assert m.first_unstable_offset() == 7

    completed, lso = log.marker(A, 9, commit=False)
    assert lso == 10  # nothing else open: marker offset + 1
    assert m.first_unstable_offset() is None and m.ongoing_transactions() == []


def test_last_stable_offset_ignores_the_completing_producer_itself(log: Harness) -> None:
    log.data(A, 0, 0, txn=True)
    completed = CompletedTxn(A, 0, 5, is_aborted=True)
    assert log.manager.last_stable_offset_for(completed) == 6
    log.data(B, 1, 0, txn=True)
    assert log.manager.last_stable_offset_for(completed) == 1


def test_completing_a_transaction_that_is_not_open_is_refused(log: Harness) -> None:
    log.data(A, 0, 0, txn=True)
    with pytest.raises(InvalidTxnStateError) as raised:
        log.manager.complete_txn(CompletedTxn(B, 0, 3, is_aborted=False))
    assert TP in str(raised.value) and str(B) in str(raised.value)
    assert log.manager.first_unstable_offset() == 0


def test_duplicate_marker_changes_no_transaction(log: Harness) -> None:
    log.data(A, 0, 0, txn=True)
    log.marker(A, 1, commit=True)
    assert log.marker(A, 2, commit=True) == (None, None)  # C-20
    assert log.manager.first_unstable_offset() is None


# --- two phases (STYLE 3) -------------------------------------------------------------------


def test_failed_validation_changes_nothing(log: Harness) -> None:
    log.data(A, 0, 0, 3)
    before = dict(log.manager.active_producers())
    info = log.manager.prepare_update(A, AppendOrigin.CLIENT)
    with pytest.raises(OutOfOrderSequenceError):
        info.append_data_batch(header(A, 3, 9))
    assert dict(log.manager.active_producers()) == before
    assert log.manager.map_end_offset == 3


def test_prepared_but_not_updated_changes_nothing(log: Harness) -> None:
    info = log.manager.prepare_update(A, AppendOrigin.CLIENT)
    info.append_data_batch(header(A, 0, 0, txn=True))
    assert log.manager.last_entry(A) is None
    assert log.manager.first_unstable_offset() is None


def test_stale_append_info_is_refused(log: Harness) -> None:
    log.data(A, 0, 0)
    first = log.manager.prepare_update(A, AppendOrigin.CLIENT)
    second = log.manager.prepare_update(A, AppendOrigin.CLIENT)
    first.append_data_batch(header(A, 1, 1))
    second.append_data_batch(header(A, 2, 1))
    log.manager.update(first)
    with pytest.raises(ValueError):
        log.manager.update(second)
    assert log.manager.last_entry(A) == first.to_entry()


def test_duplicate_lookup_through_the_manager(log: Harness) -> None:
    log.data(A, 0, 0, 2)
    hit = log.manager.find_duplicate_batch(header(A, 50, 0, 2))
    assert hit is not None and (hit.first_offset, hit.last_offset) == (0, 1)
    assert log.manager.find_duplicate_batch(header(B, 50, 0, 2)) is None


# --- expiration (P-26, P-27) -------------------------------------------------------------------


def test_idle_producers_expire_but_not_with_an_open_transaction(log: Harness) -> None:
    log.data(A, 0, 0)
    log.data(B, 1, 0, txn=True)
    log.clock.advance(DAY_MS - 1)
    log.data(C, 2, 0)
    assert log.manager.remove_expired_producers() == []
    log.clock.advance(1)  # A and B now idle exactly one day
    assert log.manager.remove_expired_producers() == [A]
    assert set(log.manager.active_producers()) == {B, C}
    log.clock.advance(10 * DAY_MS)
    assert log.manager.remove_expired_producers(log.clock.time_ms()) == [C]
    assert log.manager.first_unstable_offset() == 1  # B's transaction is untouched


def test_expired_producer_must_restart_at_sequence_zero(log: Harness) -> None:
    log.data(A, 0, 0)
    log.clock.advance(DAY_MS)
    log.manager.remove_expired_producers()
    with pytest.raises(OutOfOrderSequenceError):  # P-28: rejected, an accepted false negative
        log.data(A, 1, 1)


# --- snapshots and recovery (P-21..P-25) -------------------------------------------------------


def fill(log: Harness) -> None:
    log.data(A, 0, 0, 3, epoch=1)
    log.data(B, 3, 0, 2, epoch=4, txn=True)
    log.marker(C, 5, commit=True, epoch=2, coordinator_epoch=7)


def test_snapshot_round_trip(tmp_path: Path) -> None:
    log = Harness(tmp_path)
    fill(log)
    path = log.manager.take_snapshot()
    assert path == tmp_path / "00000000000000000006.snapshot"
    assert not list(tmp_path.glob("*.tmp"))

    reopened = Harness(tmp_path, log.clock)
    assert reopened.manager.snapshot_offsets() == [6]
    assert reopened.manager.truncate_and_reload(0, 6) == 6
    assert dict(reopened.manager.active_producers()) == dict(log.manager.active_producers())
    assert reopened.manager.ongoing_transactions() == [TxnMetadata(B, 3)]
    reopened.data(A, 6, 3, epoch=1)  # dedup state survived: the sequence carries on
    with pytest.raises(OutOfOrderSequenceError):
        reopened.data(B, 7, 5, epoch=4, txn=True)


def test_take_snapshot_only_when_the_map_moved(log: Harness) -> None:
    assert log.manager.take_snapshot() is None
    fill(log)
    assert log.manager.take_snapshot() is not None
    assert log.manager.take_snapshot() is None


def test_keeps_the_two_newest_snapshots(tmp_path: Path) -> None:
    log = Harness(tmp_path)
    for end in (10, 20, 30):
        log.manager.update_map_end_offset(end)
        log.manager.take_snapshot()
    assert log.manager.snapshot_offsets() == [20, 30]  # P-23
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000020.snapshot",
        "00000000000000000030.snapshot",
    ]


def snapshots_at(tmp_path: Path, offsets: list[int]) -> Harness:
    """Snapshots at ``offsets``; A's last sequence in the one at offset N is N - 1."""
    log = Harness(tmp_path)
    seq = 0
    for end in offsets:
        log.data(A, seq, seq, end - seq)
        seq = end
        log.manager.take_snapshot()
    return log


def test_corrupt_newest_snapshot_falls_back_to_the_previous(tmp_path: Path) -> None:
    snapshots_at(tmp_path, [10, 20])
    newest = tmp_path / "00000000000000000020.snapshot"
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0x01
    newest.write_bytes(bytes(data))

    reopened = Harness(tmp_path)
    assert reopened.manager.truncate_and_reload(0, 20) == 10  # replay [10, 20) from the log
    assert reopened.manager.snapshot_offsets() == [10]
    assert not newest.exists()
    entry = reopened.manager.last_entry(A)
    assert entry is not None and entry.last_seq == 9


def test_truncated_snapshot_falls_back_to_log_start(tmp_path: Path) -> None:
    snapshots_at(tmp_path, [10])
    only = tmp_path / "00000000000000000010.snapshot"
    only.write_bytes(only.read_bytes()[:17])
    reopened = Harness(tmp_path)
    assert reopened.manager.truncate_and_reload(0, 10) == 0  # replay the whole log
    assert reopened.manager.active_producers() == {}
    assert reopened.manager.snapshot_offsets() == []


def test_truncate_and_reload_after_log_truncation(tmp_path: Path) -> None:
    log = snapshots_at(tmp_path, [10, 20])
    assert log.manager.truncate_and_reload(0, 15) == 10  # the snapshot at 20 is past the end
    assert log.manager.snapshot_offsets() == [10]
    assert not (tmp_path / "00000000000000000020.snapshot").exists()
    entry = log.manager.last_entry(A)
    assert entry is not None and entry.last_seq == 9
    log.data(A, 10, 10, origin=AppendOrigin.REPLAY)


def test_truncate_and_reload_drops_snapshots_at_or_below_log_start(tmp_path: Path) -> None:
    log = snapshots_at(tmp_path, [10, 20])
    assert log.manager.truncate_and_reload(20, 25) == 20
    assert log.manager.snapshot_offsets() == []
    assert log.manager.active_producers() == {}


def test_truncate_and_reload_is_a_no_op_at_the_map_end(tmp_path: Path) -> None:
    log = snapshots_at(tmp_path, [10, 20])
    log.data(B, 20, 0, txn=True)
    assert log.manager.truncate_and_reload(0, 21) == 21
    assert log.manager.first_unstable_offset() == 20
    assert log.manager.snapshot_offsets() == [10, 20]


def test_reload_restores_open_transactions_and_skips_expired_producers(tmp_path: Path) -> None:
    log = Harness(tmp_path)
    log.data(A, 0, 0)
    log.data(B, 1, 0, txn=True)
    log.manager.take_snapshot()
    log.clock.advance(DAY_MS)
    reopened = Harness(tmp_path, log.clock)
    reopened.manager.truncate_and_reload(0, 2)
    assert set(reopened.manager.active_producers()) == {B}  # P-25, P-26
    assert reopened.manager.first_unstable_offset() == 1


def test_delete_snapshots_before_is_exclusive(tmp_path: Path) -> None:
    log = snapshots_at(tmp_path, [10, 20])
    log.manager.delete_snapshots_before(20)
    assert log.manager.snapshot_offsets() == [20]
    assert log.manager.latest_snapshot_offset() == 20


def truncate_fully_and_start_at(manager: ProducerStateManager, offset: int) -> None:
    """Kafka's ``truncateFullyAndStartAt`` (a replica whose log is replaced whole), which no
    path of the embedded log takes, as a test oracle: forget all state and snapshots; the log
    now starts (and ends) at ``offset``."""
    manager._clear()
    for snapshot_offset in manager.snapshot_offsets():
        manager._delete_snapshot(snapshot_offset)
    manager._map_end_offset = offset
    manager._last_snap_offset = 0


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = snapshots_at(tmp_path, [10])
    truncate_fully_and_start_at(log.manager, 50)
    assert log.manager.map_end_offset == 50
    assert log.manager.snapshot_offsets() == [] and log.manager.active_producers() == {}
    assert not list(tmp_path.iterdir())


def test_interrupted_snapshot_write_leaves_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = snapshots_at(tmp_path, [10])
    log.data(A, 10, 10)

    def failing_replace(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(StorageError):
        log.manager.take_snapshot()
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000010.snapshot"]
    assert read_snapshot(tmp_path / "00000000000000000010.snapshot")[0].last_seq == 9


def test_leftover_temp_file_is_removed_on_open(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000042.snapshot.tmp").write_bytes(b"half")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    manager = Harness(tmp_path).manager
    assert manager.snapshot_offsets() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000000.log"]


def test_loaded_entry_keeps_only_the_newest_batch(tmp_path: Path) -> None:
    log = Harness(tmp_path)
    log.data(A, 0, 0, 2)
    log.data(A, 2, 2, 2)
    log.manager.take_snapshot()
    reopened = Harness(tmp_path, log.clock)
    reopened.manager.truncate_and_reload(0, 4)
    entry = reopened.manager.last_entry(A)
    assert isinstance(entry, ProducerStateEntry)
    assert [(b.first_seq, b.last_seq) for b in entry.batch_metadata] == [(2, 3)]
