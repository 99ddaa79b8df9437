"""Exactly-once under faults: the ``txnlog → Spark → txnlog`` pipeline killed at chosen points.

Every scenario runs real OS processes: the Spark driver is a process group of its own (Python
driver, JVM, Python workers) killed with SIGKILL by a crash point inside txnlog
(``txn_log/fault_points.py``), or by the test. After each one the query restarts from its
checkpoint and runs to the end; then read_committed output must equal the committed input
exactly (same multiset, per-key order kept), nothing aborted or uncommitted may be visible,
the sink's ledger and group offsets must match the last committed batch, and every LSO must
reach its log end.

``make test`` runs this file: one scenario per kill point on a few hundred records, the killed
driver a process of its own, the restart in the test run's SparkSession (one JVM start saved
per scenario). ``make faults`` runs it on more data with fresh seeds, and the random soak run
is ``make soak`` (``integration/soak.py``). Replay a failure with ``TXNLOG_TEST_SEED=<seed>``.
"""

from __future__ import annotations

import base64
import os
import pickle
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from commit_protocol.batch_commit import SinkCommitProtocol
from commit_protocol.embedded import EmbeddedBackend
from demo.pipeline import (
    OUTPUT,
    ROOT,
    create_topics,
    kill_group,
    read_all,
    run_workload,
    spawn,
    start_etl,
    verify,
)
from integration import stale_attempt
from tests.support import open_transaction
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.fault]

SEED = int(os.environ.get("TXNLOG_TEST_SEED", random.randrange(1 << 30)))
# make faults: TXNLOG_FAULT_SCALE=10 (ten times the transactions, micro-batches five times larger)
SCALE = int(os.environ.get("TXNLOG_FAULT_SCALE", "1"))
MAX_PER_TRIGGER = 100 * max(SCALE // 2, 1)
TP_ORDERS_0 = TopicPartition("orders", 0)
DRIVER_TIMEOUT_S = 180 * SCALE
RESTART_TIMEOUT_S = 180 * SCALE

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
    print(f"seed={SEED} scale={SCALE}")
    log_dir = tmp_path / "log"
    create_topics(log_dir)
    run_workload(log_dir, transactions * SCALE, per_txn, SEED, 0.0, 3, "writer")
    return log_dir


def run_driver(
    log_dir: Path,
    checkpoint: Path,
    *,
    point: str | None = None,
    mode: str = "continuous",
    timeout_s: float = DRIVER_TIMEOUT_S,
) -> int:
    """One driver run; with ``point`` it must die by SIGKILL there. Returns its exit code."""
    env = {"TXNLOG_CRASH_POINT": point, "TXNLOG_CRASH_SCOPE": "group"} if point else {}
    proc = spawn("query", log_dir, checkpoint, mode, MAX_PER_TRIGGER, env=env, new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except Exception:
        kill_group(proc)
        raise
    if point is None:
        assert proc.returncode == 0, err[-3000:]
    return proc.returncode


def restart_to_the_end(spark: Any, log_dir: Path, checkpoint: Path) -> None:
    """Restart the query from its checkpoint in this run's SparkSession and let it read
    everything committed so far (Trigger.AvailableNow)."""
    query = start_etl(spark, log_dir, checkpoint, "available-now", MAX_PER_TRIGGER)
    try:
        assert query.awaitTermination(RESTART_TIMEOUT_S), "the restarted query did not finish"
    finally:
        query.stop()


def assert_exactly_once(log_dir: Path) -> None:
    report = verify(log_dir)
    facts = report.as_dict()
    assert (facts["duplicates"], facts["missing"], facts["unexpected"]) == (0, 0, 0), (SEED, facts)
    assert facts["order_violations"] == 0, (SEED, facts)
    assert facts["group_offsets_match"] and facts["lso_at_log_end"], (SEED, facts)
    assert report.exactly_once and report.records_in > 0 and report.aborted_skipped > 0, facts


@pytest.mark.parametrize("point", DRIVER_POINTS)
def test_driver_killed_at(point: str, spark: Any, tmp_path: Path) -> None:
    log_dir = seeded(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    code = run_driver(log_dir, checkpoint, point=point)
    assert code == -signal.SIGKILL, f"the driver was not killed at {point} (exit {code})"
    restart_to_the_end(spark, log_dir, checkpoint)
    assert_exactly_once(log_dir)


def test_task_killed_and_retried(tmp_path: Path) -> None:
    """A write task's Python worker dies by SIGKILL mid-write; Spark retries the task
    (local[2,3]) and the retry fences the dead attempt's transaction."""
    log_dir = seeded(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    env = {"TXNLOG_CRASH_POINT": "sink.task_write"}  # process scope: only the worker dies
    proc = spawn(
        "query", log_dir, checkpoint, "available-now", MAX_PER_TRIGGER, env=env, new_session=True
    )
    _, err = proc.communicate(timeout=DRIVER_TIMEOUT_S)
    assert proc.returncode == 0, err[-3000:]
    assert_exactly_once(log_dir)


def test_upstream_producer_killed_mid_transaction(spark: Any, tmp_path: Path) -> None:
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
    restart_to_the_end(spark, log_dir, tmp_path / "checkpoint")
    assert_exactly_once(log_dir)


@pytest.mark.parametrize("tear", ["mid-batch", "length-prefix"])
def test_torn_last_batch_between_runs(tear: str, spark: Any, tmp_path: Path) -> None:
    """Between two runs of the query, a producer died while appending the last batch of an
    input segment: the segment is cut inside that batch (``mid-batch``), or ends in the first
    11 bytes of a batch that never got further (``length-prefix``). Its transaction never
    committed; the next reader must truncate the torn tail, the transaction's timeout must
    abort it, and everything committed before must come out exactly once."""
    log_dir = seeded(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    restart_to_the_end(spark, log_dir, checkpoint)
    with Log.open(log_dir) as log:
        producer = log.producer("late")
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(20):
            producer.send("orders", b"late-%d" % i, partition=0)
        producer.commit_transaction()
        segment = sorted((log_dir / "orders-0").glob("*.log"))[-1]
        committed_size = segment.stat().st_size
        torn = [("orders", 0, b"torn-%d" % i) for i in range(20)]
        # the batch reaches the file; the process dies before it commits
        open_transaction(log, "dying", torn, transaction_timeout_ms=100)
    if tear == "mid-batch":
        torn_size = committed_size + (segment.stat().st_size - committed_size) // 2
        os.truncate(segment, torn_size)
    else:
        os.truncate(segment, committed_size)
        with segment.open("ab") as f:
            f.write(b"\x00" * 11)  # a base offset and 3 of the 4 bytes of a length
    time.sleep(0.3)  # past the dead producer's transaction timeout
    restart_to_the_end(spark, log_dir, checkpoint)
    assert_exactly_once(log_dir)
    with Log.open(log_dir) as log:
        values = [r.value for r in log.consumer("read_uncommitted").read(TP_ORDERS_0, 0)]
    assert not any(v.startswith(b"torn-") for v in values)  # the torn batch is gone
    assert sum(v.startswith(b"late-") for v in values) == 20


def test_a_stale_task_attempt_woken_after_fencing_fails_and_leaves_nothing(tmp_path: Path) -> None:
    """Attempt 0 of a write task freezes (SIGSTOP, a long GC pause) with 5 of its 10 rows in
    the log; attempt 1 fences it (init_transactions bumps the epoch of the same transactional
    id), writes all 10, and the driver commits the batch. Then attempt 0 wakes (SIGCONT) and goes
    on: it must fail naming the fencing, and nothing it wrote may become visible."""
    log_dir = tmp_path / "log"
    create_topics(log_dir)
    stale = attempt_process(log_dir, 0, "--pause-after", "5")
    try:
        assert stale.stdout is not None and stale.stdout.readline().strip() == "paused"
        wait_until_stopped(stale.pid)
        retry = attempt_process(log_dir, 1)
        out, err = retry.communicate(timeout=DRIVER_TIMEOUT_S)
        assert retry.returncode == 0, err
        message = pickle.loads(base64.b64decode(out.split()[-1]))
        backend = EmbeddedBackend.open(log_dir)
        assert SinkCommitProtocol(backend, stale_attempt.SINK).commit(0, [message])
        os.kill(stale.pid, signal.SIGCONT)
        _, err = stale.communicate(timeout=DRIVER_TIMEOUT_S)
    finally:
        if stale.poll() is None:
            stale.kill()
            stale.communicate()
    # fenced at its next append (the partition holds a newer epoch) or at its flush
    assert stale.returncode == 1, err
    assert re.search(r"(ProducerFenced|InvalidProducerEpoch)Error: .*epoch", err), err
    with Log.open(log_dir) as log:
        committed = read_all(log, OUTPUT, "read_committed")
        everything = read_all(log, OUTPUT, "read_uncommitted")
        ends = {tp: log.partition_log(tp).log_end_offset for tp in log.partitions(OUTPUT)}
        stable = {tp: log.consumer().end_offset(tp) for tp in log.partitions(OUTPUT)}
    values = sorted(value for rows in committed.values() for _, value, _ in rows)
    assert values == sorted(b"row-%d" % i for i in range(10))  # attempt 1's rows, once
    # the frozen attempt's first 5 rows reached the log (aborted by the fencing); after waking
    # it appended nothing more
    assert sum(len(rows) for rows in everything.values()) == 15
    assert stable == ends  # nothing is left open


def attempt_process(log_dir: Path, attempt: int, *extra: str) -> subprocess.Popen[str]:
    args = [str(log_dir), str(attempt), "10", *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "integration.stale_attempt", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_stopped(pid: int) -> None:
    """Until the kernel reports ``pid`` stopped (state T in /proc/<pid>/stat)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop")
