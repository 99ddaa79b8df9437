"""The commit protocol's cost per backend: the same tasks through the embedded backend (a
txnlog directory) and the Kafka backend (confluent-kafka against a ``txnlog serve`` started
here), one run each, after a warm-up batch.

Each micro-batch: ``--tasks`` tasks run one after another (this process), each writing
``--rows`` rows of 100-byte values with keys to 3 partitions, then the driver's commit.
Prints rows/s per backend, the Kafka/embedded ratio (issue 16 asks >= 0.5 of a Spark pipeline
on this machine; this is the protocol alone, without Spark), and the Kafka backend's fixed
costs per task (fencing + ledger lookup, commit) and per batch (the driver's record). No
target is asserted.

    .venv/bin/python bench/bench_kafka_commit_protocol.py [--rows N] [--tasks T] [--batches B]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from commit_protocol.backend import LogBackend
from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity
from commit_protocol.embedded import EmbeddedBackend
from commit_protocol.kafka_backend import KafkaBackend
from datasource_options.location import KafkaCluster
from demo.served import start_serve
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

TOPIC = "out"


def rows(count: int) -> pa.RecordBatch:
    values = pa.array([b"%0100d" % i for i in range(count)], pa.binary())
    keys = pa.array([b"k%d" % i for i in range(count)], pa.binary())
    return pa.record_batch([values, keys], ["value", "key"])


def run(
    backend: LogBackend, label: str, args: argparse.Namespace
) -> tuple[float, dict[str, float]]:
    protocol = SinkCommitProtocol(backend, SinkIdentity(f"bench-{label}", f"bench-{label}"))
    data = rows(args.rows)
    phases = {"begin": 0.0, "write": 0.0, "prepare": 0.0, "driver": 0.0}
    started = 0.0
    for batch in range(args.batches + 1):  # batch 0 warms up
        if batch == 1:
            started = time.perf_counter()
            phases = dict.fromkeys(phases, 0.0)
        messages = []
        for task in range(args.tasks):
            t0 = time.perf_counter()
            transaction = protocol.begin_task(batch, task)
            assert transaction is not None
            t1 = time.perf_counter()
            for partition in range(3):
                piece = data.slice(partition * args.rows // 3, args.rows // 3)
                transaction.write(TopicPartition(TOPIC, partition), piece)
            t2 = time.perf_counter()
            messages.append(protocol.prepare_task(transaction, batch, task, 0))
            t3 = time.perf_counter()
            phases["begin"] += t1 - t0
            phases["write"] += t2 - t1
            phases["prepare"] += t3 - t2
        t4 = time.perf_counter()
        assert protocol.commit(batch, messages)
        phases["driver"] += time.perf_counter() - t4
    elapsed = time.perf_counter() - started
    total = args.batches * args.tasks * (args.rows // 3 * 3)
    return total / elapsed, phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60_000, help="rows per task")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--batches", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with Log.open(root / "embedded") as log:
            log.create_topic(TOPIC, 3)
            embedded, _ = run(EmbeddedBackend(log), "embedded", args)
        with Log.open(root / "kafka") as log:
            log.create_topic(TOPIC, 3)
        served = start_serve(root / "kafka")
        try:
            cluster = KafkaCluster.at(served.bootstrap)
            backend = KafkaBackend(cluster)
            kafka, phases = run(backend, "kafka", args)
            backend.close()
        finally:
            served.stop()
    tasks = args.batches * args.tasks
    print(f"{args.tasks} tasks x {args.rows} rows x {args.batches} batches (100-byte values)")
    print(f"embedded backend: {embedded:12,.0f} rows/s")
    print(f"kafka backend:    {kafka:12,.0f} rows/s   ratio {kafka / embedded:.2f}")
    print(
        f"kafka per task: fence+ledger {phases['begin'] / tasks * 1000:.0f} ms, write "
        f"{phases['write'] / tasks * 1000:.0f} ms, commit {phases['prepare'] / tasks * 1000:.0f}"
        f" ms; per batch: driver record {phases['driver'] / args.batches * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
