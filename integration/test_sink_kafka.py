"""The txnlog sink under Spark in Kafka mode (issue 16 items 3 and 6): ``writeStream`` with
``kafka.bootstrap.servers`` against a ``txnlog serve`` started by the test, read back with a
confluent-kafka read_committed consumer: every row exactly once, in Kafka's partition for its
key; a task SIGKILLed before its commit and retried by Spark leaves no duplicate; a driver
SIGKILLed (with its JVM and workers) after its own commit, then restarted from its checkpoint,
leaves no duplicate and no loss. The driver killed before its own commit, after every task
committed, is ``integration/test_fault_injection_kafka.py``'s ``sink.before_commit`` case (with
the group offsets, per-key order and nothing left open checked too)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from commit_protocol.kafka_backend import KafkaBackend
from datasource_options.location import KafkaCluster
from integration.kafka_sink_helpers import GROUP, read_committed, run_kafka_stream
from integration.sink_helpers import OUT, SRC, expected
from tests.txn_wire.serve_process import ServeProcess, start_serve
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic(OUT, partitions=3)
        log.create_topic(SRC, partitions=1)
    server = start_serve(path)
    try:
        yield server
    finally:
        server.stop()


def backend(served: ServeProcess) -> KafkaBackend:
    return KafkaBackend(KafkaCluster.at(served.bootstrap))


def test_a_stream_lands_exactly_once_in_kafka_mode(
    spark: Any, served: ServeProcess, tmp_path: Path
) -> None:
    """Two runs on one checkpoint; each task commits its own transaction with its ledger
    record; the driver records each batch and commits the consumed offsets to the group."""
    limit = tmp_path / "limit"
    checkpoint = str(tmp_path / "ck")
    for available in (40, 120):
        limit.write_text(str(available))
        run_kafka_stream(spark, served.bootstrap, checkpoint, limit)
        assert sorted(read_committed(served.bootstrap, OUT, 3)) == expected(available)
    cluster = backend(served)
    try:
        (entry,) = cluster.ledgers()
        assert entry.batch_id == 2
        assert entry.offsets == ((SRC, 0, 120),)
        tp = TopicPartition(SRC, 0)
        assert cluster.committed_offsets(GROUP, [tp]) == {tp: 120}
    finally:
        cluster.close()


def driver(
    served: ServeProcess, tmp_path: Path, env: dict[str, str], *, new_session: bool = False
) -> subprocess.CompletedProcess[str]:
    """One run of the stream in a driver process of its own (``kafka_sink_helpers``)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH")}
    args = [served.bootstrap, str(tmp_path / "ck"), str(tmp_path / "limit")]
    return subprocess.run(
        [sys.executable, "-m", "integration.kafka_sink_helpers", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=new_session,
    )


def test_a_driver_killed_after_its_commit_restarts_without_duplicate_or_loss(
    spark: Any, served: ServeProcess, tmp_path: Path
) -> None:
    """sink.after_commit: the batch is recorded in the ledger, Spark's commit log is not; the
    restart (in this test run's session: a fresh driver is not needed to resume from a
    checkpoint) re-runs the batch, whose tasks find their ledger records and skip, and whose
    commit is a no-op."""
    (tmp_path / "limit").write_text("80")
    env = {"TXNLOG_CRASH_POINT": "sink.after_commit", "TXNLOG_CRASH_SCOPE": "group"}
    killed = driver(served, tmp_path, env, new_session=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    first = sorted(read_committed(served.bootstrap, OUT, 3))
    assert first == expected(40)  # batch 0's tasks committed before the driver died
    run_kafka_stream(spark, served.bootstrap, str(tmp_path / "ck"), tmp_path / "limit")
    assert sorted(read_committed(served.bootstrap, OUT, 3)) == expected(80)
    cluster = backend(served)
    try:
        (entry,) = cluster.ledgers()
        assert entry.offsets == ((SRC, 0, 80),)
    finally:
        cluster.close()


def test_a_task_killed_before_its_commit_is_retried_without_duplicate(
    served: ServeProcess, tmp_path: Path
) -> None:
    """A driver process of its own whose Python worker SIGKILLs itself in a first task
    attempt, after writing its rows into its open transaction (crash point sink.task_write);
    Spark retries the task, whose init_transactions() aborts the dead attempt's transaction."""
    (tmp_path / "limit").write_text("80")
    run = driver(served, tmp_path, {"TXNLOG_CRASH_POINT": "sink.task_write"})  # the worker only
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Python worker exited unexpectedly" in run.stderr  # the attempt did die
    assert sorted(read_committed(served.bootstrap, OUT, 3)) == expected(80)
    with Log.open(served.path) as log:  # nothing left open to hold an LSO back
        assert log.coordinator.open_transactions("") == []


def test_a_batch_write_in_kafka_mode_lands_exactly_once(spark: Any, served: ServeProcess) -> None:
    """``df.write`` with ``kafka.bootstrap.servers``: its tasks commit themselves, the driver
    records the write's batch in the ledger."""
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    (
        spark.createDataFrame(rows, "key string, value string")
        .repartition(2)
        .write.format("txnlog")
        .option("kafka.bootstrap.servers", served.bootstrap)
        .option("topic", OUT)
        .mode("append")
        .save()
    )
    assert sorted(read_committed(served.bootstrap, OUT, 3)) == expected(50)
    cluster = backend(served)
    try:
        (entry,) = cluster.ledgers()
        assert entry.sink_id.startswith("spark-write-") and entry.batch_id == 0
        assert len(entry.transactions) == 2  # one per task
    finally:
        cluster.close()
