"""The txnlog sink under Spark: exactly once per micro-batch (DESIGN §5, TESTING scenario 10).

Streams come from ``sink_helpers.CounterSource`` (deterministic, replayable) or from the txnlog
source itself, and run with Trigger.AvailableNow; ``sink_helpers.ProbeSource`` is the sink with
test hooks (see there). One session-scoped ``local[2,3]`` session (conftest): a first task
attempt that fails is retried.
"""

from __future__ import annotations

import base64
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from commit_protocol.embedded import EmbeddedBackend
from integration.sink_helpers import (
    OUT,
    SRC,
    CounterSource,
    ProbeSource,
    Workspace,
    expected,
    last_batch,
    run_stream,
    stop,
    visible,
)
from txn_log.log import Log
from txn_log.partitioner import partition_for_key
from txn_log.topic_partition import TopicPartition
from txn_sink.writer import TxnLogStreamWriter

pytestmark = pytest.mark.spark

# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sources(spark: Any) -> Any:
    spark.dataSource.register(CounterSource)
    spark.dataSource.register(ProbeSource)  # format("txnlog") is found on its own
    return spark


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    log = Log.open(tmp_path / "log")
    log.create_topic(OUT, partitions=3)
    log.create_topic(SRC, partitions=1)
    log.close()
    probe = tmp_path / "probe"
    probe.mkdir()
    workspace = Workspace(
        tmp_path, str(tmp_path / "log"), str(tmp_path / "ck"), tmp_path / "limit", probe
    )
    workspace.set_available(0)
    return workspace


# --- the tests -----------------------------------------------------------------------------------


def test_a_stream_of_micro_batches_lands_exactly_once(sources: Any, ws: Workspace) -> None:
    """TESTING 10a: rounds of add data / run / stop on one checkpoint; keys land where Kafka's
    partitioner puts them; the group offsets equal the last batch's source offsets."""
    for available in (40, 120):
        ws.set_available(available)
        run_stream(sources, ws)
        assert sorted(ws.records()) == expected(available)
    batch = last_batch(ws)
    assert batch == 2
    assert [c["batch"] for c in ws.commits()] == list(range(batch + 1))
    offsets_file = (Path(ws.checkpoint) / "offsets" / str(batch)).read_text().splitlines()
    assert json.loads(offsets_file[2]) == {SRC: {"0": 120}}
    log = Log.open(ws.log)
    (entry,) = EmbeddedBackend(log).ledgers()
    query_id = json.loads((Path(ws.checkpoint) / "metadata").read_text())["id"]
    assert (entry.sink_id, entry.batch_id) == (f"spark-query-{query_id}", batch)
    committed = log.committed(f"txnlog-{query_id}", [TopicPartition(SRC, 0)])
    assert committed[TopicPartition(SRC, 0)].offset == 120
    assert log.coordinator.open_transactions("") == []


def test_txnlog_to_txnlog_commits_the_consumed_offsets_with_each_batch(
    sources: Any, ws: Workspace
) -> None:
    """Read ``src`` with the txnlog source, write ``out``: after the run, the sink's group
    offsets are the source offsets of the last committed batch, in every partition."""
    log = Log.open(ws.log)
    log.create_topic("in", partitions=2)
    producer = log.producer("feeder")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(90):
        producer.send("in", f"v{i}".encode(), key=f"k{i}".encode())
    producer.commit_transaction()
    query = (
        sources.readStream.format("txnlog")
        .option("subscribe", "in")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load(ws.log)
        .selectExpr("key", "value")
        .writeStream.format("txnlog")
        .option("checkpointLocation", ws.checkpoint)
        .option("topic", OUT)
        .trigger(availableNow=True)
        .start(ws.log)
    )
    try:
        query.awaitTermination()
    finally:
        stop(sources, query)
    assert sorted(ws.records()) == expected(90)
    batch = last_batch(ws)
    assert batch >= 2
    lines = (Path(ws.checkpoint) / "offsets" / str(batch)).read_text().splitlines()
    source_end = {TopicPartition("in", int(p)): o for p, o in json.loads(lines[2])["in"].items()}
    query_id = json.loads((Path(ws.checkpoint) / "metadata").read_text())["id"]
    group = log.committed(f"txnlog-{query_id}", list(source_end))
    assert {tp: om.offset for tp, om in group.items() if om} == source_end
    assert sum(source_end.values()) == 90 + 2  # every record, and the COMMIT markers


def test_a_batch_is_invisible_until_the_driver_commits_then_all_at_once(
    sources: Any, ws: Workspace
) -> None:
    ws.set_available(60)
    run_stream(sources, ws, rows_per_batch=60)
    (commit,) = ws.commits()
    messages = pickle.loads(base64.b64decode(commit["messages"]))
    assert len(messages) == 2  # two tasks ...
    assert {p.partition for m in messages for p in m.commit.partitions} == {0, 1, 2}  # 3 parts
    assert commit["before"] == {"read_committed": 0, "read_uncommitted": 60}
    assert commit["after"] == {"read_committed": 60, "read_uncommitted": 60}


def test_a_task_that_fails_and_retries_leaves_no_duplicate(sources: Any, ws: Workspace) -> None:
    """TESTING 10b: the first attempt of task 0 dies after writing; local[2,3] retries it."""
    ws.set_available(50)
    sources.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")
    try:
        run_stream(sources, ws, rows_per_batch=50, probe_failFirstAttemptAfter="2", batch_size="1")
    finally:
        sources.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert sorted(ws.records()) == expected(50)
    assert len(ws.records("read_uncommitted")) == 60  # the 10 rows of the dead attempt: aborted
    (commit,) = ws.commits()
    attempts = sorted(m.commit.attempt for m in pickle.loads(base64.b64decode(commit["messages"])))
    assert attempts == [0, 1]


def test_a_speculative_copy_fences_a_finished_attempt(sources: Any, ws: Workspace) -> None:
    """The driver holds the message of an attempt that a later copy fenced: the commit fails
    loudly, nothing of the batch is visible, and a restart writes it exactly once."""
    ws.set_available(30)
    with pytest.raises(Exception, match=r"(?s)fenced.*nothing committed"):
        run_stream(sources, ws, rows_per_batch=30, probe_speculativeCopy="true")
    assert ws.records() == []
    assert Log.open(ws.log).coordinator.open_transactions("") == []
    run_stream(sources, ws, rows_per_batch=30)
    assert sorted(ws.records()) == expected(30)


def test_a_second_commit_of_a_batch_changes_nothing(sources: Any, ws: Workspace) -> None:
    """The driver's commit called again, and TESTING 10c: delete the newest commits/<n> and
    restart; Spark runs and commits that batch again; the output must not change."""
    ws.set_available(80)
    run_stream(sources, ws)
    before = ws.records("read_uncommitted")
    batch = last_batch(ws)
    messages = pickle.loads(base64.b64decode(ws.commits()[-1]["messages"]))
    options = {"path": ws.log, "topic": OUT, "checkpointLocation": ws.checkpoint}
    schema = sources.createDataFrame([("k", "v")], "key string, value string").schema
    TxnLogStreamWriter(options, schema, False).commit(messages, batch)
    assert ws.records("read_uncommitted") == before
    for name in (str(batch), f".{batch}.crc"):  # the commit and Hadoop's checksum of it
        (Path(ws.checkpoint) / "commits" / name).unlink(missing_ok=True)
    run_stream(sources, ws)
    assert ws.commits()[-1]["batch"] == batch  # Spark did commit the batch again
    assert ws.records("read_uncommitted") == before
    assert sorted(ws.records()) == expected(80)


def test_a_restart_under_another_prefix_is_refused_before_any_task_writes(
    sources: Any, ws: Workspace
) -> None:
    """A task fences its zombies by its own transactional id only (C-24), so the checkpoint's
    query may not change ``transactional.id.prefix`` once a batch committed under the old
    one: the next batch fails on the driver, naming the option and both prefixes, before a
    task writes; back under the old prefix the query goes on, each row once."""
    ws.set_available(40)
    run_stream(sources, ws)
    ws.set_available(80)
    with pytest.raises(Exception, match=r"transactional\.id\.prefix 'renamed' is not the prefix"):
        run_stream(sources, ws, transactional_id_prefix="renamed")
    assert len(ws.records("read_uncommitted")) == 40
    assert Log.open(ws.log).coordinator.open_transactions("") == []
    run_stream(sources, ws)
    assert sorted(ws.records()) == expected(80)


def test_abort_leaves_nothing_visible(sources: Any, ws: Workspace) -> None:
    """Task 1 always fails (a row names partition 99): Spark aborts the batch."""
    ws.set_available(40)
    with pytest.raises(Exception, match="column 'partition' holds 99"):
        run_stream(
            sources,
            ws,
            "key",
            "value",
            "IF(id = 35, 99, CAST(NULL AS INT)) AS partition",
            fmt="txnlog",
            batch_size="1",
        )
    assert ws.records() == []
    assert len(ws.records("read_uncommitted")) >= 20  # task 0's rows, written then aborted
    assert Log.open(ws.log).coordinator.open_transactions("") == []


def test_a_batch_write_is_atomic(sources: Any, ws: Workspace) -> None:
    df = sources.range(0, 300, numPartitions=3).selectExpr(
        "CAST(id AS STRING) AS key",
        "CAST(CONCAT('v', id) AS BINARY) AS value",
        "IF(id % 10 = 0, 2, CAST(NULL AS INT)) AS partition",
        "array(named_struct('key', 'h', 'value', CAST(CAST(id AS STRING) AS BINARY))) AS headers",
        "timestamp_millis(1700000000000 + id) AS timestamp",
    )
    df.write.format("txnlog_probe").option("topic", OUT).option("probe.dir", str(ws.probe)).mode(
        "append"
    ).save(ws.log)
    probe = json.loads((ws.probe / "batch.json").read_text())
    assert probe == {
        "before": {"read_committed": 0, "read_uncommitted": 300},
        "after": {"read_committed": 300, "read_uncommitted": 300},
    }
    log = Log.open(ws.log)
    for tp in log.partitions(OUT):
        for record in log.consumer().read(tp, 0):
            i = int(record.key)
            want = 2 if i % 10 == 0 else partition_for_key(record.key, 3)
            assert (tp.partition, record.value, record.timestamp_ms) == (
                want,
                f"v{i}".encode(),
                1_700_000_000_000 + i,
            )
            assert record.headers == (("h", str(i).encode()),)
    failing = sources.range(0, 100, numPartitions=2).selectExpr(
        "CAST(id AS STRING) AS value", "IF(id = 99, 7, CAST(NULL AS INT)) AS partition"
    )
    with pytest.raises(Exception, match="column 'partition' holds 7"):
        failing.write.format("txnlog").option("topic", OUT).mode("append").save(ws.log)
    assert len(ws.records()) == 300
    assert log.coordinator.open_transactions("") == []


def test_a_topic_column_routes_rows(sources: Any, ws: Workspace) -> None:
    df = sources.range(0, 10, numPartitions=2).selectExpr(
        "IF(id % 2 = 0, 'out', 'src') AS topic", "CAST(id AS STRING) AS value"
    )
    df.write.format("txnlog").mode("append").save(ws.log)
    log = Log.open(ws.log)
    values = {
        topic: sorted(
            int(r.value) for tp in log.partitions(topic) for r in log.consumer().read(tp, 0)
        )
        for topic in (OUT, SRC)
    }
    assert values == {OUT: [0, 2, 4, 6, 8], SRC: [1, 3, 5, 7, 9]}


BAD_INPUTS = [
    ("CAST(id AS STRING) AS key", {}, r"required column 'value' \(binary or string\) not found"),
    ("id AS value", {}, "column 'value' has unsupported type bigint; 'value' must be binary or"),
    ("id AS key, 'v' AS value", {}, "'key' must be binary or string"),
    ("'v' AS value, 'x' AS partition", {}, "'partition' must be int"),
    ("'v' AS value, array('h') AS headers", {}, "array<struct<key:string,value:binary>>"),
    ("'v' AS value, 1 AS timestamp", {}, "'timestamp' must be timestamp"),
    ("'v' AS value, 1 AS topic", {"topic": None}, "'topic' must be string"),
    ("'v' AS value", {"topic": None}, "no topic to write to"),
    ("'v' AS value", {"topic": "missing"}, "txnlog topics create .* missing --partitions"),
    ("'v' AS value", {"compression.type": "brotli"}, "gzip, snappy, lz4, zstd"),
    ("'v' AS value", {"transaction.timeout.ms": "0"}, "from 1 to 900000"),
    ("'v' AS value", {"topik": "out"}, "unknown txnlog sink option"),
]


@pytest.mark.parametrize(("columns", "options", "message"), BAD_INPUTS)
def test_bad_input_fails_before_anything_is_written(
    sources: Any, ws: Workspace, columns: str, options: dict[str, str | None], message: str
) -> None:
    writer = sources.range(0, 5).selectExpr(*columns.split(", ")).write.format("txnlog")
    for key, value in {"topic": OUT, **options}.items():
        if value is not None:
            writer = writer.option(key, value)
    with pytest.raises(Exception, match=message):
        writer.mode("append").save(ws.log)
    assert visible(ws.log)["read_uncommitted"] == 0
    assert Log.open(ws.log).coordinator.transactions() == []


def test_a_bad_stream_fails_before_anything_is_written(sources: Any, ws: Workspace) -> None:
    ws.set_available(10)
    with pytest.raises(Exception, match="'value' must be binary or string"):
        run_stream(sources, ws, "id AS value", fmt="txnlog")
    assert not (Path(ws.checkpoint) / "commits").exists() or not any(
        (Path(ws.checkpoint) / "commits").iterdir()
    )
    assert visible(ws.log)["read_uncommitted"] == 0
