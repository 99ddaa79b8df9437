"""State snapshots stay valid across a cleaning of the log below them (C-22 start-up, C-02).

The cleaner rewrites or removes the batch a coordinator or group offset snapshot was
fingerprinted with; what it removes below the snapshot's offset is already in the snapshot or
superseded, so a fresh process still starts from the snapshot, and its state equals a full
replay's. What would give wrong state still falls back to replay: a tombstone or marker at or
after the snapshot's offset removed (the tail would miss it), a log truncated below the snapshot
and written again, a partition re-created (another topic id), a snapshot past the log end.
Seeds: ``TXNLOG_TEST_SEED=<n>``.
"""

from __future__ import annotations

import os
import pickle
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.txn_log.coordinator.test_coordinator_snapshot import (
    _partition_local_history,
    _truncate_state_log_below,
)
from tests.txn_log.snapshot_history import (
    IDS,
    LEDGERS,
    full_replay_state,
    observed_state,
    run_history,
    same_state,
    set_intervals,
    snapshot_files,
)
from txn_log.clock import ManualClock
from txn_log.log import Log
from txn_log.storage.cleaner_horizon import read_horizon
from txn_log.storage.state_snapshot import SnapshotKind, StateSnapshotDir, fingerprint_at
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from txn_log.topic_partition import TopicPartition

STATE = TopicPartition(TRANSACTION_STATE_TOPIC, 0)
OFFSETS = TopicPartition(CONSUMER_OFFSETS_TOPIC, 0)
KINDS = {STATE: SnapshotKind.COORDINATOR, OFFSETS: SnapshotKind.GROUP_OFFSETS}
DAY_MS = 86_400_000
ROOT = Path(__file__).resolve().parents[3]


def _seed() -> int:
    seed = int(os.environ.get("TXNLOG_TEST_SEED", random.randrange(2**32)))
    print(f"TXNLOG_TEST_SEED={seed}")
    return seed


def _newest(path: Path, tp: TopicPartition) -> int:
    return int(snapshot_files(path, tp.directory_name)[-1].name[:20])


def _history_then_clean(
    path: Path, clock: ManualClock, *, advance_ms: int = 0, rewrite_snapshot_batch: bool = False
) -> None:
    """Snapshots every 9 records, then more history without snapshots, ``advance_ms``, then
    roll and clean both internal topics. With ``rewrite_snapshot_batch`` every transactional id
    and ledger writes once more before the cleaning, so the cleaner rewrites or removes the
    batch the newest coordinator snapshot was taken after (the old exact-fingerprint rule would
    then refuse it): what the test is about, whatever the seed."""
    rng = random.Random(_seed())
    with Log.open(path, clock=clock, housekeeping_interval_ms=None) as log:
        set_intervals(log, 9)
        first = run_history(log, rng, 60)
        set_intervals(log, 10**9)  # no newer snapshot: the cleaning happens below them
        second = run_history(log, rng, 40)
        clock.advance(advance_ms)
        run_history(log, rng, 6)
        if rewrite_snapshot_batch:
            _write_every_key_again(log, first["sequences"], second["sequences"])
        for tp in (STATE, OFFSETS):
            log.partition_log(tp).roll()  # the active segment is never cleaned
        stats = log.log_manager.clean()
        assert {s.topic_partition for s in stats if s.segments_cleaned} >= {str(STATE)}
    if rewrite_snapshot_batch:
        assert _fingerprint_changed(path, STATE)


def _write_every_key_again(log: Log, *sequences: dict[str, int]) -> None:
    """One more transaction per transactional id and one more atomic commit per ledger (at a
    sequence past every one used: a ledger ignores a sequence it has committed)."""
    for tid in IDS:
        producer = log.producer(tid)
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("data", b"again", partition=0)
        producer.commit_transaction()
        producer.close()
    for ledger in LEDGERS:
        last = max(s.get(ledger, 0) for s in sequences)
        log.coordinator.commit_transactions(ledger, last + 1, [])


def _fingerprint_changed(path: Path, tp: TopicPartition) -> bool:
    """Whether the batch the newest snapshot was taken after is no longer byte for byte there
    (so the old exact-fingerprint rule would have ignored the snapshot)."""
    offset = _newest(path, tp)
    snapshot = StateSnapshotDir(path / tp.directory_name, KINDS[tp]).read(offset)
    with Log.open(path, read_only=True, housekeeping_interval_ms=None) as log:
        try:
            return fingerprint_at(log.partition_reader(tp), offset) != snapshot.last_batch
        except ValueError:
            return True  # no batch ends there any more: the cleaner removed it


def test_c22_snapshots_are_loaded_after_a_cleaning_below_them_and_equal_a_full_replay(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log"
    _history_then_clean(path, ManualClock(), rewrite_snapshot_batch=True)
    fresh = observed_state(path)
    assert fresh.coordinator_snapshot == _newest(path, STATE)  # loaded, not replayed
    assert fresh.offsets_snapshot == _newest(path, OFFSETS)
    assert same_state(fresh, full_replay_state(path, tmp_path))


def test_c22_a_writable_process_restarted_after_cleaning_starts_from_the_snapshot(
    tmp_path: Path,
) -> None:
    """The same through the ordinary path a restarted sink takes: open, init_transactions and a
    commit, which work on the state the snapshot gave."""
    path = tmp_path / "log"
    clock = ManualClock()
    _history_then_clean(path, clock, rewrite_snapshot_batch=True)
    with Log.open(path, clock=clock, housekeeping_interval_ms=None) as log:
        producer = log.producer("task-0")
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("data", b"after", partition=0)
        producer.commit_transaction()
        assert log.coordinator.started_from_snapshot == _newest(path, STATE)
        producer.close()
    assert same_state(observed_state(path), full_replay_state(path, tmp_path))


FRESH_PROCESS = """
import pickle, sys
from pathlib import Path
from tests.txn_log.snapshot_history import observed_state
state = observed_state(Path(sys.argv[1]))
print(state.coordinator_snapshot, state.offsets_snapshot)
print(pickle.dumps((state.transactions, state.ledgers, state.groups)).hex())
"""


def test_c22_a_new_os_process_after_cleaning_loads_the_snapshots_with_full_replay_state(
    tmp_path: Path,
) -> None:
    """The restart is a real new process: it reports the snapshots it started from and its
    state, which equals the full replay's (computed here, from a copy without snapshots)."""
    path = tmp_path / "log"
    _history_then_clean(path, ManualClock(), rewrite_snapshot_batch=True)
    done = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    started, state = done.stdout.splitlines()
    assert started == f"{_newest(path, STATE)} {_newest(path, OFFSETS)}"
    full = full_replay_state(path, tmp_path)
    assert pickle.loads(bytes.fromhex(state)) == (full.transactions, full.ledgers, full.groups)


def test_c22_markers_removed_after_the_snapshot_make_it_fall_back_to_replay(
    tmp_path: Path,
) -> None:
    """Past delete.retention.ms the cleaner removes markers (and tombstones) after a snapshot's
    offset too: its tail would miss them, so that snapshot is refused (full replay)."""
    path = tmp_path / "log"
    _history_then_clean(path, ManualClock(), advance_ms=2 * DAY_MS)
    removed = {tp: read_horizon(path / tp.directory_name).removed_end_offset
               for tp in (STATE, OFFSETS)}  # fmt: skip
    assert removed[OFFSETS] > _newest(path, OFFSETS), removed  # markers after it went
    fresh = observed_state(path)
    assert fresh.offsets_snapshot is None
    assert same_state(fresh, full_replay_state(path, tmp_path))


def test_c22_a_refused_snapshot_is_replaced_by_the_next_writable_process(
    tmp_path: Path,
) -> None:
    """A snapshot refused (markers after it removed) does not count as a recent one: the first
    writable process that replays the whole log writes a new snapshot at once, even though the
    refused one lies less than a snapshot interval back, so the processes after it start from a
    snapshot again, with the full replay's state."""
    path = tmp_path / "log"
    clock = ManualClock()
    _history_then_clean(path, clock, advance_ms=2 * DAY_MS)
    refused = _newest(path, OFFSETS)
    with Log.open(path, clock=clock, housekeeping_interval_ms=None) as log:
        end = log.partition_reader(OFFSETS).log_end_offset
        assert end - refused > 1
        # due by the distance from offset 0 (a full replay), not from the refused snapshot
        log.group_offsets.snapshot_interval_offsets = end - refused + 1
        log.group_offsets.groups()  # a read catches up, then snapshots when one is due
        assert log.group_offsets.started_from_snapshot is None
    assert _newest(path, OFFSETS) == end
    fresh = observed_state(path)
    assert fresh.offsets_snapshot == end
    assert same_state(fresh, full_replay_state(path, tmp_path))


@pytest.mark.parametrize("tp", [STATE, OFFSETS])
def test_c22_log_truncated_below_snapshots_rewritten_and_cleaned_never_loads_them(
    tmp_path: Path, tp: TopicPartition
) -> None:
    """Recovery that truncates the log below snapshots deletes them (as Kafka deletes producer
    snapshots past a truncation), so a log written again and then cleaned never matches one."""
    path = tmp_path / "log"
    _partition_local_history(path)
    oldest = int(snapshot_files(path, tp.directory_name)[0].name[:20])
    _truncate_state_log_below(path, tp.directory_name, oldest)
    with Log.open(path, housekeeping_interval_ms=None) as log:  # recovery cuts the torn tail
        set_intervals(log, 10**9)
        end = log.partition_reader(tp).log_end_offset
        assert end < oldest
        assert snapshot_files(path, tp.directory_name) == []  # deleted with the truncation
        for i in range(oldest + 10):
            if tp == STATE:
                log.coordinator.init_producer_id(f"fresh-{i % 7}", 60_000)
            else:
                log.group_offsets.commit("g-fresh", {TopicPartition("data", i % 2): i})
        log.partition_log(tp).roll()
        log.log_manager.clean(tp.topic)
    fresh = observed_state(path)
    assert (fresh.coordinator_snapshot if tp == STATE else fresh.offsets_snapshot) is None
    assert same_state(fresh, full_replay_state(path, tmp_path))


def test_c22_a_snapshot_of_a_re_created_partition_is_refused(tmp_path: Path) -> None:
    """Snapshot files from another log's partition (another topic id) are never loaded, even
    when the log they land in is longer and was cleaned."""
    other, path = tmp_path / "other", tmp_path / "log"
    with Log.open(other, housekeeping_interval_ms=None) as log:
        set_intervals(log, 9)
        run_history(log, random.Random(_seed()), 40)
    _history_then_clean(path, ManualClock())
    for tp in (STATE, OFFSETS):
        for file in snapshot_files(path, tp.directory_name):
            file.unlink()
        for file in snapshot_files(other, tp.directory_name):
            shutil.copy(file, path / tp.directory_name / file.name)
    fresh = observed_state(path)
    assert fresh.coordinator_snapshot is None and fresh.offsets_snapshot is None
    assert same_state(fresh, full_replay_state(path, tmp_path))


def test_c22_a_corrupt_cleaner_horizon_makes_every_snapshot_fall_back(tmp_path: Path) -> None:
    """Unknown what the cleaner removed: no snapshot is trusted (full replay)."""
    path = tmp_path / "log"
    _history_then_clean(path, ManualClock())
    assert (path / STATE.directory_name / "cleaner-horizon").exists()  # cleaned, so written
    for tp in (STATE, OFFSETS):
        (path / tp.directory_name / "cleaner-horizon").write_bytes(b"\x00\x01garbage")
    fresh = observed_state(path)
    assert fresh.coordinator_snapshot is None and fresh.offsets_snapshot is None
    assert same_state(fresh, full_replay_state(path, tmp_path))
