"""Test doubles for the txnlog sink's Spark tests (``test_sink.py``).

``CounterSource`` (``format("txnlog_test_counter")``) is a deterministic Python streaming source
whose offsets look like a topic source's (``{"src": {"0": n}}``), so the sink commits them as
group offsets. ``ProbeSource`` (``format("txnlog_probe")``) is the txnlog sink with test hooks
(options ``probe.*``): its commit records what readers see just before and after the real
commit; its tasks can fail their first attempt mid-write, or be overtaken by a speculative copy
of themselves. Spark's Python workers import this module by name, so it holds no test code.
"""

from __future__ import annotations

import base64
import json
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from pyspark_txnlog import TxnLogDataSource
from txn_log.log import Log
from txn_log.partitioner import partition_for_key
from txn_sink.writer import TxnLogBatchWriter, TxnLogStreamWriter

OUT = "out"
SRC = "src"


# --- a deterministic streaming source ------------------------------------------------------------


@dataclass
class CounterRange(InputPartition):
    start: int
    end: int


class CounterReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Rows ``id, key = "k<id>", value = "v<id>"``; as many as the file ``limitFile`` says."""

    def __init__(self, options: dict[str, str]) -> None:
        self._limit_file = Path(options["limitfile"])
        self._rows_per_batch = int(options.get("rowsperbatch", "40"))
        self._partitions = int(options.get("partitions", "2"))
        self._target: int | None = None

    def _available(self) -> int:
        return int(self._limit_file.read_text())

    def initialOffset(self) -> dict[str, Any]:
        return {SRC: {"0": 0}}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self._rows_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._available()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        end = self._target if self._target is not None else self._available()
        if not isinstance(limit, ReadAllAvailable):
            end = min(end, start[SRC]["0"] + limit.max_rows)  # type: ignore[attr-defined]
        return {SRC: {"0": max(end, start[SRC]["0"])}}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[CounterRange]:
        first, last = start[SRC]["0"], end[SRC]["0"]
        step = max(1, -(-(last - first) // self._partitions))
        return [CounterRange(s, min(s + step, last)) for s in range(first, last, step)]

    def read(self, partition: CounterRange) -> Iterator[Any]:  # type: ignore[override]
        ids = list(range(partition.start, partition.end))
        yield pa.record_batch(
            [pa.array(ids, pa.int64()), [f"k{i}" for i in ids], [f"v{i}" for i in ids]],
            names=["id", "key", "value"],
        )

    def commit(self, end: dict[str, Any]) -> None:
        pass


class CounterSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "txnlog_test_counter"

    def schema(self) -> str:
        return "id bigint, key string, value string"

    def streamReader(self, schema: Any) -> CounterReader:
        return CounterReader(self.options)


# --- the sink with test hooks --------------------------------------------------------------------


def visible(path: str, topic: str = OUT) -> dict[str, int]:
    """How many records read_committed and read_uncommitted readers see in ``topic``."""
    log = Log.open(path)
    try:
        return {
            isolation: sum(len(log.consumer(isolation).read(tp, 0)) for tp in log.partitions(topic))
            for isolation in ("read_committed", "read_uncommitted")
        }
    finally:
        log.close()


def _fail_after(iterator: Iterator[Any], batches: int) -> Iterator[Any]:
    for index, batch in enumerate(iterator):
        if index == batches:
            raise RuntimeError("injected failure of a first task attempt (test)")
        yield batch


class ProbeStreamWriter(TxnLogStreamWriter):
    def __init__(self, options: Any, schema: Any, overwrite: bool, probe: dict[str, str]) -> None:
        super().__init__(options, schema, overwrite)
        self._probe = probe
        self._path = options["path"]

    def write(self, iterator: Iterator[Any]) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        fail_after = self._probe.get("probe.failfirstattemptafter")
        if fail_after and context.attemptNumber() == 0 and context.partitionId() == 0:
            iterator = _fail_after(iterator, int(fail_after))
        message = super().write(iterator)
        if self._probe.get("probe.speculativecopy") and context.partitionId() == 0:
            from commit_protocol.embedded import EmbeddedBackend

            # a speculative copy of this task starts after this attempt finished: it fences it
            copy = EmbeddedBackend.open(self._path).begin_transaction(
                message.commit.transactional_id, 60_000, "none"
            )
            copy.flush()
        return message

    def commit(self, messages: list[Any], batchId: int) -> None:
        before = visible(self._path)
        super().commit(messages, batchId)
        record = {
            "batch": batchId,
            "before": before,
            "after": visible(self._path),
            "messages": base64.b64encode(pickle.dumps(messages)).decode(),
        }
        with open(Path(self._probe["probe.dir"]) / "commits.jsonl", "a") as out:
            out.write(json.dumps(record) + "\n")


class ProbeBatchWriter(TxnLogBatchWriter):
    def __init__(self, options: Any, schema: Any, overwrite: bool, probe: dict[str, str]) -> None:
        super().__init__(options, schema, overwrite)
        self._probe = probe
        self._path = options["path"]

    def commit(self, messages: list[Any]) -> None:
        before = visible(self._path)
        super().commit(messages)
        record = {"before": before, "after": visible(self._path)}
        (Path(self._probe["probe.dir"]) / "batch.json").write_text(json.dumps(record))


class ProbeSource(TxnLogDataSource):
    @classmethod
    def name(cls) -> str:
        return "txnlog_probe"

    def _split(self) -> tuple[dict[str, str], dict[str, str]]:
        probe = {k: v for k, v in self.options.items() if k.startswith("probe.")}
        rest = {k: v for k, v in self.options.items() if not k.startswith("probe.")}
        return rest, probe

    def streamWriter(self, schema: Any, overwrite: bool) -> ProbeStreamWriter:
        rest, probe = self._split()
        return ProbeStreamWriter(rest, schema, overwrite, probe)

    def writer(self, schema: Any, overwrite: bool) -> ProbeBatchWriter:
        rest, probe = self._split()
        return ProbeBatchWriter(rest, schema, overwrite, probe)


@dataclass
class Workspace:
    root: Path
    log: str
    checkpoint: str
    limit: Path
    probe: Path

    def set_available(self, rows: int) -> None:
        self.limit.write_text(str(rows))

    def commits(self) -> list[dict[str, Any]]:
        lines = (self.probe / "commits.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    def records(self, isolation: str = "read_committed") -> list[tuple[int, str, str]]:
        log = Log.open(self.log)
        try:
            consumer = log.consumer(isolation)
            return [
                (tp.partition, r.key.decode(), r.value.decode())
                for tp in log.partitions(OUT)
                for r in consumer.read(tp, 0)
            ]
        finally:
            log.close()


def start_stream(
    spark: Any,
    ws: Workspace,
    *columns: str,
    fmt: str = "txnlog_probe",
    rows_per_batch: int = 40,
    **options: str,
) -> Any:
    """Start the counter stream (``columns`` of it, default key and value) into ``fmt``; it
    stops once everything available is written (Trigger.AvailableNow)."""
    stream = (
        spark.readStream.format("txnlog_test_counter")
        .option("limitFile", str(ws.limit))
        .option("rowsPerBatch", str(rows_per_batch))
        .load()
        .selectExpr(*(columns or ("key", "value")))
        .writeStream.format(fmt)
        .option("checkpointLocation", ws.checkpoint)
        .option("topic", OUT)
        .trigger(availableNow=True)
    )
    if fmt == "txnlog_probe":
        stream = stream.option("probe.dir", str(ws.probe))
    for key, value in options.items():
        stream = stream.option(key.replace("_", "."), value)
    return stream.start(ws.log)


def run_stream(spark: Any, ws: Workspace, *columns: str, **options: Any) -> None:
    """``start_stream``, then wait for the end (raising the query's error, if any)."""
    query = start_stream(spark, ws, *columns, **options)
    try:
        query.awaitTermination()
    finally:
        stop(spark, query)


def stop(spark: Any, query: Any) -> None:
    """Stop ``query`` and wait until Spark forgets it, so that the next run on the same
    checkpoint starts clean."""
    query.stop()
    deadline = time.monotonic() + 30
    while any(q.id == query.id for q in spark.streams.active) and time.monotonic() < deadline:
        time.sleep(0.05)


def expected(count: int) -> list[tuple[int, str, str]]:
    return sorted((partition_for_key(f"k{i}".encode(), 3), f"k{i}", f"v{i}") for i in range(count))


def last_batch(ws: Workspace) -> int:
    return max(int(p.name) for p in (Path(ws.checkpoint) / "commits").iterdir() if p.name.isdigit())
