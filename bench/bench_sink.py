"""The Spark sink's cost (DESIGN §5): txnlog against a do-nothing Python Arrow stream writer.

1. Throughput: ``--rows`` rows (16-byte keys, 100-byte values) from a do-nothing Python
   streaming source (pre-built Arrow batches) in micro-batches of ``--batch-rows``, two input
   partitions, written
   * by ``format("txnlog")`` into a topic of 4 partitions (murmur2 of the key), exactly once;
   * by a do-nothing ``DataSourceStreamArrowWriter`` that only counts rows: the ceiling of
     Spark's Python data source path on this machine.
   The two alternate for ``--rounds`` rounds (after a warm-up run of each); the best time of
   each is reported (timings move ±40% run to run, TESTING.md, and more on a machine shared
   with other jobs; each rate counts from the query's start to its end). Target: txnlog ≥ 0.7 × the
   do-nothing writer's rate.
2. Memory: the peak RSS of one write task (one input partition) while writing 1,000,000 and
   4,000,000 rows in one micro-batch, measured inside the task (``/proc/self/clear_refs`` resets
   the high-water mark at the task's start; VmHWM minus the RSS at the start) and carried to
   the driver in the commit message. Target: the two peaks differ by at most 25%.

Prints PASS/MISS per target and never asserts. Creates its own local[2] session.

    .venv/bin/python bench/bench_sink.py [--rows N] [--batch-rows N] [--rounds R]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from demo.spark_session import local_session
from txn_log.log import Log
from txn_sink.writer import TxnLogCommitMessage, TxnLogStreamWriter

TOPIC = "bench"
PARTITIONS = 4
KEY_SIZE, VALUE_SIZE = 16, 100
CHUNK_ROWS = 10_000
RATIO_TARGET = 0.7
MEMORY_TARGET = 1.25


# --- a do-nothing source ---------------------------------------------------------------------


@dataclass
class RowRange(InputPartition):
    start: int
    end: int


_CHUNK: list[Any] = []


def chunk() -> Any:
    """One pre-built batch of ``CHUNK_ROWS`` rows (built once per Python worker)."""
    if not _CHUNK:
        keys = [os.urandom(KEY_SIZE) for _ in range(CHUNK_ROWS)]
        values = [os.urandom(VALUE_SIZE) for _ in range(64)]
        _CHUNK.append(
            pa.record_batch(
                [
                    pa.array(keys, pa.binary()),
                    pa.array([values[i % 64] for i in range(CHUNK_ROWS)]),
                ],
                names=["key", "value"],
            )
        )
    return _CHUNK[0]


class BlankReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self._total = int(options["rows"])
        self._per_batch = int(options["batchrows"])
        self._partitions = int(options["partitions"])

    def initialOffset(self) -> dict[str, int]:
        return {"rows": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self._per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        if isinstance(limit, ReadAllAvailable):
            return {"rows": self._total}
        return {"rows": min(self._total, start["rows"] + limit.max_rows)}  # type: ignore[attr-defined]

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[RowRange]:
        first, last = start["rows"], end["rows"]
        step = -(-(last - first) // self._partitions)
        return [RowRange(s, min(s + step, last)) for s in range(first, last, step)]

    def read(self, partition: RowRange) -> Iterator[Any]:  # type: ignore[override]
        rows, block = partition.end - partition.start, chunk()
        for offset in range(0, rows, CHUNK_ROWS):
            yield block.slice(0, min(CHUNK_ROWS, rows - offset))

    def commit(self, end: dict[str, int]) -> None:
        pass


class BlankSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_blank"

    def schema(self) -> str:
        return "key binary, value binary"

    def streamReader(self, schema: Any) -> BlankReader:
        return BlankReader(self.options)


# --- a do-nothing writer, and txnlog with a memory probe -------------------------------------


@dataclass(frozen=True)
class Count(WriterCommitMessage):
    rows: int


class NullWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[Any]) -> Count:
        return Count(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass


class NullSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_null"

    def streamWriter(self, schema: Any, overwrite: bool) -> NullWriter:
        return NullWriter()


def _status_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


@dataclass(frozen=True)
class MeasuredCommit(TxnLogCommitMessage):
    peak_rss_bytes: int = -1


class MeasuredWriter(TxnLogStreamWriter):
    """txnlog, measuring the task's peak RSS above its RSS at the start of ``write``."""

    def __init__(self, options: Any, schema: Any, overwrite: bool, report: str) -> None:
        super().__init__(options, schema, overwrite)
        self._report = report

    def write(self, iterator: Iterator[Any]) -> MeasuredCommit:
        with contextlib.suppress(OSError):  # reset VmHWM to the current RSS (Linux)
            Path("/proc/self/clear_refs").write_text("5")
        start = _status_kib("VmRSS")
        message = super().write(iterator)
        peak = (_status_kib("VmHWM") - start) * 1024
        return MeasuredCommit(message.commit, message.query_id, message.peak_buffered_bytes, peak)

    def commit(self, messages: list[Any], batchId: int) -> None:
        super().commit(messages, batchId)
        peaks = [(m.peak_rss_bytes, m.peak_buffered_bytes, m.commit.record_count) for m in messages]
        Path(self._report).write_text(json.dumps(peaks))


class MeasuredSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_txnlog_measured"

    def streamWriter(self, schema: Any, overwrite: bool) -> MeasuredWriter:
        options = {k: v for k, v in self.options.items() if k != "report"}
        return MeasuredWriter(options, schema, overwrite, self.options["report"])


# --- running ---------------------------------------------------------------------------------


def run(
    spark: Any, root: Path, name: str, fmt: str, rows: int, batch_rows: int, **opts: str
) -> float:
    """Seconds to stream ``rows`` rows into ``fmt`` (from query start to its end)."""
    log_dir = root / f"{name}-log"
    log = Log.open(log_dir)
    log.create_topic(TOPIC, partitions=PARTITIONS, config={"segment.bytes": str(1 << 30)})
    log.close()
    writer = (
        spark.readStream.format("bench_blank")
        .option("rows", str(rows))
        .option("batchRows", str(batch_rows))
        .option("partitions", opts.pop("partitions", "2"))
        .load()
        .writeStream.format(fmt)
        .option("checkpointLocation", str(root / f"{name}-ck"))
        .trigger(availableNow=True)
    )
    if fmt != "bench_null":
        writer = writer.option("topic", TOPIC).option("path", str(log_dir))
    for key, value in opts.items():
        writer = writer.option(key, value)
    began = time.perf_counter()
    query = writer.start()
    query.awaitTermination()
    elapsed = time.perf_counter() - began
    query.stop()
    return elapsed


def throughput(spark: Any, root: Path, rows: int, batch_rows: int, rounds: int) -> None:
    for fmt in ("txnlog", "bench_null"):  # JIT, Python workers, imports: not in the rounds
        run(spark, root, f"warm-{fmt}", fmt, 1_000_000, 250_000)
    times: dict[str, list[float]] = {"txnlog": [], "bench_null": []}
    for round_ in range(rounds):
        for fmt in times:
            times[fmt].append(run(spark, root, f"{fmt}-{round_}", fmt, rows, batch_rows))
    txnlog, null = rows / min(times["txnlog"]), rows / min(times["bench_null"])
    ratio = txnlog / null
    print(f"throughput: {rows:,} rows, micro-batches of {batch_rows:,}, 2 tasks, best of {rounds}")
    print(f"  txnlog (exactly once, {PARTITIONS} partitions): {txnlog:12,.0f} rows/s")
    print(f"  do-nothing Arrow stream writer:        {null:12,.0f} rows/s")
    verdict = "PASS" if ratio >= RATIO_TARGET else "MISS"
    print(f"  ratio txnlog / do-nothing: {ratio:.2f} (target >= {RATIO_TARGET}) {verdict}")
    written = sum(f.stat().st_size for f in (root / "txnlog-0-log").glob("*/*.log"))
    seconds = plain_write_seconds(root / "plain-write", written)
    print(
        f"  context: one txnlog run writes {written / 2**20:,.0f} MiB of segments; writing "
        f"that many bytes to a new file (1 MiB pwrites, one fdatasync) takes {seconds:.2f} s "
        f"here ({written / 2**20 / seconds:,.0f} MiB/s), which the do-nothing writer never pays"
    )


def plain_write_seconds(path: Path, size: int) -> float:
    """Seconds to write ``size`` bytes to a new file and fdatasync it: the floor under any
    durable sink on this machine (a VM pays for first-touch page-cache memory)."""
    chunk = os.urandom(1 << 20)
    began = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for position in range(0, size, len(chunk)):
            os.pwrite(fd, chunk[: size - position], position)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - began
    path.unlink()
    return elapsed


def memory(spark: Any, root: Path) -> None:
    print("memory: peak RSS of one write task, one micro-batch, default buffering limits")
    peaks = {}
    for rows in (1_000_000, 4_000_000):
        report = root / f"memory-{rows}.json"
        run(
            spark,
            root,
            f"memory-{rows}",
            "bench_txnlog_measured",
            rows,
            rows,
            partitions="1",
            report=str(report),
        )
        ((peak, buffered, written),) = json.loads(report.read_text())
        peaks[rows] = peak
        print(
            f"  {rows:>9,} rows: peak RSS +{peak / 2**20:6.1f} MiB above the task's start, "
            f"peak buffered {buffered / 2**20:5.1f} MiB, {written:,} records written"
        )
    low, high = sorted(peaks.values())
    spread = high / low if low > 0 else float("inf")
    verdict = "PASS" if spread <= MEMORY_TARGET else "MISS"
    print(f"  larger / smaller peak: {spread:.2f} (target <= {MEMORY_TARGET}) {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batch-rows", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    spark = local_session("txnlog-bench-sink")
    spark.sparkContext.setLogLevel("ERROR")
    for source in (BlankSource, NullSink, MeasuredSink):
        spark.dataSource.register(source)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-sink-") as tmp:
            throughput(spark, Path(tmp), args.rows, args.batch_rows, args.rounds)
            memory(spark, Path(tmp))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
