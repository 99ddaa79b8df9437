"""The source's executor read path in Kafka mode beside embedded mode, on one log.

Writes ``--records`` records (``bench_source.write_log``: 4 partitions, 16-byte keys,
100-byte values), serves the log with ``txnlog serve``, plans a batch read in each mode and
reads every task in this process (one core, no Spark): the embedded ``read_partition`` over
the segment files, and Kafka mode's ``read_kafka_partition`` (an assigned read_committed
confluent-kafka consumer, rows turned into Arrow batches). A bare confluent-kafka consumer
draining the same partitions without building rows is printed as the ceiling of the wire path.
Best of ``--repeat`` runs each. With ``--spark``, also a batch ``spark.read`` of the whole log
into Spark's ``noop`` sink in each mode (``local[2]``, after a warm-up run). Never asserts.

    .venv/bin/python bench/bench_source_kafka.py [--records 1000000] [--repeat 2] [--spark]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_source import write_log  # noqa: E402
from offsets.partition_offsets import PartitionOffsets  # noqa: E402
from tests.txn_wire.serve_process import start_serve  # noqa: E402
from txn_source.options import parse_source_options  # noqa: E402
from txn_source.planning import plan_input_partitions  # noqa: E402
from txn_source.reader import read_any  # noqa: E402
from txn_source.source_view import open_view  # noqa: E402


def plan(given: dict[str, str]) -> list[Any]:
    options = parse_source_options({**given, "subscribe": "bench"}, streaming=False)
    with open_view(options) as view:
        partitions = view.partitions(options.subscription)
        end = PartitionOffsets.of(view.latest_offsets(partitions))
        return plan_input_partitions(view, options, PartitionOffsets.of({}), end)


def read_rate(tasks: list[Any]) -> tuple[int, float]:
    started = time.perf_counter()
    rows = sum(batch.num_rows for task in tasks for batch in read_any(task))
    return rows, rows / (time.perf_counter() - started)


def bare_consumer_rate(bootstrap: str, tasks: list[Any]) -> float:
    """Messages/s of one read_committed consumer assigned every partition, no rows built."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-bare",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    ends = {t.partition: t.end for t in tasks}
    consumer.assign([TopicPartition("bench", p, 0) for p in ends])
    remaining, count = dict(ends), 0
    started = time.perf_counter()
    while remaining:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is not None:
                continue
            count += 1
            if message.offset() + 1 >= remaining.get(message.partition(), 0):
                remaining.pop(message.partition(), None)
    rate = count / (time.perf_counter() - started)
    consumer.close()
    return rate


def spark_rates(path: Path, bootstrap: str, records: int, repeat: int) -> dict[str, float]:
    """Rows/s of ``spark.read.format("txnlog")`` -> ``noop`` in each mode, best run."""
    import os

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from demo.spark_session import local_session

    spark = local_session("bench-source-kafka", "local[2]")
    modes = {"embedded": {"path": str(path)}, "kafka": {"kafka.bootstrap.servers": bootstrap}}
    best = {label: 0.0 for label in modes}
    try:
        for attempt in range(repeat + 1):
            for label, given in modes.items():
                df = spark.read.format("txnlog").options(subscribe="bench", **given).load()
                started = time.perf_counter()
                df.write.format("noop").mode("overwrite").save()
                seconds = time.perf_counter() - started
                if attempt:
                    best[label] = max(best[label], records / seconds)
                    print(f"  spark {label:8s} round {attempt}: {seconds:6.2f} s")
    finally:
        spark.stop()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--spark", action="store_true")
    args = parser.parse_args()
    spark: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "log"
        write_log(path, args.records)
        served = start_serve(path)
        try:
            embedded = plan({"path": str(path)})
            kafka = plan({"kafka.bootstrap.servers": served.bootstrap})
            best: dict[str, float] = {"embedded": 0.0, "kafka": 0.0}
            for attempt in range(1, args.repeat + 1):
                for label, tasks in (("embedded", embedded), ("kafka", kafka)):
                    rows, rate = read_rate(tasks)
                    best[label] = max(best[label], rate)
                    print(f"  {label:8s} round {attempt}: {rows:,} rows, {rate:12,.0f} rows/s")
            bare = bare_consumer_rate(served.bootstrap, kafka)
            if args.spark:
                spark = spark_rates(path, served.bootstrap, args.records, args.repeat)
        finally:
            served.stop()
    print(f"embedded read path:            {best['embedded']:12,.0f} rows/s (best run)")
    print(f"Kafka-mode read path:          {best['kafka']:12,.0f} rows/s (best run)")
    print(f"bare confluent-kafka consumer: {bare:12,.0f} messages/s (no rows built)")
    print(f"ratio Kafka mode / embedded: {best['kafka'] / best['embedded']:.3f}")
    print(f"ratio Kafka mode / bare consumer: {best['kafka'] / bare:.2f}")
    if spark:
        print(f"spark.read -> noop, embedded:  {spark['embedded']:12,.0f} rows/s (best run)")
        print(f"spark.read -> noop, Kafka mode:{spark['kafka']:12,.0f} rows/s (best run)")
        print(
            f"ratio Kafka mode / embedded through Spark: {spark['kafka'] / spark['embedded']:.2f}"
        )


if __name__ == "__main__":
    main()
