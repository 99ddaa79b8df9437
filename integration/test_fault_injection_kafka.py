"""Exactly-once per task under faults in Kafka mode (issue 16): the main job's pipeline with its
source and sink on ``kafka.bootstrap.servers`` of a ``txnlog serve`` started by the test.

In Kafka mode each task commits its own transaction, with its ledger record inside it, and a
re-run task skips when the ledger holds its ``(sink, batch, task)`` (``commit_protocol.
kafka_backend``). So the driver is killed (its whole process group: JVM and Python workers,
SIGKILL) before any task commits (``sink.task_write``), between task commits
(``kafka_task.after_commit``: one task committed, the others not), after every task committed
(``sink.before_commit``); and a frozen task attempt is fenced by its retry (the driver killed
after its own commit and a task killed and retried: ``test_sink_kafka.py``).
After each, the query restarts from its checkpoint (Kafka mode again) and runs to the end; the
output, read by the files and by a confluent-kafka read_committed consumer alike, must hold every
committed input record exactly once, in per-key order, with nothing aborted visible.
"""

from __future__ import annotations

import base64
import pickle
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demo.pipeline import OUTPUT, kill_group, read_all, read_all_kafka, spawn, start_etl, verify
from demo.served import ServeProcess, start_serve
from integration.test_fault_injection import (
    DRIVER_TIMEOUT_S,
    MAX_PER_TRIGGER,
    RESTART_TIMEOUT_S,
    SEED,
    attempt_process,
    seeded,
    wait_until_stopped,
)
from txn_log.log import Log

pytestmark = [pytest.mark.spark, pytest.mark.fault]

KAFKA_DRIVER_POINTS = [
    "sink.task_write",  # a task has sent part of its rows; no task committed
    "kafka_task.after_commit",  # the first task to finish committed; the others not yet
    "sink.before_commit",  # every task committed; the driver's commit has not started
]
# sink.after_commit and a task killed and retried, on a smaller pipeline:
# integration/test_sink_kafka.py


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    log_dir = seeded(tmp_path)
    with open(tmp_path / "serve.err", "w") as errors:
        server = start_serve(log_dir, stderr=errors)
        try:
            yield server
        finally:
            server.stop()


def assert_exactly_once(server: ServeProcess) -> None:
    report = verify(server.path, server.bootstrap)
    facts = report.as_dict()
    assert (facts["duplicates"], facts["missing"], facts["unexpected"]) == (0, 0, 0), (SEED, facts)
    assert facts["order_violations"] == 0 and not facts["problems"], (SEED, facts)
    assert facts["group_offsets_match"] and facts["lso_at_log_end"], (SEED, facts)
    assert report.exactly_once and report.records_in > 0 and report.aborted_skipped > 0, facts


def restart_to_the_end(spark: Any, server: ServeProcess, checkpoint: Path) -> None:
    query = start_etl(
        spark, server.path, checkpoint, "available-now", MAX_PER_TRIGGER, server.bootstrap
    )
    try:
        assert query.awaitTermination(RESTART_TIMEOUT_S), "the restarted query did not finish"
    finally:
        query.stop()


@pytest.mark.parametrize("point", KAFKA_DRIVER_POINTS)
def test_driver_killed_in_kafka_mode_at(
    point: str, spark: Any, served: ServeProcess, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint"
    env = {"TXNLOG_CRASH_POINT": point, "TXNLOG_CRASH_SCOPE": "group"}
    args = (served.path, checkpoint, "continuous", MAX_PER_TRIGGER, served.bootstrap)
    proc = spawn("query", *args, env=env, new_session=True)
    try:
        _, err = proc.communicate(timeout=DRIVER_TIMEOUT_S)
    except Exception:
        kill_group(proc)
        raise
    assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {err[-3000:]}"
    restart_to_the_end(spark, served, checkpoint)
    assert_exactly_once(served)


def test_a_stale_task_attempt_is_fenced_in_kafka_mode(tmp_path: Path) -> None:
    """Attempt 0 of a task freezes (SIGSTOP) after sending 5 of its 10 rows; attempt 1 fences
    it, writes all 10 and commits its own transaction (Kafka mode). Attempt 0 then wakes: it
    must fail naming the fencing, and none of its rows may become visible."""
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic(OUTPUT, partitions=3)
    with open(tmp_path / "serve.err", "w") as errors:
        server = start_serve(log_dir, stderr=errors)
        try:
            err = _stale_then_retry(log_dir, server.bootstrap)
            wire = read_all_kafka(server.bootstrap, OUTPUT, sorted(_partitions(log_dir)))
        finally:
            server.stop()
    assert re.search(r"Fenced|fenced|epoch", err), err
    with Log.open(log_dir) as log:
        committed = read_all(log, OUTPUT, "read_committed")
        stable = {tp: log.consumer().end_offset(tp) for tp in log.partitions(OUTPUT)}
        ends = {tp: log.partition_log(tp).log_end_offset for tp in log.partitions(OUTPUT)}
    values = sorted(value for rows in committed.values() for _, value, _ in rows)
    assert values == sorted(b"row-%d" % i for i in range(10))  # attempt 1's rows, once
    assert wire == committed
    assert stable == ends  # nothing left open


def _partitions(log_dir: Path) -> list[Any]:
    with Log.open(log_dir, read_only=True) as log:
        return list(log.partitions(OUTPUT))


def _stale_then_retry(log_dir: Path, bootstrap: str) -> str:
    kafka = ("--bootstrap", bootstrap)
    stale = attempt_process(log_dir, 0, "--pause-after", "5", *kafka)
    try:
        assert stale.stdout is not None and stale.stdout.readline().strip() == "paused"
        wait_until_stopped(stale.pid)
        retry = attempt_process(log_dir, 1, *kafka)
        out, err = retry.communicate(timeout=DRIVER_TIMEOUT_S)
        assert retry.returncode == 0, err
        message = pickle.loads(base64.b64decode(out.split()[-1]))
        assert message.batch_id == 0 and not message.skipped, message
        stale.send_signal(signal.SIGCONT)
        _, err = stale.communicate(timeout=DRIVER_TIMEOUT_S)
    finally:
        if stale.poll() is None:
            stale.kill()
            stale.communicate()
    assert stale.returncode == 1, err
    return err
