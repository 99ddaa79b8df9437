"""Coordinator and group offset snapshots with real processes (issue 14, DESIGN §3).

* A process SIGKILLed while writing a snapshot (the crash points ``durable_file`` arms around
  its rename: the temporary file written and fsynced but not renamed, or renamed but the
  directory not yet fsynced) leaves a log whose next open sees exactly the full replay; the
  next writer removes the leftover temporary file and snapshots again.
* Two processes committing at once, both taking snapshots (tiny interval), leave snapshots
  that a fresh process starts from and that equal the full replay, with every acknowledged
  atomic commit in its ledger.

Seeds: ``TXNLOG_TEST_SEED=<n>`` replays a run; the seed is printed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.txn_log.processes.test_readers_never_wait import _finishes, _wait_stopped
from tests.txn_log.snapshot_history import (
    TOPIC,
    full_replay_state,
    observed_state,
    same_state,
    snapshot_files,
)
from txn_log.log import Log

ROOT = Path(__file__).resolve().parents[3]
DIRS = {"coordinator_snapshot": "__transaction_state-0", "offsets_snapshot": "__consumer_offsets-0"}


def _seed() -> int:
    seed = int(os.environ.get("TXNLOG_TEST_SEED", random.randrange(2**32)))
    print(f"TXNLOG_TEST_SEED={seed}")
    return seed


def _worker(
    path: Path, seed: int, steps: int, interval: int, prefix: str, crash: str | None = None
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH")}
    if crash is not None:
        env["TXNLOG_CRASH_POINT"] = crash
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.txn_log.processes.snapshot_workers",
            str(path),
            str(seed),
            str(steps),
            str(interval),
            prefix,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def _new_log(path: Path) -> None:
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic(TOPIC, partitions=2)


@pytest.mark.fault
@pytest.mark.parametrize(
    "crash",
    [
        "coordinator_snapshot.after_temp_fsync",
        "coordinator_snapshot.after_rename",
        "offsets_snapshot.after_temp_fsync",
        "offsets_snapshot.after_rename",
    ],
)
def test_sigkill_while_writing_a_snapshot_next_open_is_correct(tmp_path: Path, crash: str) -> None:
    path = tmp_path / "log"
    _new_log(path)
    seed = _seed()
    worker = _worker(path, seed, 80, 7, "a-", crash)
    worker.communicate(timeout=300)
    assert worker.returncode == -signal.SIGKILL, "the crash point was never reached"
    directory = path / DIRS[crash.split(".")[0]]
    leftovers = [p for p in directory.iterdir() if p.name.startswith(".") and "snapshot" in p.name]
    if crash.endswith("after_temp_fsync"):
        assert leftovers  # killed with the temporary file written, not renamed
    # the next open (a fresh process's view) is exactly the full replay
    assert same_state(observed_state(path), full_replay_state(path, tmp_path))
    # the next writer removes the leftover, snapshots again, and all stays equal
    worker = _worker(path, seed + 1, 60, 7, "a-")
    out, _ = worker.communicate(timeout=300)
    assert worker.returncode == 0, out
    assert not [p for p in directory.iterdir() if p.name.startswith(".") and "snapshot" in p.name]
    fresh = observed_state(path)
    assert fresh.coordinator_snapshot is not None and fresh.offsets_snapshot is not None
    assert same_state(fresh, full_replay_state(path, tmp_path))


def test_two_processes_committing_while_both_take_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "log"
    _new_log(path)
    seed = _seed()
    workers = [_worker(path, seed + i, 70, 5, f"p{i}-") for i in range(2)]
    results = []
    for worker in workers:
        out, _ = worker.communicate(timeout=300)
        assert worker.returncode == 0, out
        results.append(json.loads(out.strip().splitlines()[-1]))
    fresh = observed_state(path)
    assert fresh.coordinator_snapshot is not None and fresh.offsets_snapshot is not None
    assert len(snapshot_files(path, DIRS["coordinator_snapshot"])) == 2
    assert same_state(fresh, full_replay_state(path, tmp_path))
    acknowledged = {k: v for r in results for k, v in r["sequences"].items()}
    assert {e.ledger_key: e.sequence for e in fresh.ledgers} == acknowledged
    assert all(r["commit"] + r["atomic"] > 0 for r in results)


def test_readers_do_not_wait_on_a_writer_frozen_while_writing_a_group_offset_snapshot(
    tmp_path: Path,
) -> None:
    """DESIGN §3: a process stopped (SIGSTOP) in the middle of writing a group offset snapshot
    holds the snapshot lock (and the coordinator lock: it snapshots after a commit). A reader
    with a big enough tail to want a snapshot itself must answer anyway, skip the snapshot, and
    answer exactly what a full replay gives."""
    path = tmp_path / "log"
    _new_log(path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH")}
    env.update(TXNLOG_CRASH_POINT="offsets_snapshot.after_temp_fsync", TXNLOG_CRASH_SIGNAL="STOP")
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.txn_log.processes.snapshot_workers", str(path),
         str(_seed()), "80", "7", "f-"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    reader = Log.open(path, housekeeping_interval_ms=None)
    try:
        _wait_stopped(worker)
        reader.group_offsets.snapshot_interval_offsets = 1  # it wants to snapshot, cannot
        done, entries = _finishes(reader.group_offsets.snapshot_entries)
        assert done, "a reader of group offsets waited on the frozen snapshot writer"
        expected = full_replay_state(path, tmp_path)
        assert tuple(entries) == expected.groups  # type: ignore[arg-type]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        reader.close()
    assert same_state(observed_state(path), full_replay_state(path, tmp_path))
