"""Exactly-once under faults: the ``txnlog → Spark → txnlog`` pipeline killed at chosen points.

Every scenario runs real OS processes: the Spark driver is a process group of its own (Python
driver, JVM, Python workers) killed with SIGKILL by a crash point inside txnlog
(``txn_log/fault_points.py``), or by the test. After each one the query restarts from its
checkpoint and runs to the end; then read_committed output must equal the committed input
exactly (same multiset, per-key order kept), nothing aborted or uncommitted may be visible,
the sink's ledger and group offsets must match the last committed batch, and every LSO must
reach its log end.

``make test`` runs this file (one scenario per kill point, small data); the random soak run is
``make soak`` (``integration/soak.py``).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from demo.pipeline import create_topics, kill_group, run_workload, spawn, verify
from txn_log.log import Log

# slow: ~12 min on this machine; `make test-all` runs it (see the issue notes)
pytestmark = [pytest.mark.spark, pytest.mark.fault, pytest.mark.slow]

SEED = int(os.environ.get("TXNLOG_TEST_SEED", random.randrange(1 << 30)))

# Driver kill points, in the order a micro-batch reaches them (issue 6).
DRIVER_POINTS = [
    "sink.task_write",  # a task has appended part of its rows
    "sink.before_commit",  # every task finished; the driver's commit has not started
    "batch.after_prepare",  # inside the batch commit, right after its commit point
    "txn.between_markers",  # inside the batch commit, between two markers
    "batch.before_complete",  # markers and offsets written, ledger COMPLETE not yet
    "sink.after_commit",  # the sink committed; Spark's own commit log entry not yet written
]


def seeded(tmp_path: Path, transactions: int = 6, per_txn: int = 40) -> Path:
    """A log with committed, aborted (every third) and formerly-open transactions."""
    print(f"seed={SEED}")
    log_dir = tmp_path / "log"
    create_topics(log_dir)
    run_workload(log_dir, transactions, per_txn, SEED, 0.0, 3, "writer")
    return log_dir


def run_driver(
    log_dir: Path,
    checkpoint: Path,
    *,
    point: str | None = None,
    mode: str = "continuous",
    timeout_s: float = 240,
) -> int:
    """One driver run; with ``point`` it must die by SIGKILL there. Returns its exit code."""
    env = {"TXNLOG_CRASH_POINT": point, "TXNLOG_CRASH_SCOPE": "group"} if point else {}
    proc = spawn("query", log_dir, checkpoint, mode, 50, env=env, new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except Exception:
        kill_group(proc)
        raise
    if point is None:
        assert proc.returncode == 0, err[-3000:]
    return proc.returncode


def assert_exactly_once(log_dir: Path) -> None:
    report = verify(log_dir)
    facts = report.as_dict()
    assert (facts["duplicates"], facts["missing"], facts["unexpected"]) == (0, 0, 0), (SEED, facts)
    assert facts["order_violations"] == 0, (SEED, facts)
    assert facts["group_offsets_match"] and facts["lso_at_log_end"], (SEED, facts)
    assert report.exactly_once and report.records_in > 0 and report.aborted_skipped > 0, facts


@pytest.mark.parametrize("point", DRIVER_POINTS)
def test_driver_killed_at(point: str, tmp_path: Path) -> None:
    log_dir = seeded(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    code = run_driver(log_dir, checkpoint, point=point)
    assert code == -signal.SIGKILL, f"the driver was not killed at {point} (exit {code})"
    run_driver(log_dir, checkpoint, mode="available-now")
    assert_exactly_once(log_dir)


def test_task_killed_and_retried(tmp_path: Path) -> None:
    """A write task's Python worker dies by SIGKILL mid-write; Spark retries the task
    (local[2,3]) and the retry fences the dead attempt's transaction."""
    log_dir = seeded(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    env = {"TXNLOG_CRASH_POINT": "sink.task_write"}  # process scope: only the worker dies
    proc = spawn("query", log_dir, checkpoint, "available-now", 50, env=env, new_session=True)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    assert_exactly_once(log_dir)


def test_upstream_producer_killed_mid_transaction(tmp_path: Path) -> None:
    """The workload dies with transactions open; they pin the LSO until their timeout (100 ms
    here) is enforced by the reader's planning, and are never visible."""
    log_dir = seeded(tmp_path)
    log = Log.open(log_dir)
    orphan = log.producer("orphan", transaction_timeout_ms=100)
    orphan.init_transactions()
    orphan.begin_transaction()
    for i in range(10):
        orphan.send("orders", b"never-%d" % i, key=b"customer-1")
    orphan.flush()  # ...and its process dies here (nothing more is sent or committed)
    time.sleep(0.3)
    run_driver(log_dir, tmp_path / "checkpoint", mode="available-now")
    assert_exactly_once(log_dir)


def test_torn_last_batch_between_runs(tmp_path: Path) -> None:
    """A crash tore the last batch of an input segment between two runs of the query."""
    log_dir = seeded(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    run_driver(log_dir, checkpoint, mode="available-now")
    log = Log.open(log_dir)
    producer = log.producer("late")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(20):
        producer.send("orders", b"late-%d" % i, partition=0)
    producer.commit_transaction()
    segment = sorted((log_dir / "orders-0").glob("*.log"))[-1]
    with segment.open("ab") as f:
        f.write(b"\x00" * 11)  # a torn append: a length prefix that was never completed
    run_driver(log_dir, checkpoint, mode="available-now")
    assert_exactly_once(log_dir)
