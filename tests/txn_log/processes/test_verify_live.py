"""``txnlog verify`` and ``verify --repair`` while other processes append (issue 12 item 4).

Writer processes append acknowledged, fsynced batches (``workers.py write``) while this test
runs ``txnlog verify --repair`` and plain ``txnlog verify`` in a loop, as subprocesses. A live
tail (a batch being written, an index entry written after the scan's snapshot, a segment just
rolled) is not corruption: plain verify must report no problem, and repair, holding the same
partition lock as the writers, must find nothing to cut. Afterwards every acknowledged batch
is readable exactly once at its acknowledged offsets (F-08: a batch is all there or not at
all), offsets are contiguous, and a final verify is clean (X-11: what recovery keeps is exactly
the valid log).

``TXNLOG_FAULT_SCALE`` (``make faults``) multiplies the batches written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.txn_log.processes.test_multiprocess import ROOT, TP, spawn
from txn_log.log import Log
from txn_log.record.codec import decode_batch, encode_records
from txn_log.topic_partition import TopicPartition

SCALE = int(os.environ.get("TXNLOG_FAULT_SCALE", "1"))
WRITERS, BATCHES, PER_BATCH, VALUE_SIZE = 2, 1500 * SCALE, 1, 300


def txnlog_verify(log_dir: Path, *options: str) -> tuple[int, dict[str, Any], str]:
    """Run ``python -m txn_log.cli verify --json`` as its own process."""
    proc = subprocess.run(
        [sys.executable, "-m", "txn_log.cli", "verify", str(log_dir), "--json", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, report, proc.stderr


def read_batches(log_dir: Path) -> list[tuple[int, list[int], list[str]]]:
    """(base offset, record offsets, value prefixes) of every batch of the partition."""
    log = Log.open(log_dir)
    batches = []
    for _, batch in log.partition_log(TP).read(0):
        records = decode_batch(batch).records
        values = [v.split(b"|")[0].decode() for v in records.column("value").to_pylist()]
        batches.append(
            (records.column("offset")[0].as_py(), records.column("offset").to_pylist(), values)
        )
    log.close()
    return batches


def test_verify_and_repair_on_a_live_log_lose_nothing_and_report_nothing(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "log"
    Log.open(log_dir).create_topic(
        "shared", config={"segment.bytes": str(256 * 1024), "index.interval.bytes": "1024"}
    )
    writers = [
        spawn("write", log_dir, "shared", w, BATCHES, PER_BATCH, VALUE_SIZE, "sync")
        for w in range(WRITERS)
    ]
    pool = ThreadPoolExecutor(WRITERS)  # drain their pipes while they run
    outputs_f = [pool.submit(w.communicate, timeout=600) for w in writers]
    false_problems: list[Any] = []
    repairs: list[Any] = []
    runs = 0
    try:
        while any(w.poll() is None for w in writers) or runs == 0:
            code, report, err = txnlog_verify(log_dir, "--repair")
            if code != 0 or report.get("problems") or report.get("repaired"):
                repairs.append((code, report, err))
            code, report, err = txnlog_verify(log_dir)
            if code != 0 or report.get("problems"):
                false_problems.append((code, report, err))
            runs += 1
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
        outputs = [f.result() for f in outputs_f]
        pool.shutdown()
    print(f"{runs} verify --repair / verify rounds while {WRITERS} writers appended")
    for w, (_, err) in zip(writers, outputs, strict=True):
        assert w.returncode == 0, err
    acknowledged = [json.loads(line) for out, _ in outputs for line in out.splitlines()]
    assert len(acknowledged) == WRITERS * BATCHES

    batches = read_batches(log_dir)
    by_base = {base: values for base, _, values in batches}
    offsets = [o for _, batch_offsets, _ in batches for o in batch_offsets]
    assert offsets == list(range(WRITERS * BATCHES * PER_BATCH)), "offset gap or overlap"
    lost = []
    for ack in acknowledged:
        first = ack["batch"] * PER_BATCH
        expected = [f"w{ack['writer']}-{first + i:010d}" for i in range(PER_BATCH)]
        if by_base.get(ack["base_offset"]) != expected:
            lost.append(ack)
    assert not lost, f"{len(lost)} acknowledged batches lost or moved, e.g. {lost[:3]}"
    counts = Counter(v for _, _, values in batches for v in values)
    assert all(c == 1 for c in counts.values()), "a record is readable twice"
    assert not repairs, (
        f"repair changed a healthy live log in {len(repairs)} of {runs} runs: {repairs[:2]}"
    )
    assert not false_problems, (
        f"plain verify reported problems on a healthy live log in {len(false_problems)} of "
        f"{runs} runs: {false_problems[:2]}"
    )
    code, report, err = txnlog_verify(log_dir)
    assert code == 0 and report["problems"] == [], (report, err)


# --- a writer caught in the middle: deterministic ------------------------------------------


def spawn_verify_worker(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.txn_log.processes.verify_workers", *map(str, args)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def spawn_verify(log_dir: Path, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "txn_log.cli", "verify", str(log_dir), "--json", *options],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def waits_on_flock(pid: int, path: Path) -> bool:
    """Whether process ``pid`` is blocked in flock on ``path`` (a ``->`` line of /proc/locks)."""
    inode = str(os.stat(path).st_ino)
    return any(
        len(fields) > 6
        and fields[1:3] == ["->", "FLOCK"]
        and fields[5] == str(pid)
        and fields[6].split(":")[-1] == inode
        for fields in (line.split() for line in Path("/proc/locks").read_text().splitlines())
    )


def settle(proc: subprocess.Popen[str], lock_file: Path) -> None:
    """Wait (bounded) until ``proc`` has either finished or blocks on the partition lock: in
    both cases it has looked at the partition while the writer was stopped."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and not waits_on_flock(proc.pid, lock_file):
        assert time.monotonic() < deadline, "verify neither finished nor waited for the lock"
        time.sleep(0.01)


def seeded_log(tmp_path: Path) -> Path:
    log_dir = tmp_path / "log"
    Log.open(log_dir).create_topic("shared")
    writer = spawn("write", log_dir, "shared", 0, 5, 10, 100, "sync")
    writer.communicate(timeout=60)
    assert writer.returncode == 0
    return log_dir


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")
@pytest.mark.parametrize("options", [(), ("--repair",)], ids=["verify", "repair"])
def test_a_batch_half_written_by_a_live_writer_is_neither_reported_nor_cut(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """The writer holds the partition lock with half its batch in the file: verify must not
    call that a torn tail, and repair must not truncate it (the writer finishes it later)."""
    log_dir = seeded_log(tmp_path)
    writer = spawn_verify_worker("append-paused", log_dir, "shared")
    assert writer.stdout is not None and writer.stdin is not None
    paused = json.loads(writer.stdout.readline())["paused"]
    assert paused["written"] < paused["size"]
    verify = spawn_verify(log_dir, *options)
    settle(verify, log_dir / "shared-0" / ".lock")
    writer.stdin.write("\n")
    writer.stdin.flush()
    out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    ack = json.loads(out)
    report_text, err = verify.communicate(timeout=60)
    report = json.loads(report_text)
    assert verify.returncode == 0 and report["problems"] == [] and report["repaired"] == [], (
        report,
        err,
    )
    batches = read_batches(log_dir)
    assert [b[0] for b in batches][-1] == ack["base_offset"] == 50
    assert batches[-1][1] == list(range(50, ack["last_offset"] + 1))
    assert txnlog_verify(log_dir)[0] == 0


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")
def test_the_index_entry_of_an_abort_in_flight_is_not_reported(tmp_path: Path) -> None:
    """An ABORT's ``.txnindex`` entry is durable before its marker (B-10): while the writer
    is between the two, the entry names an offset past the log end, and that is not a problem."""
    log_dir = seeded_log(tmp_path)
    writer = spawn_verify_worker("abort-paused", log_dir, "shared")
    assert writer.stdout is not None and writer.stdin is not None
    assert json.loads(writer.stdout.readline())["paused"]["point"] == "marker.after_txn_index"
    verify = spawn_verify(log_dir)
    settle(verify, log_dir / "shared-0" / ".lock")
    writer.stdin.write("\n")
    writer.stdin.flush()
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    report_text, err = verify.communicate(timeout=60)
    assert verify.returncode == 0 and json.loads(report_text)["problems"] == [], (report_text, err)
    assert txnlog_verify(log_dir)[0] == 0


def test_topics_and_segments_vanishing_during_verify_are_skipped(tmp_path: Path) -> None:
    """Topic deletion and retention by another process while verify (and repair) run: what
    vanished is simply not there, never an error or a problem."""
    log_dir = tmp_path / "log"
    log = Log.open(log_dir)
    # scanned first (topics go by name), so verify lists churn-* long before it reaches them
    log.create_topic("aaa", config={"segment.bytes": str(64 * 1024)})
    plog = log.partition_log(TopicPartition("aaa", 0))
    for _ in range(4000):
        plog.append(encode_records([(None, b"x" * 100, None, ())], now_ms=1_700_000_000_000))
    log.close()
    churn = spawn_verify_worker("churn", log_dir, 40 * SCALE)
    failures = []
    runs = 0
    try:
        while churn.poll() is None or runs == 0:
            for options in ((), ("--repair",)):
                code, report, err = txnlog_verify(log_dir, *options)
                if code != 0 or report.get("problems") or report.get("repaired"):
                    failures.append((options, code, report, err[-2000:]))
            runs += 1
    finally:
        if churn.poll() is None:
            churn.kill()
        _, churn_err = churn.communicate(timeout=60)
    assert churn.returncode == 0, churn_err
    assert not failures, f"{len(failures)} of {runs} rounds failed: {failures[:2]}"
