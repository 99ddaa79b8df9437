"""Readers never wait on writers (DESIGN §3), even on a writer frozen inside a commit.

A transactional producer process is stopped (SIGSTOP, ``TXNLOG_CRASH_SIGNAL=STOP``) right after
its PREPARE_COMMIT (``txn.after_prepare``): it holds the coordinator's lock and will not let go
while it stays stopped. read_committed readers in other processes, of the same topic and of
unrelated ones, must still answer: a transaction stuck at the coordinator is the transaction
timeout's business (C-25), not a reason to block every reader (B-05, B-07).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[3]
STOP_WAIT_S = 60.0  # bound on waiting for the worker to reach its stop point (progress)
READ_WAIT_S = 30.0  # a reader still blocked after this is blocked for good (the writer is frozen)


def _wait_stopped(proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"worker exited with {proc.returncode}: {proc.stderr}"
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        time.sleep(0.05)
    raise AssertionError("the worker never reached txn.after_prepare")


def _finishes(call: object) -> tuple[bool, object]:
    """Run ``call`` in a thread; (whether it returned within READ_WAIT_S, its result)."""
    result: list[object] = []

    def run() -> None:
        result.append(call())  # type: ignore[operator]

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(READ_WAIT_S)
    return (not thread.is_alive(), result[0] if result else None)


def test_read_committed_readers_do_not_wait_on_a_writer_stopped_inside_a_commit(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("t", 1)
        log.create_topic("other", 1)
        producer = log.producer()
        producer.send("other", b"plain", partition=0)
        producer.flush()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH_")}
    env.update(TXNLOG_CRASH_POINT="txn.after_prepare", TXNLOG_CRASH_SIGNAL="STOP")
    worker = subprocess.Popen(
        [
            sys.executable, "-m", "tests.txn_log.processes.txn_workers",
            "txn", str(log_dir), "frozen", "commit", "t", "0:3", "g", "{}",
        ],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    reader = Log.open(log_dir)  # another process's view (this test process)
    try:
        _wait_stopped(worker)
        consumer = reader.consumer("read_committed")
        done, end = _finishes(lambda: consumer.end_offset(TopicPartition("other", 0)))
        assert done, "a read_committed reader of an unrelated topic waited on the writer"
        assert end == 1
        done, records = _finishes(lambda: consumer.read(TopicPartition("other", 0), 0))
        assert done and [r.value for r in records] == [b"plain"]  # type: ignore[union-attr]
        done, end_t = _finishes(lambda: consumer.end_offset(TopicPartition("t", 0)))
        assert done, "a read_committed reader of the committing topic waited on the writer"
        assert end_t == 0  # the transaction is prepared, its marker not written: not stable
        done, _ = _finishes(lambda: reader.committed("g", [TopicPartition("t", 0)]))
        assert done, "committed() waited on the writer"
        worker.send_signal(signal.SIGCONT)
        assert worker.wait(timeout=STOP_WAIT_S) == 0, worker.stderr.read() if worker.stderr else ""
        with Log.open(log_dir) as log:
            values = [r.value for r in log.consumer().read(TopicPartition("t", 0), 0)]
            assert len(values) == 3  # the commit finished once the writer went on
    finally:
        if worker.poll() is None:  # first, so that a blocked reader thread can let go
            worker.kill()
            worker.wait()
        reader.close()


def test_a_reader_thread_does_not_wait_for_a_writer_thread_queued_behind_a_frozen_process(
    tmp_path: Path,
) -> None:
    """Process B is frozen mid-append, holding t-0's lock. In this process a writer thread
    queues for that lock; a reader thread of the same process and the same partition must
    still read (the writer waits for the file lock holding nothing readers need)."""
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("t", 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH_")}
    env.update(TXNLOG_CRASH_POINT="append.before_write", TXNLOG_CRASH_SIGNAL="STOP")
    env["TXNLOG_CRASH_AFTER"] = "2"  # the second batch: one is in the log, readable
    worker = subprocess.Popen(
        [
            sys.executable, "-m", "tests.txn_log.processes.workers",
            "write", str(log_dir), "t", "0", "3", "5", "64", "sync",
        ],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    log = Log.open(log_dir)
    try:
        _wait_stopped(worker)
        producer = log.producer()
        writer = threading.Thread(
            target=lambda: (producer.send("t", b"queued", partition=0), producer.flush()),
            daemon=True,
        )
        writer.start()
        writer.join(0.5)
        assert writer.is_alive()  # queued behind the frozen process, as it should be
        consumer = log.consumer("read_committed")
        done, records = _finishes(lambda: consumer.read(TopicPartition("t", 0), 0))
        assert done, "a reader thread waited for a writer thread queued on the partition lock"
        assert len(records) == 5  # type: ignore[arg-type]
        worker.send_signal(signal.SIGCONT)
        assert worker.wait(timeout=STOP_WAIT_S) == 0
        writer.join(STOP_WAIT_S)
        assert not writer.is_alive()
        assert len(consumer.read(TopicPartition("t", 0), 0)) == 16
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        log.close()


def test_metrics_do_not_wait_on_a_writer_stopped_inside_a_commit(tmp_path: Path) -> None:
    """MET-01..03, MET-05: the metrics (``txnlog metrics``, ``txnlog serve --metrics-port``)
    are readers too: a process frozen holding the coordinator's lock after its PREPARE_COMMIT
    must not stop an operator from seeing the stuck LSO it causes."""
    from txn_log.log_metrics import collect

    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("t", 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH_")}
    env.update(TXNLOG_CRASH_POINT="txn.after_prepare", TXNLOG_CRASH_SIGNAL="STOP")
    worker = subprocess.Popen(
        [
            sys.executable, "-m", "tests.txn_log.processes.txn_workers",
            "txn", str(log_dir), "frozen", "commit", "t", "0:3", "g", "{}",
        ],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    reader = Log.open(log_dir)
    try:
        _wait_stopped(worker)
        done, metrics = _finishes(lambda: collect(reader))
        assert done, "collecting the metrics waited on the frozen writer"
        (t0,) = [p for p in metrics.partitions if p.topic == "t"]  # type: ignore[union-attr]
        assert (t0.last_stable_offset, t0.high_watermark) == (0, 3)  # held by the prepared txn
        worker.send_signal(signal.SIGCONT)
        assert worker.wait(timeout=STOP_WAIT_S) == 0, worker.stderr.read() if worker.stderr else ""
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        reader.close()
