"""The ``txnlog`` Spark source in Kafka mode (issue 16 items 1-2): ``kafka.bootstrap.servers``
instead of a path, against a ``txnlog serve`` process each test starts over its own log.

Records are written by the engine's producers straight into the served directory (and, in the
cross-check, by a confluent-kafka transactional producer over the wire); Spark reads them
through the cluster only. What must be shown (issue 16): read_committed planning holds back at
an open transaction and skips aborted ones, maxOffsetsPerTrigger and Trigger.AvailableNow,
batch reads with startingOffsets/endingOffsets, startingTimestamp, and the same rows as the
embedded source on the same log. Streams run with Trigger.AvailableNow or
``processAllAvailable``, never sleeps.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.source_helpers import (
    TOPIC,
    aborted,
    committed,
    flatten,
    left_open,
    run_available_now,
    seen,
    values,
)
from tests.txn_wire.serve_process import ServeProcess, start_serve
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

pytestmark = pytest.mark.spark


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    with Log.open(tmp_path / "log") as log:
        log.create_topic(TOPIC, partitions=2)
        yield log


@pytest.fixture
def served(log: Log) -> Iterator[ServeProcess]:
    server = start_serve(log.path)
    try:
        yield server
    finally:
        server.stop()


def kafka_source(spark: Any, served: ServeProcess, **options: str) -> Any:
    """``spark.readStream`` of topic ``t`` from the cluster, from the earliest offsets."""
    reader = spark.readStream.format("txnlog")
    given = {
        "kafka.bootstrap.servers": served.bootstrap,
        "subscribe": TOPIC,
        "startingOffsets": "earliest",
        **options,
    }
    for key, value in given.items():
        reader = reader.option(key, value)
    return reader.load()


def values_of(rows: list[Any]) -> list[bytes]:
    return sorted(r.value for r in rows)


def test_kafka_mode_reads_committed_data_once_across_micro_batches_and_a_restart(
    spark: Any, log: Log, served: ServeProcess, tmp_path: Path
) -> None:
    """maxOffsetsPerTrigger splits the backlog; aborted records are never delivered; a restart
    from the checkpoint neither repeats nor skips."""
    expected: list[bytes] = []
    for i in range(6):
        batch = values(5, prefix=f"c{i}-")
        committed(log, batch)
        expected += batch
        if i % 2 == 0:
            aborted(log, values(3, prefix=f"x{i}-"))
    stream = kafka_source(spark, served, maxOffsetsPerTrigger="20")
    first = run_available_now(stream, tmp_path / "ck")
    assert len(first) >= 3
    assert values_of(flatten(first)) == sorted(expected)
    later = values(4, prefix="late-")
    committed(log, later)
    aborted(log, values(2, prefix="x-late-"))
    second = run_available_now(stream, tmp_path / "ck")
    assert values_of(flatten(second)) == sorted(later)


def test_kafka_mode_open_transaction_holds_the_stream_until_it_commits(
    spark: Any, log: Log, served: ServeProcess, tmp_path: Path
) -> None:
    committed(log, [b"before"], partition=0)  # 0, marker 1
    pending = left_open(log, [b"open-1", b"open-2"], partition=0, txn_id="slow")  # 2, 3
    committed(log, [b"after"], partition=0)  # behind the open transaction
    aborted(log, [b"x"], partition=1)  # 0, marker 1
    committed(log, [b"other"], partition=1)  # 2, marker 3: another partition is not held
    name = f"held_{uuid.uuid4().hex}"
    query = (
        kafka_source(spark, served)
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
            "t": {"0": 2, "1": 4}
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
    assert [r.value for r in rows if r.partition == 1] == [b"other"]


def test_kafka_mode_available_now_stops_at_the_target_fixed_when_the_run_starts(
    spark: Any, log: Log, served: ServeProcess, tmp_path: Path
) -> None:
    committed(log, values(24, prefix="a"), partition=0)

    def add_data_during_the_run(batch_id: int) -> None:
        if batch_id == 0:
            committed(log, values(5, prefix="late"), partition=1)

    stream = kafka_source(spark, served, maxOffsetsPerTrigger="10")
    first = run_available_now(stream, tmp_path / "ck", on_batch=add_data_during_the_run)
    assert len(first) >= 3
    assert values_of(flatten(first)) == sorted(values(24, prefix="a"))
    second = run_available_now(stream, tmp_path / "ck")
    assert values_of(flatten(second)) == sorted(values(5, prefix="late"))


def test_kafka_mode_batch_read_between_starting_and_ending_offsets(
    spark: Any, log: Log, served: ServeProcess
) -> None:
    committed(log, values(6, prefix="p0-"), partition=0)  # offsets 0..5, marker 6
    committed(log, values(3, prefix="p1-"), partition=1)  # offsets 0..2, marker 3
    df = (
        spark.read.format("txnlog")
        .option("kafka.bootstrap.servers", served.bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", '{"t": {"0": 2, "1": -2}}')
        .option("endingOffsets", '{"t": {"0": 5, "1": -1}}')
        .option("minPartitions", "4")
        .load()
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


def test_kafka_mode_start_by_timestamp(
    spark: Any, log: Log, served: ServeProcess, tmp_path: Path
) -> None:
    producer = log.producer("ts")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(10):
        producer.send(TOPIC, b"%d" % i, partition=i % 2, timestamp_ms=1_700_000_000_000 + i)
    producer.commit_transaction()
    stream = kafka_source(spark, served, startingTimestamp=str(1_700_000_000_000 + 6))
    rows = flatten(run_available_now(stream, tmp_path / "ck"))
    assert values_of(rows) == [b"6", b"7", b"8", b"9"]


def _wire_transactions(served: ServeProcess) -> None:
    """A committed and an aborted transaction from a confluent-kafka producer, with keys,
    headers and timestamps, over the wire."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": served.bootstrap, "transactional.id": f"wire-{uuid.uuid4()}"}
    )
    producer.init_transactions(30)
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(
                TOPIC,
                value=f"wire-{outcome}-{i}".encode(),
                key=b"wk%d" % i,
                partition=i % 2,
                headers=[("h", b"%d" % i)],
                timestamp=1_700_000_001_000 + i,
            )
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def test_kafka_mode_reads_the_same_rows_as_the_embedded_source_on_the_same_log(
    spark: Any, log: Log, served: ServeProcess
) -> None:
    """One log read both ways, every column (headers included) compared, at both isolation
    levels; written by the engine and over the wire, with an open transaction held back."""
    committed(log, values(4, prefix="e"), partition=0)
    aborted(log, values(2, prefix="x"), partition=1)
    _wire_transactions(served)
    pending = left_open(log, [b"open"], partition=1, txn_id="slow")
    committed(log, [b"behind"], partition=1)
    try:
        for level in ("read_committed", "read_uncommitted"):
            common = {"subscribe": TOPIC, "includeHeaders": "true", "isolation.level": level}
            embedded = spark.read.format("txnlog").options(**common).load(str(log.path))
            kafka = (
                spark.read.format("txnlog")
                .options(**common)
                .option("kafka.bootstrap.servers", served.bootstrap)
                .load()
            )
            expected = sorted(embedded.collect(), key=lambda r: (r.partition, r.offset))
            got = sorted(kafka.collect(), key=lambda r: (r.partition, r.offset))
            assert got == expected
            assert kafka.schema == embedded.schema
            delivered = {bytes(r.value) for r in got}
            assert b"wire-commit-1" in delivered and b"e3" in delivered
            hidden = {b"wire-abort-0", b"x0", b"open", b"behind"}
            if level == "read_committed":
                assert not delivered & hidden
            else:
                assert hidden <= delivered
    finally:
        pending.abort_transaction()


def test_kafka_mode_deleted_range_fails_the_query_unless_fail_on_data_loss_is_false(
    spark: Any, tmp_path: Path
) -> None:
    """failOnDataLoss against the log start, as in embedded mode: retention deletes offsets
    the checkpoint has not read yet while the query is stopped."""
    with Log.open(tmp_path / "shrinking") as log:
        log.create_topic(TOPIC, partitions=1, config={"segment.bytes": 300, "retention.bytes": 1})
        committed(log, [b"read-1"])
        served = start_serve(log.path)
        try:
            first = run_available_now(kafka_source(spark, served), tmp_path / "ck")
            assert values_of(flatten(first)) == [b"read-1"]
            for i in range(8):
                committed(log, [b"unread-%d" % i])
            assert log.partition_log(TopicPartition(TOPIC, 0)).delete_old_segments()
            with pytest.raises(Exception, match="were deleted before they were read") as failure:
                run_available_now(kafka_source(spark, served), tmp_path / "ck")
            assert "failOnDataLoss" in str(failure.value)
            lenient = kafka_source(spark, served, failOnDataLoss="false")
            survivors = values_of(flatten(run_available_now(lenient, tmp_path / "ck")))
        finally:
            served.stop()
    assert survivors and set(survivors) < {b"unread-%d" % i for i in range(8)}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.group.id": "g"}, "option 'kafka.group.id' is not supported"),
        ({"kafka.auto.offset.reset": "earliest"}, "set the source option 'startingOffsets'"),
        ({"path": "/tmp/x"}, "are both set; give exactly one"),
        ({"kafka.bootstrap.servers": "no-port"}, "host:port"),
    ],
)
def test_kafka_mode_bad_options_fail_at_load_naming_the_option(
    spark: Any, served: ServeProcess, options: dict[str, str], message: str
) -> None:
    reader = (
        spark.read.format("txnlog")
        .option("kafka.bootstrap.servers", served.bootstrap)
        .option("subscribe", TOPIC)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=message):
        reader.load()
