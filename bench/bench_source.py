"""Stream records through the ``txnlog`` source into Spark's ``noop`` sink, beside a do-nothing
Python streaming source that yields the same rows as ready-made Arrow batches.

Both run as Trigger.AvailableNow queries (one micro-batch of every record) on the same
``local[2]`` session, in interleaved rounds after a warm-up round; the best end-to-end run of
each (``start()`` to the query's end) is reported, with the ratio of time spent in triggers
alone beside it. Also prints the executor read path's rate without Spark. Target (issue 4):
txnlog ≥ 0.8 of the do-nothing source, end to end. Never asserts.

    .venv/bin/python bench/bench_source.py [--records 2000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow  # noqa: E402

from demo.spark_session import local_session  # noqa: E402
from txn_log.log import Log  # noqa: E402
from txn_log.record.codec import encode_batch  # noqa: E402
from txn_log.topic_partition import TopicPartition  # noqa: E402
from txn_source.schema import arrow_kafka_schema, kafka_schema  # noqa: E402

PARTITIONS = 4
KEY_BYTES, VALUE_BYTES = 16, 100
RECORDS_PER_LOG_BATCH = 20_000
ROWS_PER_ARROW_BATCH = 65_536
TARGET = 0.8


def write_log(path: Path, records: int) -> None:
    """``records`` records in ``PARTITIONS`` partitions, appended as large batches."""
    log = Log.open(path)
    log.create_topic(
        "bench",
        partitions=PARTITIONS,
        config={"segment.bytes": 512 << 20, "max.message.bytes": 64 << 20},
    )
    per_batch = RECORDS_PER_LOG_BATCH
    keys = pa.array([os.urandom(KEY_BYTES) for _ in range(per_batch)], pa.binary())
    values = pa.array([os.urandom(VALUE_BYTES) for _ in range(per_batch)], pa.binary())
    columns = pa.record_batch([keys, values], names=["key", "value"])
    for index in range(records // per_batch):
        tp = TopicPartition("bench", index % PARTITIONS)
        log.partition_log(tp).append(encode_batch(columns, now_ms=1_700_000_000_000 + index))
    for partition in range(PARTITIONS):
        log.partition_log(TopicPartition("bench", partition)).flush()
    log.close()


# --- the do-nothing baseline ----------------------------------------------------------------------


class CountPartition(InputPartition):
    def __init__(self, partition: int, rows: int) -> None:
        super().__init__(partition)
        self.partition = partition
        self.rows = rows


class NothingStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are a row count; ``read`` yields one prepared Arrow batch over and over."""

    def __init__(self, options: Any) -> None:
        self.records = int(options["records"])

    def initialOffset(self) -> dict[str, int]:
        return {"rows": 0}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        return {"rows": self.records}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        rows = (end["rows"] - start["rows"]) // PARTITIONS
        return [CountPartition(p, rows) for p in range(PARTITIONS)] if rows else []

    def read(self, partition: InputPartition) -> Any:
        if not isinstance(partition, CountPartition):
            raise TypeError(f"unexpected partition {partition!r}")
        template = _template_batch(partition.partition)
        remaining = partition.rows
        while remaining > 0:
            batch = template if remaining >= template.num_rows else template.slice(0, remaining)
            remaining -= batch.num_rows
            yield batch


def _template_batch(partition: int) -> pa.RecordBatch:
    n = ROWS_PER_ARROW_BATCH
    columns = [
        pa.array([os.urandom(KEY_BYTES) for _ in range(n)], pa.binary()),
        pa.array([os.urandom(VALUE_BYTES) for _ in range(n)], pa.binary()),
        pa.array(["bench"] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(range(n), pa.int64()),
        pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
        pa.array([0] * n, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_kafka_schema(False))


class NothingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_nothing"

    def schema(self) -> Any:
        return kafka_schema(False)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return NothingStreamReader(self.options)


# --- running -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One AvailableNow query into ``noop``: rows read, wall seconds from ``start()`` to its
    end, and seconds Spark spent in its triggers (the query's start-up left out)."""

    rows: int
    wall_s: float
    trigger_s: float


def run_to_noop(stream: Any, checkpoint: Path) -> Run:
    started = time.perf_counter()
    query = (
        stream.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall_s = time.perf_counter() - started
    progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    trigger_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress)
    return Run(rows, wall_s, trigger_ms / 1000)


def txnlog_stream(spark: Any, path: Path) -> Any:
    return (
        spark.readStream.format("txnlog")
        .option("subscribe", "bench")
        .option("startingOffsets", "earliest")
        .load(str(path))
    )


def nothing_stream(spark: Any, records: int) -> Any:
    return spark.readStream.format("bench_nothing").option("records", str(records)).load()


def read_path_rate(path: Path) -> float:
    """Records/s of the executor read path alone (plan, then ``read_partition`` of every task,
    in this process, one core): what the source costs without Spark around it."""
    from offsets.partition_offsets import PartitionOffsets
    from txn_source.log_view import LogView
    from txn_source.options import parse_source_options
    from txn_source.partition import read_partition
    from txn_source.planning import plan_input_partitions

    options = parse_source_options({"path": str(path), "subscribe": "bench"}, streaming=False)
    with LogView(str(path), options.isolation_level) as view:
        partitions = view.partitions(options.subscription)
        end = PartitionOffsets.of(view.latest_offsets(partitions))
        tasks = plan_input_partitions(view, options, PartitionOffsets.of({}), end)
    started = time.perf_counter()
    rows = sum(batch.num_rows for task in tasks for batch in read_partition(task))
    return rows / (time.perf_counter() - started)


def interleaved_runs(streams: dict[str, Any], work: Path, repeat: int) -> dict[str, list[Run]]:
    """``repeat`` rounds of one run per source, after a warm-up round (Python workers, JIT);
    interleaving exposes every source to the same noise of this shared machine."""
    runs: dict[str, list[Run]] = {label: [] for label in streams}
    for attempt in range(repeat + 1):
        for label, make_stream in streams.items():
            run = run_to_noop(make_stream(), work / f"ck-{label}-{attempt}")
            if attempt == 0:
                continue
            runs[label].append(run)
            print(f"  {label:8s} round {attempt}: {run.rows:,} rows, {run.wall_s:5.2f} s end to "
                  f"end, {run.trigger_s:5.2f} s in triggers")  # fmt: skip
    return runs


def report(runs: dict[str, list[Run]]) -> None:
    txnlog = max(r.rows / r.wall_s for r in runs["txnlog"])
    nothing = max(r.rows / r.wall_s for r in runs["nothing"])
    in_triggers = max(r.rows / r.trigger_s for r in runs["txnlog"]) / max(
        r.rows / r.trigger_s for r in runs["nothing"]
    )
    ratio = txnlog / nothing
    print(f"txnlog source -> noop:     {txnlog:12,.0f} records/s (best end-to-end run)")
    print(f"do-nothing source -> noop: {nothing:12,.0f} records/s (best end-to-end run)")
    print(f"ratio in triggers only (query start-up left out): {in_triggers:.2f}")
    verdict = "PASS" if ratio >= TARGET else "MISS"
    print(f"ratio txnlog / do-nothing: {ratio:.2f} (target >= {TARGET}) {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    spark = local_session("txnlog-bench-source")
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(NothingSource)
    with tempfile.TemporaryDirectory(prefix="bench-source-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        write_log(work / "log", args.records)
        print(f"wrote {args.records:,} records ({KEY_BYTES}-byte keys, {VALUE_BYTES}-byte values, "
              f"{PARTITIONS} partitions) in {time.perf_counter() - started:.1f} s")  # fmt: skip
        alone = read_path_rate(work / "log")
        print(f"executor read path alone (one core, no Spark): {alone:12,.0f} records/s")
        streams = {
            "txnlog": lambda: txnlog_stream(spark, work / "log"),
            "nothing": lambda: nothing_stream(spark, args.records),
        }
        runs = interleaved_runs(streams, work, args.repeat)
    report(runs)
    spark.stop()


if __name__ == "__main__":
    main()
