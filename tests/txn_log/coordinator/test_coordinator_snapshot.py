"""Coordinator and group offset snapshots on a real log (C-22 start-up, issue 14 items 1-2).

Every test compares what a fresh process sees (``observed_state``: newest valid snapshot plus
the tail after it) with a full replay from offset 0 of the same log without its snapshots
(``full_replay_state``), and checks which snapshot the fresh process started from, so that a
test cannot pass by silently ignoring every snapshot. Seeds: ``TXNLOG_TEST_SEED=<n>``.
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest

from tests.txn_log.snapshot_history import (
    full_replay_state,
    observed_state,
    run_history,
    same_state,
    set_intervals,
    snapshot_files,
)
from txn_log.log import Log
from txn_log.storage.state_snapshot import (
    SNAPSHOTS_KEPT,
    SnapshotKind,
    StateSnapshotDir,
    state_snapshot_file_name,
)
from txn_log.topic_partition import TopicPartition

STATE_DIR = "__transaction_state-0"
OFFSETS_DIR = "__consumer_offsets-0"


def _seed() -> int:
    seed = int(os.environ.get("TXNLOG_TEST_SEED", random.randrange(2**32)))
    print(f"TXNLOG_TEST_SEED={seed}")
    return seed


def _history(path: Path, steps: int = 60, interval: int = 9) -> None:
    with Log.open(path, housekeeping_interval_ms=None) as log:
        set_intervals(log, interval)
        run_history(log, random.Random(_seed()), steps)


def _offset_of(file: Path) -> int:
    return int(file.name.split(".")[0])


def test_c22_fresh_open_from_snapshot_equals_full_replay(tmp_path: Path) -> None:
    _history(tmp_path / "log")
    state_files = snapshot_files(tmp_path / "log", STATE_DIR)
    offsets_files = snapshot_files(tmp_path / "log", OFFSETS_DIR)
    assert len(state_files) == SNAPSHOTS_KEPT and len(offsets_files) == SNAPSHOTS_KEPT
    fresh = observed_state(tmp_path / "log")
    assert fresh.coordinator_snapshot == _offset_of(state_files[-1])
    assert fresh.offsets_snapshot == _offset_of(offsets_files[-1])
    full = full_replay_state(tmp_path / "log", tmp_path)
    assert fresh.transactions and fresh.ledgers and fresh.groups
    assert same_state(fresh, full)


def test_c22_snapshot_then_more_history_still_equal(tmp_path: Path) -> None:
    """Two generations of processes: the second starts from the first one's snapshots, writes
    its own on top, and a third still sees exactly the full replay."""
    _history(tmp_path / "log", steps=40)
    first = observed_state(tmp_path / "log").coordinator_snapshot
    _history(tmp_path / "log", steps=40)
    fresh = observed_state(tmp_path / "log")
    assert first is not None and fresh.coordinator_snapshot is not None
    assert fresh.coordinator_snapshot > first
    assert same_state(fresh, full_replay_state(tmp_path / "log", tmp_path))


def _damage_newest(path: Path, topic_dir: str, how: str) -> tuple[int, int]:
    """Damage the newest snapshot of ``topic_dir``; returns (newest, previous) offsets."""
    files = snapshot_files(path, topic_dir)
    assert len(files) == 2
    newest = files[-1]
    data = bytearray(newest.read_bytes())
    if how == "corrupt":
        data[len(data) // 2] ^= 0x40
    elif how == "truncated":
        data = data[: len(data) - 7]
    elif how == "unknown-version":
        struct.pack_into(">h", data, 0, 99)
    elif how == "empty":
        data = bytearray()
    newest.write_bytes(bytes(data))
    return _offset_of(newest), _offset_of(files[0])


@pytest.mark.parametrize("how", ["corrupt", "truncated", "unknown-version", "empty"])
@pytest.mark.parametrize("topic_dir", [STATE_DIR, OFFSETS_DIR])
def test_style6_bad_newest_snapshot_falls_back_to_previous(
    tmp_path: Path, how: str, topic_dir: str
) -> None:
    _history(tmp_path / "log")
    _, previous = _damage_newest(tmp_path / "log", topic_dir, how)
    fresh = observed_state(tmp_path / "log")
    started = fresh.coordinator_snapshot if topic_dir == STATE_DIR else fresh.offsets_snapshot
    assert started == previous
    assert same_state(fresh, full_replay_state(tmp_path / "log", tmp_path))


@pytest.mark.parametrize("topic_dir", [STATE_DIR, OFFSETS_DIR])
def test_style6_every_snapshot_bad_or_missing_falls_back_to_full_replay(
    tmp_path: Path, topic_dir: str
) -> None:
    _history(tmp_path / "log")
    files = snapshot_files(tmp_path / "log", topic_dir)
    files[0].unlink()  # missing
    files[-1].write_bytes(files[-1].read_bytes()[:-1])  # truncated
    fresh = observed_state(tmp_path / "log")
    started = fresh.coordinator_snapshot if topic_dir == STATE_DIR else fresh.offsets_snapshot
    assert started is None
    assert same_state(fresh, full_replay_state(tmp_path / "log", tmp_path))


def test_snapshot_of_the_other_kind_is_refused(tmp_path: Path) -> None:
    """A coordinator snapshot copied into the offsets partition is not read as offsets."""
    _history(tmp_path / "log")
    coordinator_newest = snapshot_files(tmp_path / "log", STATE_DIR)[-1]
    for file in snapshot_files(tmp_path / "log", OFFSETS_DIR):
        file.unlink()
    target = tmp_path / "log" / OFFSETS_DIR / coordinator_newest.name
    target.write_bytes(coordinator_newest.read_bytes())
    fresh = observed_state(tmp_path / "log")
    assert fresh.offsets_snapshot is None
    assert same_state(fresh, full_replay_state(tmp_path / "log", tmp_path))


def _truncate_state_log_below(path: Path, topic_dir: str, offset: int) -> None:
    """Cut the partition's only segment in the middle of a batch below ``offset`` (a torn
    tail, as a machine crash leaves one); the next open's recovery drops the torn batch."""
    log = Log.open(path, read_only=True, housekeeping_interval_ms=None)
    try:
        reader = log.partition_reader(log.partitions(topic_dir[: topic_dir.rindex("-")])[0])
        positions = [
            (location, header)
            for location, header in _locations(reader)
            if header.next_offset <= offset
        ]
    finally:
        log.close()
    (segment, position), header = positions[len(positions) // 2]
    with open(segment, "r+b") as file:
        file.truncate(position + header.size_in_bytes // 2)


def _locations(reader):  # type: ignore[no-untyped-def]
    position = 0
    segment = reader.segments[0]
    assert len(reader.segments) == 1
    for header, _ in reader.read(reader.log_start_offset):
        yield (segment.log_path, position), header
        position += header.size_in_bytes


def _partition_local_history(path: Path) -> None:
    """A history whose operations each touch one internal topic only (InitPid, atomic commits
    of no transaction, plain group commits): cutting one partition's log then loses records
    without leaving other partitions ahead of it (a real torn tail loses only unsynced records,
    which nothing else depends on yet; an arbitrary cut in a full history would)."""
    with Log.open(path, housekeeping_interval_ms=None) as log:
        set_intervals(log, 9)
        for i in range(60):
            log.coordinator.init_producer_id(f"h-{i % 5}", 60_000)
            if i % 3 == 0:
                log.coordinator.commit_transactions(f"ledger-{i % 2}", i, [])
            log.group_offsets.commit(f"g{i % 3}", {TopicPartition("data", i % 2): i})


@pytest.mark.parametrize("topic_dir", [STATE_DIR, OFFSETS_DIR])
@pytest.mark.parametrize("then_append", [False, True])
def test_c22_log_truncated_below_snapshot_ignores_it(
    tmp_path: Path, topic_dir: str, then_append: bool
) -> None:
    """Torn-tail recovery cut the log below every snapshot: they describe records that no
    longer exist, so they are ignored (offset past the log end). With ``then_append`` the log
    grew again past their offsets with other records: the batch fingerprint tells them apart.
    (Recovery deletes snapshots past the log end it truncated to; they are put back here, as if
    it had been stopped before that, to test the loader's own checks.)"""
    path = tmp_path / "log"
    _partition_local_history(path)
    oldest = _offset_of(snapshot_files(path, topic_dir)[0])
    saved = {file.name: file.read_bytes() for file in snapshot_files(path, topic_dir)}
    _truncate_state_log_below(path, topic_dir, oldest)
    with Log.open(path, housekeeping_interval_ms=None) as log:  # recovery cuts the torn tail
        set_intervals(log, 10**9)  # this process must write no snapshot
        tp = log.partitions(topic_dir[: topic_dir.rindex("-")])[0]
        assert log.partition_reader(tp).log_end_offset < oldest
        assert snapshot_files(path, topic_dir) == []  # deleted past the truncation
        for name, data in saved.items():
            (path / topic_dir / name).write_bytes(data)
        if then_append:  # records that touch only the truncated partition
            for i in range(oldest + 10):
                if topic_dir == STATE_DIR:
                    log.coordinator.init_producer_id(f"fresh-{i % 7}", 60_000)
                else:
                    log.group_offsets.commit("g-fresh", {TopicPartition("data", i % 2): i})
            assert log.partition_reader(tp).log_end_offset > _offset_of(
                snapshot_files(path, topic_dir)[-1]
            )
    fresh = observed_state(path)
    started = fresh.coordinator_snapshot if topic_dir == STATE_DIR else fresh.offsets_snapshot
    assert started is None
    assert same_state(fresh, full_replay_state(path, tmp_path))


def test_only_the_newest_two_snapshots_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with Log.open(path, housekeeping_interval_ms=None) as log:
        set_intervals(log, 5)
        run_history(log, random.Random(_seed()), 50)
        written = log.coordinator.started_from_snapshot  # None: this process began empty
    assert written is None
    snapshots = StateSnapshotDir(path / STATE_DIR, SnapshotKind.COORDINATOR)
    offsets = snapshots.offsets()
    assert len(offsets) == SNAPSHOTS_KEPT
    assert [p.name for p in snapshot_files(path, STATE_DIR)] == [
        state_snapshot_file_name(o) for o in offsets
    ]
    # the newest is within one interval (plus one operation's records) of the log end
    with Log.open(path, read_only=True, housekeeping_interval_ms=None) as log:
        end = log.partition_reader(log.partitions("__transaction_state")[0]).log_end_offset
    assert end - offsets[-1] < 5 + 10
