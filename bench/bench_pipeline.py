"""The Spark pipeline ``txnlog → txnlog`` against the ceiling of Python Data Sources, by stage.

Four streaming queries over the same ``--rows`` rows (16-byte keys, 100-byte values), in
micro-batches of ``--batch-rows``, ``local[2]``, ``trigger(availableNow=True)``:

* **ceiling**: a do-nothing Python source (pre-built Arrow batches) into a do-nothing Arrow
  stream writer (``bench_sink``'s): what Spark's Python Data Source path costs on this machine;
* **kafka-ceiling**: the same do-nothing source with Spark's Kafka source schema (the seven
  columns of ``txn_source.schema``, shaped as the txnlog source's: one topic name, the
  partition, increasing offsets, one timestamp, timestampType 0) selected down to
  ``key, value``, as ``read`` and ``pipeline`` are, into the do-nothing writer: what the
  schema alone costs in Spark (a Python source cannot prune columns: Spark moves all seven
  through Arrow into the JVM and back to rows);
* **read**: ``format("txnlog")`` (read_committed, 2 partitions) into the do-nothing writer;
* **write**: the do-nothing source into ``format("txnlog")`` (4 partitions, exactly once);
* **pipeline**: ``txnlog → txnlog``, the main job's shape.

Each rate counts from the query's start to its end; the variants alternate for ``--rounds``
rounds after a warm-up of each, and the best time of each is reported (timings move ±40% run
to run on this machine, TESTING.md). Per variant, Spark's own progress reports split the time
into its stages (``durationMs``: latestOffset, queryPlanning, getBatch, addBatch — the tasks
and the sink's commit —, walCommit, commitOffsets), summed over the micro-batches of the best
run, so the gap between the pipeline and the ceiling is attributed to the stage that holds it.

Target (issue 27): pipeline ≥ 0.9 × ceiling. Prints PASS/MISS and never asserts; the ratio
to the Kafka-schema ceiling is printed beside it. ``pipeline_costs.py`` attributes the gap
(CPU time of Spark's processes, txnlog's calls timed inside them).

    .venv/bin/python bench/bench_pipeline.py [--rows N] [--batch-rows N] [--rounds R] [--varied]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from bench_sink import CHUNK_ROWS, BlankReader, BlankSource, NullSink, RowRange, chunk
from pyspark.sql.datasource import DataSource

from demo.spark_session import local_session
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_source.schema import arrow_kafka_schema, kafka_schema

RATIO_TARGET = 0.9
INPUT, OUTPUT = "pipeline_in", "pipeline_out"
INPUT_PARTITIONS, OUTPUT_PARTITIONS = 2, 4
STAGES = ("latestOffset", "queryPlanning", "getBatch", "addBatch", "walCommit", "commitOffsets")
VARIANTS = ("ceiling", "kafka-ceiling", "read", "write", "pipeline")
KAFKA_TIMESTAMP_US = 1_700_000_000_000_000


_KAFKA_CHUNKS: dict[int, Any] = {}


def kafka_chunk(rows: int = CHUNK_ROWS) -> Any:
    """``rows`` rows of ``chunk()``'s keys and values (repeated) with the other five columns
    of Spark's Kafka source, shaped as the txnlog source yields them (built once per worker)."""
    if rows not in _KAFKA_CHUNKS:
        block = pa.concat_batches([chunk()] * -(-rows // CHUNK_ROWS)).slice(0, rows)
        columns = [
            block.column("key"),
            block.column("value"),
            pa.array([INPUT] * rows, pa.string()),
            pa.array([0] * rows, pa.int32()),
            pa.array(range(rows), pa.int64()),
            pa.array([KAFKA_TIMESTAMP_US] * rows, pa.timestamp("us", tz="UTC")),
            pa.array([0] * rows, pa.int32()),
        ]
        _KAFKA_CHUNKS[rows] = pa.RecordBatch.from_arrays(columns, schema=arrow_kafka_schema())
    return _KAFKA_CHUNKS[rows]


class KafkaBlankReader(BlankReader):
    """``bench_sink.BlankReader`` with the Kafka columns, in batches of ``chunkRows`` rows
    (default ``CHUNK_ROWS``, the do-nothing source's)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._chunk_rows = int(options.get("chunkrows", CHUNK_ROWS))

    def read(self, partition: RowRange) -> Any:  # type: ignore[override]
        rows, step = partition.end - partition.start, self._chunk_rows
        block = kafka_chunk(step)
        for offset in range(0, rows, step):
            yield block.slice(0, min(step, rows - offset))


class KafkaBlankSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_blank_kafka"

    def schema(self) -> Any:
        return kafka_schema(False)

    def streamReader(self, schema: Any) -> KafkaBlankReader:
        return KafkaBlankReader(self.options)


def build_input(path: Path, rows: int, varied: bool = False) -> None:
    """``rows`` committed rows in ``INPUT``, split over its partitions, as the blank source
    makes them; ``varied``: values of 50 to 150 bytes instead (records of one size are found
    faster, ``columnar_decode._run_starts``)."""
    with Log.open(path) as log:
        log.create_topic(INPUT, INPUT_PARTITIONS, config={"segment.bytes": str(1 << 30)})
        block = chunk()
        if varied:
            sizes = [50 + (i * 37) % 101 for i in range(block.num_rows)]
            values = pa.array([b"v" * size for size in sizes], pa.binary())
            block = pa.record_batch([block.column("key"), values], names=["key", "value"])
        producer = log.producer("bench-input")
        producer.init_transactions()
        producer.begin_transaction()
        for start in range(0, rows, block.num_rows):
            piece = block.slice(0, min(block.num_rows, rows - start))
            producer.send_batch(
                TopicPartition(INPUT, (start // block.num_rows) % INPUT_PARTITIONS), piece
            )
        producer.commit_transaction()


def run(spark: Any, root: Path, variant: str, name: str, rows: int, batch_rows: int) -> Any:
    """One query of ``variant``: (seconds from start to end, its progress reports)."""
    log_dir = root / "log"
    if variant in ("write", "pipeline"):
        with Log.open(log_dir) as log:
            topic = f"{OUTPUT}_{name}"
            log.create_topic(topic, OUTPUT_PARTITIONS, config={"segment.bytes": str(1 << 30)})
    if variant in ("ceiling", "kafka-ceiling", "write"):
        frame = (
            spark.readStream.format(
                "bench_blank_kafka" if variant == "kafka-ceiling" else "bench_blank"
            )
            .option("rows", str(rows))
            .option("batchRows", str(batch_rows))
            .option("partitions", str(INPUT_PARTITIONS))
            .load()
        )
        if variant == "kafka-ceiling":
            frame = frame.select("key", "value")
    else:
        frame = (
            spark.readStream.format("txnlog")
            .option("subscribe", INPUT)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(batch_rows))
            .load(str(log_dir))
            .select("key", "value")
        )
    writer = frame.writeStream.option("checkpointLocation", str(root / f"ck-{name}"))
    if variant in ("ceiling", "kafka-ceiling", "read"):
        writer = writer.format("bench_null")
    else:
        writer = writer.format("txnlog").option("topic", f"{OUTPUT}_{name}")
        writer = writer.option("path", str(log_dir))
    began = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - began
    progress = query.recentProgress
    query.stop()
    return elapsed, progress


def stages(progress: list[Any]) -> dict[str, float]:
    """Seconds per stage over every micro-batch that read rows."""
    totals = dict.fromkeys(STAGES, 0.0)
    for report in progress:
        for stage in STAGES:
            totals[stage] += report.durationMs.get(stage, 0) / 1000
    return totals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=250_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--varied", action="store_true", help="input values of 50-150 bytes, not all 100"
    )
    args = parser.parse_args()
    spark = local_session("bench-pipeline")
    for source in (BlankSource, KafkaBlankSource, NullSink):
        spark.dataSource.register(source)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        build_input(root / "log", args.rows, args.varied)
        for variant in VARIANTS:  # JIT, Python workers, imports: not in the rounds
            run(spark, root, variant, f"warm-{variant}", args.rows, args.batch_rows)
        best: dict[str, tuple[float, Any]] = {}
        for round_ in range(args.rounds):
            for variant in VARIANTS:
                seconds, progress = run(
                    spark, root, variant, f"{variant}-{round_}", args.rows, args.batch_rows
                )
                if variant not in best or seconds < best[variant][0]:
                    best[variant] = (seconds, progress)
    spark.stop()
    ceiling = args.rows / best["ceiling"][0]
    pipeline = args.rows / best["pipeline"][0]
    ratio = pipeline / ceiling
    verdict = "PASS" if ratio >= RATIO_TARGET else "MISS"
    print(f"pipeline / ceiling: {ratio:.2f} (target >= {RATIO_TARGET}) {verdict}")
    kafka_ratio = best["kafka-ceiling"][0] / best["pipeline"][0]
    print(f"    pipeline / Kafka-schema ceiling: {kafka_ratio:.2f} (no target)")
    print(
        f"{args.rows:,} rows, micro-batches of {args.batch_rows:,}, local[2], best of {args.rounds}"
    )
    header = "".join(f"{s:>14}" for s in STAGES)
    print(f"{'variant':<14}{'rows/s':>12}{'seconds':>9}  stages (s): {header}")
    for variant in VARIANTS:
        seconds, progress = best[variant]
        cells = "".join(f"{v:14.2f}" for v in stages(progress).values())
        print(f"{variant:<14}{args.rows / seconds:12,.0f}{seconds:9.2f}              {cells}")
    for variant in ("kafka-ceiling", "read", "write"):
        share = best[variant][0] - best["ceiling"][0]
        print(f"{variant} costs {share:+.2f} s over the ceiling")


if __name__ == "__main__":
    main()
