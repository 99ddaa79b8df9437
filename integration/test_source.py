"""The ``txnlog`` Spark source end to end (issue 4): read_committed planning, admission control,
Trigger.AvailableNow, checkpoints, timestamps, batch reads, headers, data loss, bad options.

One session-scoped ``local[2,3]`` session (conftest); each test writes its own log with the
engine's producers and reads it through Spark. Streams run with Trigger.AvailableNow or
``processAllAvailable``, never sleeps.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from integration.source_helpers import (
    TOPIC,
    Seen,
    aborted,
    committed,
    flatten,
    left_open,
    run_available_now,
    seen,
    source,
    values,
)
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

pytestmark = pytest.mark.spark


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log")
    log.create_topic(TOPIC, partitions=2)
    return log


def values_of(rows: list[Seen]) -> list[bytes]:
    return sorted(r.value for r in rows)


def assert_in_offset_order(batches: list[list[Seen]]) -> None:
    """No (partition, offset) twice, and each partition moves forward batch after batch."""
    rows = flatten(batches)
    assert len({(r.partition, r.offset) for r in rows}) == len(rows)
    last: dict[int, int] = defaultdict(lambda: -1)
    for batch in batches:
        for partition in {r.partition for r in batch}:
            offsets = [r.offset for r in batch if r.partition == partition]
            assert min(offsets) > last[partition]
            last[partition] = max(offsets)


def test_committed_data_once_across_micro_batches_and_a_restart(
    spark: Any, log: Log, tmp_path: Path
) -> None:
    expected: list[bytes] = []
    for i in range(6):
        batch = values(5, prefix=f"c{i}-")
        committed(log, batch)
        expected += batch
        if i % 2 == 0:
            aborted(log, values(3, prefix=f"x{i}-"))
    stream = source(spark, log.path, maxOffsetsPerTrigger="20")
    first = run_available_now(stream, tmp_path / "ck")
    assert len(first) >= 3  # maxOffsetsPerTrigger split the backlog
    assert values_of(flatten(first)) == sorted(expected)  # no aborted record, no duplicate
    assert_in_offset_order(first)

    later = values(4, prefix="late-")
    committed(log, later)
    aborted(log, values(2, prefix="x-late-"))
    second = run_available_now(stream, tmp_path / "ck")  # restart from the checkpoint
    assert values_of(flatten(second)) == sorted(later)  # no gap, no repeat
    assert_in_offset_order(first + second)


def test_open_transaction_holds_the_stream_until_it_commits(
    spark: Any, log: Log, tmp_path: Path
) -> None:
    committed(log, [b"before"], partition=0)
    pending = left_open(log, [b"open-1", b"open-2"], partition=0, txn_id="slow")
    committed(log, [b"after"], partition=0)  # behind the open transaction
    committed(log, [b"other"], partition=1)  # another partition is not held
    name = f"held_{uuid.uuid4().hex}"
    query = (
        source(spark, log.path)
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        held = seen(spark.table(name).collect())
        assert [r.value for r in held] == [b"before", b"other"]
        latest = query.lastProgress["sources"][0]["latestOffset"]  # the LSO: lag is visible
        assert (json.loads(latest) if isinstance(latest, str) else latest) == {
            "t": {"0": 2, "1": 2}
        }
        pending.commit_transaction()
        query.processAllAvailable()
        rows = seen(spark.table(name).collect())
    finally:
        query.stop()
    assert [r.value for r in rows if r.partition == 0] == [
        b"before",
        b"open-1",
        b"open-2",
        b"after",
    ]
    assert len(rows) == 5


def test_read_uncommitted_sees_open_and_aborted_records(
    spark: Any, log: Log, tmp_path: Path
) -> None:
    committed(log, [b"c"], partition=0)
    aborted(log, [b"x"], partition=0)
    pending = left_open(log, [b"o"], partition=1, txn_id="slow")
    stream = source(spark, log.path, **{"isolation.level": "read_uncommitted"})
    rows = flatten(run_available_now(stream, tmp_path / "ck"))
    assert values_of(rows) == [b"c", b"o", b"x"]
    pending.abort_transaction()


def test_available_now_stops_at_the_target_fixed_when_the_run_starts(
    spark: Any, log: Log, tmp_path: Path
) -> None:
    committed(log, values(24, prefix="a"), partition=0)

    def add_data_during_the_run(batch_id: int) -> None:
        if batch_id == 0:
            committed(log, values(5, prefix="late"), partition=1)

    stream = source(spark, log.path, maxOffsetsPerTrigger="10")
    first = run_available_now(stream, tmp_path / "ck", on_batch=add_data_during_the_run)
    assert len(first) >= 3
    assert values_of(flatten(first)) == sorted(values(24, prefix="a"))
    second = run_available_now(stream, tmp_path / "ck")
    assert values_of(flatten(second)) == sorted(values(5, prefix="late"))


def test_partitions_and_topics_added_while_running_are_read_from_their_start(
    spark: Any, log: Log, tmp_path: Path
) -> None:
    committed(log, [b"first"], partition=0)
    name = f"grow_{uuid.uuid4().hex}"
    stream = spark.readStream.format("txnlog").option("subscribePattern", "t.*")
    stream = stream.option("startingOffsets", "latest").load(str(log.path))
    query = (
        stream.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()  # starts at latest: "first" is not read
        log.create_partitions(TOPIC, 3)
        committed(log, [b"new-partition"], partition=2)
        log.create_topic("t2", partitions=1)
        producer = log.producer()
        producer.send("t2", b"new-topic")
        producer.flush()
        query.processAllAvailable()
        rows = seen(spark.table(name).collect())
    finally:
        query.stop()
    assert [(r.topic, r.partition, r.offset, r.value) for r in rows] == [
        ("t", 2, 0, b"new-partition"),
        ("t2", 0, 0, b"new-topic"),
    ]


def test_start_by_timestamp(spark: Any, log: Log, tmp_path: Path) -> None:
    producer = log.producer("ts")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(10):
        producer.send(TOPIC, b"%d" % i, partition=i % 2, timestamp_ms=1_700_000_000_000 + i)
    producer.commit_transaction()
    stream = source(spark, log.path, startingTimestamp=str(1_700_000_000_000 + 6))
    rows = flatten(run_available_now(stream, tmp_path / "ck"))
    assert values_of(rows) == [b"6", b"7", b"8", b"9"]
    by_partition = source(
        spark, log.path, startingOffsetsByTimestamp='{"t": {"0": 1700000000004, "1": 0}}'
    )
    rows = flatten(run_available_now(by_partition, tmp_path / "ck2"))
    assert values_of(rows) == sorted([b"4", b"6", b"8", b"1", b"3", b"5", b"7", b"9"])


def test_batch_read_between_starting_and_ending_offsets(spark: Any, log: Log) -> None:
    committed(log, values(6, prefix="p0-"), partition=0)  # offsets 0..5, marker 6
    committed(log, values(3, prefix="p1-"), partition=1)  # offsets 0..2, marker 3
    df = (
        spark.read.format("txnlog")
        .option("subscribe", TOPIC)
        .option("startingOffsets", '{"t": {"0": 2, "1": -2}}')
        .option("endingOffsets", '{"t": {"0": 5, "1": -1}}')
        .option("minPartitions", "4")
        .load(str(log.path))
    )
    assert df.rdd.getNumPartitions() == 4
    rows = seen(df.collect())
    assert [(r.partition, r.offset, r.value) for r in rows] == [
        (0, 2, b"p0-2"),
        (0, 3, b"p0-3"),
        (0, 4, b"p0-4"),
        (1, 0, b"p1-0"),
        (1, 1, b"p1-1"),
        (1, 2, b"p1-2"),
    ]


def test_headers_keys_and_timestamps_as_sparks_kafka_source(spark: Any, log: Log) -> None:
    producer = log.producer("h")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(TOPIC, b"one", key=b"k", partition=0, headers=[("a", b"1"), ("b", None)],
                  timestamp_ms=1_700_000_000_123)  # fmt: skip
    producer.send(TOPIC, None, partition=0, timestamp_ms=1_700_000_000_124)
    producer.commit_transaction()
    df = (
        spark.read.format("txnlog")
        .option("subscribe", TOPIC)
        .option("includeHeaders", "true")
        .load(str(log.path))
    )
    first, second = sorted(df.collect(), key=lambda r: r.offset)
    assert (first.key, first.value, first.timestampType) == (b"k", b"one", 0)
    assert [(h.key, h.value) for h in first.headers] == [("a", b"1"), ("b", None)]
    assert first.timestamp.timestamp() == pytest.approx(1_700_000_000.123)
    assert (second.key, second.value, list(second.headers)) == (None, None, [])


def test_deleted_range_fails_the_query_unless_fail_on_data_loss_is_false(
    spark: Any, tmp_path: Path
) -> None:
    log = Log.open(tmp_path / "log")
    log.create_topic(TOPIC, partitions=1, config={"segment.bytes": 300, "retention.bytes": 1})
    committed(log, [b"read-1"])
    assert values_of(flatten(run_available_now(source(spark, log.path), tmp_path / "ck"))) == [
        b"read-1"
    ]
    for i in range(8):
        committed(log, [b"unread-%d" % i])
    deleted = log.partition_log(TopicPartition(TOPIC, 0)).delete_old_segments()
    assert deleted
    with pytest.raises(Exception, match="were deleted before they were read") as failure:
        run_available_now(source(spark, log.path), tmp_path / "ck")
    assert "failOnDataLoss" in str(failure.value)
    lenient = source(spark, log.path, failOnDataLoss="false")
    survivors = values_of(flatten(run_available_now(lenient, tmp_path / "ck")))
    assert survivors and set(survivors) < {b"unread-%d" % i for i in range(8)}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "one of the options subscribe, subscribePattern, assign must be given"),
        ({"subscribe": "t", "assign": '{"t": [0]}'}, "only one of the options subscribe"),
        ({"subscribe": "t", "isolation.level": "dirty"},
         "option 'isolation.level'; valid values are read_committed, read_uncommitted"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": 1'},
         r"option 'startingOffsets': malformed JSON.*expected e.g."),
        ({"subscribe": "t", "path": "MISSING"}, "option 'path'.*does not exist"),
        ({"subscribe": "t", "path": "NOT_A_LOG"}, "option 'path'.*is not a txnlog directory"),
    ],
)  # fmt: skip
def test_bad_options_fail_at_load_before_any_job(
    spark: Any, log: Log, tmp_path: Path, options: dict[str, str], message: str
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "data.csv").write_text("a,b\n")
    paths = {"MISSING": str(tmp_path / "missing"), "NOT_A_LOG": str(tmp_path / "plain")}
    path = paths.get(options.pop("path", ""), str(log.path))
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    reader = spark.readStream.format("txnlog")
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=message):
        reader.load(path)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before
    assert not (tmp_path / "missing").exists()


def test_each_read_task_reports_its_metrics_to_sparks_python_worker_logs(
    spark: Any, log: Log
) -> None:
    """Issue 4 item 5: Python sources have no custom-metrics hook (no ReportsSourceMetrics), so
    every read task logs records read and aborted / control records skipped on the logger
    ``txnlog.source.metrics``, which Spark collects with spark.sql.pyspark.worker.logging."""
    committed(log, values(5, prefix="c"), partition=0)  # offsets 0-4, marker 5
    aborted(log, values(3, prefix="x"), partition=0)  # offsets 6-8, marker 9
    committed(log, values(2, prefix="d"), partition=1)  # offsets 0-1, marker 2
    spark.conf.set("spark.sql.pyspark.worker.logging.enabled", "true")
    try:
        reader = spark.read.format("txnlog").option("subscribe", TOPIC)
        assert reader.load(str(log.path)).count() == 7
        logs = spark.tvf.python_worker_logs().where("logger = 'txnlog.source.metrics'")
        rows = [r.context for r in logs.collect() if r.context.get("path") == str(log.path)]
    finally:
        spark.conf.unset("spark.sql.pyspark.worker.logging.enabled")
    reported = sorted(
        (int(c["partition"]), int(c["startOffset"]), int(c["endOffset"]), int(c["recordsRead"]),
         int(c["abortedRecordsSkipped"]), int(c["controlRecordsSkipped"]))
        for c in rows
    )  # fmt: skip
    assert reported == [(0, 0, 10, 5, 3, 2), (1, 0, 3, 2, 0, 1)]
