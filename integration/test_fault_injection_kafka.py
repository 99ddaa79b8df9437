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
import os
import pickle
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demo.pipeline import (
    OUTPUT,
    ROOT,
    kill_group,
    read_all,
    read_all_kafka,
    spawn,
    start_etl,
    verify,
)
from demo.served import ServeProcess, start_serve
from integration.kafka_replan import copy_query
from integration.test_fault_injection import (
    DRIVER_TIMEOUT_S,
    MAX_PER_TRIGGER,
    RESTART_TIMEOUT_S,
    SCALE,
    SEED,
    attempt_process,
    seeded,
    wait_until_stopped,
)
from tests.txn_source.kafka_served import send
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

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


# --- issue 29 item 1: a re-planned batch after the input changed ----------------------------------


def _replan_driver_killed(server: ServeProcess, checkpoint: Path, out: str, *args: str) -> None:
    """Run ``integration.kafka_replan`` in a driver of its own, SIGKILLed (with its JVM and
    workers) the moment the first task of its batch committed its own transaction."""
    env = {
        **os.environ,
        "TXNLOG_CRASH_POINT": "kafka_task.after_commit",
        "TXNLOG_CRASH_SCOPE": "group",
    }
    command = [sys.executable, "-m", "integration.kafka_replan", server.bootstrap]
    proc = subprocess.Popen(
        [*command, str(checkpoint), out, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=DRIVER_TIMEOUT_S)
    except Exception:
        kill_group(proc)
        raise
    assert proc.returncode == -signal.SIGKILL, f"the driver was not killed: {err[-3000:]}"


def _copy_to_the_end(spark: Any, server: ServeProcess, checkpoint: Path, *args: Any) -> None:
    query = copy_query(spark, server.bootstrap, str(checkpoint), *args)
    try:
        assert query.awaitTermination(RESTART_TIMEOUT_S), "the copy query did not finish"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def _output(log_dir: Path, topic: str) -> Counter[bytes]:
    with Log.open(log_dir) as log:
        consumer = log.consumer("read_committed")
        return Counter(r.value for tp in log.partitions(topic) for r in consumer.read(tp, 0))


def _values(topic: str, count: int, first: int = 0) -> list[bytes]:
    return [f"{topic}-{i}".encode() for i in range(first, first + count)]


def _exactly_once_of_what_is_left(
    out: Counter[bytes], kept: list[bytes], lost: list[bytes]
) -> None:
    """Every record still in the log exactly once; a deleted one at most once; nothing else."""
    duplicates = {v: n for v, n in out.items() if n > 1}
    missing = [v for v in kept if out[v] == 0]
    unexpected = set(out) - set(kept) - set(lost)
    assert (duplicates, missing, unexpected) == ({}, [], set()), (SEED, sorted(out))


def test_kafka_mode_rerun_after_a_topic_deleted_loses_no_record_still_in_the_log(
    spark: Any, tmp_path: Path
) -> None:
    """Issue 29 item 1 in Spark: batch 0 of ``[ta, tb, tc]`` (failOnDataLoss=false), its
    driver SIGKILLed once a first task committed; ta is deleted; the query restarts from its
    checkpoint and re-plans batch 0 from the same offsets. tb and tc, still in the log, must
    each be output exactly once (before the fix the tasks shifted down: the one now in the
    committed position was skipped and lost, or a committed one re-run and duplicated)."""
    count = 5 * SCALE
    log_dir, out = tmp_path / "log", "copied"
    topics = ["ta", "tb", "tc"]
    with Log.open(log_dir) as log:
        log.create_topic(out, partitions=1)
        for name in topics:
            log.create_topic(name, partitions=1)
            send(log, name, _values(name, count))
    checkpoint = tmp_path / "checkpoint"
    with open(tmp_path / "serve.err", "w") as errors:
        server = start_serve(log_dir, stderr=errors)
        try:
            _replan_driver_killed(server, checkpoint, out, ",".join(topics))
            with Log.open(log_dir) as log:
                log.delete_topic("ta")
            _copy_to_the_end(spark, server, checkpoint, out, ",".join(topics))
        finally:
            server.stop()
    kept = _values("tb", count) + _values("tc", count)
    _exactly_once_of_what_is_left(_output(log_dir, out), kept, _values("ta", count))


def test_kafka_mode_rerun_after_the_log_start_moved_loses_no_record_still_in_the_log(
    spark: Any, tmp_path: Path
) -> None:
    """Issue 29 item 1 in Spark: batch 1 of ta and tb, split by ``minPartitions=4`` into two
    tasks each, its driver SIGKILLed once a first task committed; retention then moves ta's
    log start into batch 1's range; the query restarts from its checkpoint. Every record of
    ta and tb still in the log is output exactly once, those retention deleted at most once
    (a task that committed them before keeps its position and is skipped, not re-run
    trimmed)."""
    per_batch = 6 * SCALE
    log_dir, out = tmp_path / "log", "copied"
    with Log.open(log_dir) as log:
        log.create_topic(out, partitions=1)
        log.create_topic("ta", partitions=1, config={"segment.bytes": 200})
        log.create_topic("tb", partitions=1)
    checkpoint = tmp_path / "checkpoint"

    def add(first: int) -> None:  # one transaction a value: a value at every even offset
        with Log.open(log_dir) as log:
            for i in range(first, first + per_batch):
                send(log, "ta", _values("ta", 1, i))
                send(log, "tb", _values("tb", 1, i))

    with open(tmp_path / "serve.err", "w") as errors:
        server = start_serve(log_dir, stderr=errors)
        try:
            add(0)
            _copy_to_the_end(spark, server, checkpoint, out, "ta,tb", 4)  # batch 0
            add(per_batch)
            _replan_driver_killed(server, checkpoint, out, "ta,tb", "4")  # batch 1, killed
            with Log.open(log_dir) as log:
                # retention only now: the server's housekeeping (every 30 s) would otherwise
                # apply it whenever it passes, before batch 1 even, under load; it may still
                # apply it first from here on, so the log start is what is checked
                log.alter_topic_config("ta", {"segment.bytes": 200, "retention.bytes": 1})
                ta = log.partition_log(TopicPartition("ta", 0))
                ta.delete_old_segments()
                log_start = ta.log_start_offset
            assert 2 * per_batch < log_start < 4 * per_batch, log_start
            _copy_to_the_end(spark, server, checkpoint, out, "ta,tb", 4)
        finally:
            server.stop()
    all_of_ta = _values("ta", 2 * per_batch)
    kept = [v for i, v in enumerate(all_of_ta) if i < per_batch or 2 * i >= log_start]
    lost = [v for v in all_of_ta if v not in kept]
    _exactly_once_of_what_is_left(_output(log_dir, out), kept + _values("tb", 2 * per_batch), lost)
