"""Housekeeping across OS processes: retention runs on its own in a writable Log (T-10), one
pass at a time across processes, never waiting on a writer; producer ids are never issued twice,
whatever step a process is killed at (P-02, M-13)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from txn_log.errors import OffsetOutOfRangeError
from txn_log.log import Log
from txn_log.log_dir.housekeeping import HousekeepingPass
from txn_log.record.codec import decode_batch
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[3]
TP = TopicPartition("shared", 0)


def spawn(module: str, *args: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", f"tests.txn_log.processes.{module}", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


@contextmanager
def holding(role: str, *args: object) -> Iterator[subprocess.Popen[str]]:
    """A worker that took a lock and is then stopped (SIGSTOP), as if frozen mid-operation."""
    worker = spawn("housekeeping_workers", role, *args)
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line.strip() == "held", worker.stderr.read() if worker.stderr else line
        worker.send_signal(signal.SIGSTOP)
        yield worker
    finally:
        worker.kill()
        worker.wait(timeout=30)
        if worker.stdout is not None:
            worker.stdout.close()
        if worker.stderr is not None:
            worker.stderr.close()


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passed (a bound, not a timing check)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def in_thread(action: Callable[[], HousekeepingPass]) -> HousekeepingPass:
    """Run ``action`` in a thread and wait a bounded time for it: it must never block."""
    outcome: list[HousekeepingPass | BaseException] = []

    def run() -> None:
        try:
            outcome.append(action())
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the housekeeping pass blocked"
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    return result


def write_segments(log_dir: Path, batches: int = 30) -> None:
    """Another process writes ``batches`` one-record batches of ~300 bytes (and exits)."""
    writer = spawn("workers", "write", log_dir, TP.topic, 0, batches, 1, 300, "sync")
    _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err


def test_background_housekeeping_of_a_writable_log_applies_retention_bytes(tmp_path: Path) -> None:
    """T-10 (issue 12 item 10): with retention.bytes=1 a writable Log's own housekeeping thread
    leaves only the active segment, and a read from the old start gets the data-loss answer."""
    log_dir = tmp_path / "log"
    with Log.open(log_dir, housekeeping_interval_ms=None) as setup:
        setup.create_topic(TP.topic, config={"segment.bytes": "700", "retention.bytes": "1"})
    write_segments(log_dir)
    directory = log_dir / TP.directory_name
    assert len(list(directory.glob("*.log"))) >= 10

    log = Log.open(log_dir, housekeeping_interval_ms=50)
    partition = log.partition_log(TP)
    end = partition.log_end_offset
    assert wait_until(lambda: len(list(directory.glob("*.log"))) == 1)
    (active,) = directory.glob("*.log")
    start = int(active.name[:20])
    assert 0 < start < end
    with pytest.raises(OffsetOutOfRangeError, match=rf"offset 0 is outside the log \[{start}, "):
        list(partition.read(0))
    assert sorted(p.suffix for p in directory.glob("0*.*index")) == [".index", ".timeindex"]
    log.close()
    with Log.open(log_dir, read_only=True) as reader:
        assert reader.partition_reader(TP).log_start_offset == start


def test_a_process_stopped_inside_a_pass_makes_the_others_skip_not_wait(tmp_path: Path) -> None:
    """One pass at a time across processes: while another process holds the housekeeping lock
    (stopped there), a pass here is skipped at once; once that process is gone, it runs."""
    log_dir = tmp_path / "log"
    log = Log.open(log_dir, housekeeping_interval_ms=None)
    log.create_topic(TP.topic, config={"segment.bytes": "700", "retention.bytes": "1"})
    write_segments(log_dir, batches=8)
    partition = log.partition_log(TP)
    segments = len(partition.segments)
    with holding("hold_housekeeping", log_dir):
        skipped = in_thread(log.run_housekeeping)
        assert not skipped.ran and skipped.partitions == {}
        assert len(partition.segments) == segments
    assert wait_until(lambda: in_thread(log.run_housekeeping).ran)
    assert len(partition.segments) == 1
    log.close()


def test_a_writer_stopped_inside_an_append_never_blocks_housekeeping_or_close(
    tmp_path: Path,
) -> None:
    """Housekeeping works under each partition's lock, but never waits for it: a partition whose
    writer is stopped mid-append is skipped this round, the others are done, close returns."""
    log_dir = tmp_path / "log"
    log = Log.open(log_dir, housekeeping_interval_ms=50)
    log.create_topic(TP.topic, config={"segment.bytes": "700", "retention.bytes": "1"})
    log.create_topic("other", config={"segment.bytes": "700", "retention.bytes": "1"})
    write_segments(log_dir, batches=8)
    other = log.partition_log(TopicPartition("other", 0))
    producer = log.producer()
    for i in range(8):
        producer.send("other", b"%d" % i * 300, partition=0)
        producer.flush()
    partition = log.partition_log(TP)
    segments = len(partition.segments)
    with holding("hold_partition", log_dir, TP.topic):
        result = in_thread(log.run_housekeeping)
        assert result.ran and TP in result.busy and TP not in result.partitions
        assert len(other.segments) == 1 and len(partition.segments) == segments
        closing = threading.Thread(target=log.close, daemon=True)
        closing.start()
        closing.join(timeout=30)
        assert not closing.is_alive(), "Log.close waited for the stopped writer"


@pytest.mark.parametrize(
    "crash_point", ["producer_ids.after_temp_fsync", "producer_ids.after_rename"]
)
def test_producer_ids_are_never_issued_twice_whatever_step_a_process_dies_at(
    tmp_path: Path, crash_point: str
) -> None:
    """P-02, M-13: blocks of ids reserved durably (write, fsync, rename, directory fsync); a
    process SIGKILLed between two of these steps, and processes reserving at the same time,
    never hand out the same id."""
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    issued: list[int] = []
    for after in (1, 2, 3):
        worker = spawn(
            "housekeeping_workers",
            "issue_ids",
            log_dir,
            50,
            7,
            env={"TXNLOG_CRASH_POINT": crash_point, "TXNLOG_CRASH_AFTER": str(after)},
        )
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == -signal.SIGKILL, (crash_point, worker.returncode, err)
        issued.extend(int(line) for line in out.split())
    concurrent = [spawn("housekeeping_workers", "issue_ids", log_dir, 40, 3) for _ in range(3)]
    for worker in concurrent:
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        issued.extend(int(line) for line in out.split())
    duplicates = [pid for pid, n in Counter(issued).items() if n > 1]
    assert not duplicates, duplicates
    assert len(issued) >= 3 * 40


def test_readers_and_writers_in_other_processes_meet_retention_without_false_errors(
    tmp_path: Path,
) -> None:
    """While one process's housekeeping deletes segments as fast as two writer processes roll
    them, lock-free readers in other processes only ever hear "out of range" (then resume at the
    log start), never a corruption error; no deleted segment comes back; nothing acknowledged
    at or after the final log start is missing."""
    log_dir = tmp_path / "log"
    with Log.open(log_dir, housekeeping_interval_ms=None) as setup:
        setup.create_topic(TP.topic, config={"segment.bytes": "2000", "retention.bytes": "6000"})
    batches, writers = 150, 2
    end = batches * writers
    keeper = Log.open(log_dir, housekeeping_interval_ms=10)
    keeper.partition_log(TP)
    readers = [spawn("housekeeping_workers", "tail", log_dir, TP.topic, end, 30) for _ in range(2)]
    procs = [
        spawn("workers", "write", log_dir, TP.topic, w, batches, 1, 300, "nosync")
        for w in range(writers)
    ]
    acknowledged: list[dict[str, int]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        acknowledged.extend(json.loads(line) for line in out.splitlines())
    for reader in readers:
        out, err = reader.communicate(timeout=120)
        assert reader.returncode == 0, err
        summary = json.loads(out)
        assert summary["next_offset"] == end, summary
    partition = keeper.partition_log(TP)
    assert wait_until(lambda: len(partition.segments) <= 4)
    start = partition.log_start_offset
    directory = log_dir / TP.directory_name
    assert min(int(p.name[:20]) for p in directory.glob("*.log")) == start  # none came back
    assert all(p.stat().st_size > 0 for p in directory.glob("*.log"))
    kept = {o for _, batch in partition.read(start) for o in _offsets(batch)}
    assert {a["base_offset"] for a in acknowledged if a["base_offset"] >= start} <= kept
    keeper.close()


def _offsets(batch: memoryview) -> list[int]:
    return list(decode_batch(batch).records.column("offset").to_pylist())
