"""The cleaner across real OS processes: SIGKILL at every step of the segment swap loses and
duplicates nothing, and lock-free readers in other processes never see a missing or duplicated
committed record while segments are swapped under them (C-02, B-17, X-21; ``cleaner_swap``)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.txn_log.cleaner.cleaner_workers import (
    KEYS,
    TP,
    check_read,
    check_suffix,
    read_committed,
    unique_key,
    write_rounds,
)
from tests.txn_log.cli.test_cli import txnlog
from tests.txn_log.processes.test_readers_never_wait import _wait_stopped
from tests.txn_log.processes.test_verify_live import settle
from txn_log.log import Log
from txn_log.storage.segment import LogSegment

ROOT = Path(__file__).resolve().parents[3]
ONE_BATCH_SEGMENTS = "14"  # segment.bytes: every batch rolls, nothing merges (one-for-one swaps)
SWAP_POINTS = [
    ("cleaner.horizon.after_temp_fsync", 1),  # cleaner_horizon, written before the swap
    ("cleaner.horizon.after_rename", 1),
    ("cleaner.after_cleaned", 1),
    ("cleaner.before_log_swap", 1),
    ("cleaner.after_swap_commit", 1),
    ("cleaner.between_swap_renames", 1),
    ("cleaner.between_swap_renames", 2),
    ("cleaner.after_swap", 1),
    ("cleaner.after_swap", 2),
]
MERGE_POINTS = [  # the default segment.bytes: the four closed segments merge into one
    ("cleaner.after_cleaned", 1),
    ("cleaner.after_merge_hint", 1),
    ("cleaner.before_log_swap", 1),
    ("cleaner.after_swap_commit", 1),
    ("cleaner.between_swap_renames", 1),
    ("cleaner.after_swap", 1),  # the merged file in place, the segments it covers not deleted
    ("cleaner.between_merged_deletes", 1),
    ("cleaner.between_merged_deletes", 2),
    ("cleaner.before_merge_hint_delete", 1),
]


def make_log(path: Path, rounds: int, segment_bytes: str | None = None, **extra: str) -> None:
    config = {"cleanup.policy": "compact", "index.interval.bytes": "64", **extra}
    if segment_bytes is not None:
        config["segment.bytes"] = segment_bytes
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic(TP.topic, config=config)
        write_rounds(log, 0, rounds)


def run_worker(
    *args: object, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.txn_log.cleaner.cleaner_workers", *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )  # fmt: skip


def leftovers(path: Path) -> list[str]:
    directory = path / TP.directory_name
    return sorted(
        p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap", ".merged")
    )


def segment_ranges(path: Path) -> list[tuple[int, int]]:
    """(base, end) of every segment on disk, opened one by one (no reader's list)."""
    directory = path / TP.directory_name
    bases = sorted(int(p.name[:-4]) for p in directory.iterdir() if p.name.endswith(".log"))
    ranges = []
    for base in bases:
        segment = LogSegment.open(directory, base)
        ranges.append((base, segment.next_offset))
        segment.close()
    return ranges


def recover(path: Path) -> list[tuple[int, int]]:
    """Open the partition as a writer (recovery under its lock); then no cleaner file is left
    and the segments meet end to end. Their (base, end)."""
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.partition_log(TP)
    assert leftovers(path) == []
    ranges = segment_ranges(path)
    assert all(end == following for (_, end), (following, _) in itertools.pairwise(ranges))
    return ranges


@pytest.mark.parametrize(
    ("segment_bytes", "point", "after"),
    [(ONE_BATCH_SEGMENTS, *p) for p in SWAP_POINTS] + [(None, *p) for p in MERGE_POINTS],
)
def test_sigkill_at_every_swap_step_loses_and_duplicates_nothing(
    tmp_path: Path, segment_bytes: str | None, point: str, after: int
) -> None:
    """SIGKILL at every step of a one-for-one swap and of a merge of segments: a lock-free
    reader of what the crash left, recovery, and a cleaning after it lose, duplicate and show
    no committed record wrongly, and the segments meet end to end again after recovery."""
    path = tmp_path / "log"
    make_log(path, rounds=4, segment_bytes=segment_bytes)
    before = read_committed(str(path))
    assert check_read(before) is None and len(before) == 44
    killed = run_worker("clean", path, env={"TXNLOG_CRASH_POINT": point,
                                             "TXNLOG_CRASH_AFTER": str(after)})  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # a lock-free reader meets the directory as the crash left it: still correct
    mid = read_committed(str(path))
    unfinished_work_is_what_verify_reports(path, point, merging=segment_bytes is None)
    assert check_read(mid) is None and set(mid) <= set(before)
    for offset in range(before[-1][0]):  # reads that start through the offset index
        suffix = read_committed(str(path), offset)
        assert check_suffix(suffix, offset) is None and set(suffix) <= set(before)
        assert {o for o, _, _ in suffix} >= {o for o, _, _ in mid if o >= offset}
    ranges = recover(path)
    after_recovery = read_committed(str(path))
    assert check_read(after_recovery) is None and set(after_recovery) <= set(before)
    verified = txnlog("verify", path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # and a cleaning afterwards completes the job
    finished = run_worker("clean", path)
    assert finished.returncode == 0, finished.stderr
    cleaned = read_committed(str(path))
    assert check_read(cleaned) is None
    assert len(cleaned) < len(before) and set(cleaned) <= set(before)
    if segment_bytes is None:  # merged: the closed segments are one
        assert [base for base, _ in segment_ranges(path)] == [0, ranges[-1][0]]


def unfinished_work_is_what_verify_reports(path: Path, point: str, *, merging: bool) -> None:
    """An operator's read-only ``txnlog verify`` of what the crash left: a swap stopped after
    its commit point and the segments a merge covers but has not deleted are reported as
    repairable (recovery finishes them, nothing is corrupt); nothing else is reported, and
    ``--repair`` leaves no problem and no cleaner file."""
    verified = txnlog("verify", path, "--json")
    problems = json.loads(verified.stdout)["problems"]
    texts = [p["problem"] for p in problems]
    assert all(p["repairable"] for p in problems), texts
    assert all("commit point" in t or "merge stopped before deleting" in t for t in texts), texts
    unfinished = ["cleaner.after_swap_commit", "cleaner.between_swap_renames"]
    if merging:  # the merged segment is in place; the segments it covers are not all deleted
        unfinished += ["cleaner.after_swap", "cleaner.between_merged_deletes"]
    committed = point in unfinished
    assert (verified.returncode == 1) == committed and bool(problems) == committed, texts
    if committed:
        scratch = path.with_name("repaired")
        shutil.copytree(path, scratch)
        repaired = txnlog("verify", scratch, "--repair")
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
        assert leftovers(scratch) == []


def spawn(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.txn_log.cleaner.cleaner_workers", *map(str, args)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_readers_and_a_writer_in_other_processes_during_repeated_cleanings(
    tmp_path: Path,
) -> None:
    """X-21, B-17: a writer process appends transactions (committed and aborted) while this
    process cleans again and again, merging the closed segments each time; reader processes
    reading in a loop (whole log and from offsets inside it, through the index; one through a
    reader it keeps open) never see a missing, duplicated or aborted record."""
    path = tmp_path / "log"
    make_log(path, rounds=3)
    stop = tmp_path / "stop"
    # one opens a reader per read, one keeps one reader open across the merges
    readers = [spawn("read_loop", path, stop), spawn("read_loop", path, stop, "held")]
    writer = spawn("write", path, 3, 8)
    try:
        swapped = 0
        with Log.open(path, housekeeping_interval_ms=None) as log:
            while writer.poll() is None:
                stats = log.log_manager.clean(TP.topic)
                swapped += sum(len(s.segments_cleaned) for s in stats)
            stats = log.log_manager.clean(TP.topic)
            swapped += sum(len(s.segments_cleaned) for s in stats)
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        assert out.split() == [str(r) for r in range(3, 11)]
        assert swapped >= 3  # segments were replaced under the readers
    finally:
        stop.touch()
        writer.kill()
        outputs = [reader.communicate(timeout=300) for reader in readers]
    for out, err in outputs:
        assert out.startswith("ok "), out + err
    final = read_committed(str(path))
    assert check_read(final) is None
    assert {k for _, k, _ in final} == {*KEYS, *(unique_key(r) for r in range(11))}


def test_one_cleaner_at_a_time_and_a_live_cleaners_files_survive_recovery(
    tmp_path: Path,
) -> None:
    """A cleaner holding the partition's cleaner lock (another process, stopped mid-work) makes
    others skip the partition, and a writer opening the partition meanwhile does not delete
    the ``.cleaned`` files it is writing; once it dies they are deleted as leftovers."""
    path = tmp_path / "log"
    make_log(path, rounds=2)
    directory = path / TP.directory_name
    holder = spawn("hold_cleaner", path)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        holder.send_signal(signal.SIGSTOP)
        in_progress = directory / "00000000000000000000.log.cleaned"
        in_progress.write_bytes(b"being written")
        with Log.open(path, housekeeping_interval_ms=None) as log:
            (stats,) = log.log_manager.clean(TP.topic)
            assert stats.skipped == "another process is cleaning it"
        assert in_progress.exists()
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.partition_log(TP)
    assert not in_progress.exists()
    assert run_worker("clean", path).stdout.split() == ["0", "24"]


def test_retention_in_another_process_while_segments_are_merged(tmp_path: Path) -> None:
    """cleanup.policy=compact,delete: a retention process deletes the oldest segments again and
    again while this process merges cleaned segments and a writer process appends. A merge
    whose segments retention took first is dropped, never swapped in; afterwards the segments
    meet end to end, nothing is left over, the log verifies, and read_committed shows only
    committed records, in order, with the newest round whole."""
    path = tmp_path / "log"
    make_log(path, rounds=3, **{"cleanup.policy": "compact,delete", "retention.bytes": "600"})
    stop = tmp_path / "stop"
    retainer = spawn("retain_loop", path, stop)
    writer = spawn("write", path, 3, 12)
    try:
        written = 0
        with Log.open(path, housekeeping_interval_ms=None) as log:
            while writer.poll() is None:
                written += sum(s.segments_written for s in log.log_manager.clean(TP.topic))
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        assert out.split() == [str(r) for r in range(3, 15)]
    finally:
        stop.touch()
        writer.kill()
        retained, errors = retainer.communicate(timeout=300)
    assert retainer.returncode == 0, errors
    assert int(retained.split()[1]) > 0 and written > 0  # both really ran
    recover(path)
    records = read_committed(str(path))
    assert records and check_suffix(records, records[0][0]) is None
    newest = {key: value for _, key, value in records if key is not None}
    assert all(newest[key] == b"committed:%s:14" % key for key in [*KEYS, unique_key(14)])
    verified = txnlog("verify", path)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_verify_beside_a_cleaner_merging_in_another_process(tmp_path: Path) -> None:
    """A cleaner process frozen (SIGSTOP) in the middle of a merge, holding the partition lock
    with the merge hint written and nothing renamed yet; ``txnlog verify`` in another process
    finds a (real, repairable) problem in its lock-free pass, so it waits for the partition
    lock to check again; the cleaner goes on, renames the merged file over segment 0 and
    deletes the segments it covers. The recheck must read the new segment 0, not reuse its first
    look at the old one (a gap "starts at 96, but the previous one ends at 24" that is not
    there): verify reports exactly the real problem, and the log reads the same newest
    records."""
    path = tmp_path / "log"
    make_log(path, rounds=4)
    before = read_committed(str(path))
    directory = path / TP.directory_name
    cleaner = spawn("clean", path, env={"TXNLOG_CRASH_POINT": "cleaner.after_merge_hint",
                                         "TXNLOG_CRASH_SIGNAL": "STOP"})  # fmt: skip
    verify = None
    try:
        _wait_stopped(cleaner)
        (directory / "00000000000000000050.snapshot").write_bytes(b"not a snapshot")
        verify = subprocess.Popen(
            [sys.executable, "-m", "txn_log.cli", "verify", str(path), "--json"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        settle(verify, directory / ".lock")
        assert verify.poll() is None, "verify did not wait for the cleaner's partition lock"
        cleaner.send_signal(signal.SIGCONT)
        out, err = cleaner.communicate(timeout=120)
        assert cleaner.returncode == 0, err
        assert out.split() == ["0", "24", "48", "72"]  # merged into one
        report_text, err = verify.communicate(timeout=120)
    finally:
        for proc in (cleaner, verify):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
    problems = json.loads(report_text)["problems"]
    assert [(Path(p["file"]).name, p["repairable"]) for p in problems] == [
        ("00000000000000000050.snapshot", True)
    ], problems
    assert [base for base, _ in segment_ranges(path)] == [0, 96]
    after = read_committed(str(path))  # cleaned: fewer records, the newest of each key kept
    assert check_read(after) is None and set(after) < set(before)
    assert {key: value for _, key, value in after} == {key: value for _, key, value in before}
