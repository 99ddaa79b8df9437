"""The exactly-once pipeline used by the main job, the fault-injection suite and the soak run.

    workload (process) ──transactions──▶ orders (4 partitions)
    ETL query (a Spark driver process):  orders ──txnlog source──▶ upper(value) ──txnlog sink──▶
                                         orders_clean (3 partitions)
    verify: read_committed(orders_clean) == upper(read_committed(orders)), exactly once.

Every process here is a real OS process started with ``python -m demo.pipeline ROLE ...``; the
driver runs in a session of its own so that killing its process group kills the JVM and the
Python workers with it (a driver machine crash).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from commit_protocol.embedded import EmbeddedBackend
from commit_protocol.messages import LedgerEntry
from demo.spark_session import local_session
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_sink.options import SinkOptions

INPUT, OUTPUT = "orders", "orders_clean"
# The output topic is narrower than the input, so the rows of one input partition (one task)
# spread over several output partitions and every task transaction spans several of them.
PARTITIONS = {INPUT: 4, OUTPUT: 3}
ROOT = Path(__file__).resolve().parents[1]


# --- the workload ------------------------------------------------------------------------------


def create_topics(log_dir: Path) -> None:
    log = Log.open(log_dir)
    for topic, partitions in PARTITIONS.items():
        if topic not in log.topics():
            log.create_topic(topic, partitions=partitions)


def run_workload(
    log_dir: Path,
    transactions: int,
    per_txn: int,
    seed: int,
    open_for_s: float,
    abort_every: int,
    producer_id: str,
    pause_s: float = 0.0,
) -> None:
    """Transactions of ``per_txn`` records: every ``abort_every``-th aborted, and the first one
    left open for ``open_for_s`` seconds while the others go on (it pins the LSO); ``pause_s``
    between transactions spreads the input over time (the soak run)."""
    rng = random.Random(seed)
    log = Log.open(log_dir)
    # short timeouts: a workload killed mid-transaction (the soak run) pins the LSO only briefly
    held_timeout_ms = max(int(open_for_s * 3000), 10_000)
    held = log.producer(f"{producer_id}-held", transaction_timeout_ms=held_timeout_ms)
    held.init_transactions()
    held.begin_transaction()
    for i in range(per_txn):
        held.send(INPUT, b"held-%d-%d" % (seed, i), key=b"customer-%d" % rng.randrange(100))
    held.flush()
    held_since = time.monotonic()
    producer = log.producer(producer_id, transaction_timeout_ms=10_000)
    producer.init_transactions()
    for txn in range(transactions):
        producer.begin_transaction()
        for i in range(per_txn):
            value = b"order-%d-%d-%d" % (seed, txn, i)
            producer.send(INPUT, value, key=b"customer-%d" % rng.randrange(100))
        if abort_every and txn % abort_every == abort_every - 1:
            producer.flush()
            producer.abort_transaction()
        else:
            producer.commit_transaction()
        print(json.dumps({"txn": txn}), flush=True)
        time.sleep(pause_s)
        if held is not None and time.monotonic() - held_since > open_for_s:
            held.commit_transaction()
            held = None
    if held is not None:
        time.sleep(max(open_for_s - (time.monotonic() - held_since), 0))
        held.commit_transaction()


# --- the ETL query (a Spark driver) ---------------------------------------------------------------


def run_query(
    log_dir: Path,
    checkpoint: Path,
    mode: str,
    max_per_trigger: int,
    bootstrap: str | None = None,
) -> None:
    """The streaming ETL in a Spark driver of its own, until it ends (or is killed)."""
    spark = local_session(
        "txnlog-etl", "local[2,3]", **{"spark.sql.streaming.numRecentProgressUpdates": "10000"}
    )
    query = start_etl(spark, log_dir, checkpoint, mode, max_per_trigger, bootstrap)
    print(json.dumps({"query_id": str(query.id)}), flush=True)
    query.awaitTermination()
    print(json.dumps({"progress": progress_totals(query.recentProgress)}), flush=True)
    spark.stop()


def progress_totals(progress: list[Any]) -> dict[str, int]:
    """Micro-batches, input rows and milliseconds spent in triggers over a query's progress
    reports (the last ``spark.sql.streaming.numRecentProgressUpdates`` of them), and the
    milliseconds of the first trigger alone (it starts the Python workers)."""
    trigger_ms = [int(p["durationMs"].get("triggerExecution", 0)) for p in progress]
    return {
        "batches": len(progress),
        "rows": sum(int(p["numInputRows"]) for p in progress),
        "trigger_ms": sum(trigger_ms),
        "first_trigger_ms": trigger_ms[0] if trigger_ms else 0,
    }


def start_etl(
    spark: Any,
    log_dir: Path,
    checkpoint: Path,
    mode: str,
    max_per_trigger: int,
    bootstrap: str | None = None,
) -> Any:
    """Start the streaming ETL ``orders`` → upper-case values → ``orders_clean``: ``mode``
    "continuous" (micro-batches every 0.2 s until stopped) or "available-now" (everything
    committed so far, then the query ends). With ``bootstrap`` (Kafka mode) the source and the
    sink talk to that Kafka cluster (``txnlog serve`` of ``log_dir``) instead of the files."""
    reader = (
        spark.readStream.format("txnlog")
        .option("subscribe", INPUT)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
    )
    source = reader.load(str(log_dir)) if bootstrap is None else _kafka(reader, bootstrap).load()
    writer = (
        source.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("txnlog")
        .option("topic", OUTPUT)
        .option("checkpointLocation", str(checkpoint))
    )
    if mode == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="200 milliseconds")
    return writer.start(str(log_dir)) if bootstrap is None else _kafka(writer, bootstrap).start()


def _kafka(builder: Any, bootstrap: str) -> Any:
    return builder.option("kafka.bootstrap.servers", bootstrap)


def sink_ledgers(log: Log, bootstrap: str | None) -> tuple[LedgerEntry, ...]:
    """The sink's ledger: the log's own, or (Kafka mode) the cluster's ledger topic, read by a
    backend of its own that is closed at once (no client left polling a stopped server)."""
    if bootstrap is None:
        return EmbeddedBackend(log).ledgers()
    from commit_protocol.kafka_backend import KafkaBackend

    cluster = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap}).cluster
    assert cluster is not None
    backend = KafkaBackend(cluster)
    try:
        return backend.ledgers()
    finally:
        backend.close()


def spawn(
    role: str, *args: object, env: dict[str, str] | None = None, new_session: bool = False
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "demo.pipeline", role, *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=new_session,
    )


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL a driver started with ``new_session``: its JVM and workers die with it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)


# --- verification --------------------------------------------------------------------------------


@dataclass
class Report:
    records_in: int = 0
    records_out: int = 0
    duplicates: int = 0
    missing: int = 0
    unexpected: int = 0
    aborted_skipped: int = 0
    order_violations: int = 0
    micro_batches: int = 0
    group_offsets_match: bool = False
    lso_at_log_end: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return (
            not self.duplicates
            and not self.missing
            and not self.unexpected
            and not self.order_violations
            and self.group_offsets_match
            and self.lso_at_log_end
            and not self.problems
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), exactly_once=self.exactly_once)


def read_all(log: Log, topic: str, isolation: str) -> dict[TopicPartition, list[tuple[Any, ...]]]:
    consumer = log.consumer(isolation)
    return {
        tp: [(r.key, r.value, r.offset) for r in consumer.read(tp, consumer.start_offset(tp))]
        for tp in log.partitions(topic)
    }


def verify(log_dir: Path, bootstrap: str | None = None) -> Report:
    """Output = transformed committed input, exactly once, per-key order kept. In Kafka mode
    (``bootstrap``: a ``txnlog serve`` of ``log_dir``) the ledger is the cluster's, and the
    output read by a confluent-kafka read_committed consumer must equal the files' own."""
    with Log.open(log_dir) as log:
        report = _verify(log, sink_ledgers(log, bootstrap))
        if bootstrap is not None:
            files = read_all(log, OUTPUT, "read_committed")
            wire = read_all_kafka(bootstrap, OUTPUT, list(files))
            if wire != files:
                report.problems.append("a Kafka read_committed consumer read other output")
        return report


def read_all_kafka(
    bootstrap: str, topic: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, list[tuple[Any, ...]]]:
    """``read_all`` through confluent-kafka: an assigned read_committed consumer per partition
    reads ``partitions`` from their start until librdkafka reports their end (the LSO)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txnlog-demo-verify",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    found: dict[TopicPartition, list[tuple[Any, ...]]] = {tp: [] for tp in partitions}
    try:
        consumer.assign([KafkaPartition(topic, tp.partition, 0) for tp in partitions])
        at_end: set[int] = set()
        deadline = time.monotonic() + 120
        while len(at_end) < len(partitions) and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1.0):
                if message.error():
                    if message.error().code() == -191:  # _PARTITION_EOF
                        at_end.add(message.partition())
                        continue
                    raise RuntimeError(f"reading {topic}: {message.error()}")
                tp = TopicPartition(topic, message.partition())
                found[tp].append((message.key(), message.value(), message.offset()))
    finally:
        consumer.close()
    return found


def verify_so_far(log_dir: Path) -> Report:
    """The check that must hold at every moment, even while the pipeline runs: no output
    record twice, none that was not committed upstream, per-key order kept (``missing`` only
    says how far behind the output is). Reads the output before the input, so that a record
    committed meanwhile upstream and copied downstream is never taken for a stranger."""
    with Log.open(log_dir) as log:
        out = read_all(log, OUTPUT, "read_committed")
        committed_in = read_all(log, INPUT, "read_committed")
        report = Report()
        _compare(report, committed_in, out)
        return report


def holds_so_far(report: Report) -> bool:
    return not (report.duplicates or report.unexpected or report.order_violations)


def _compare(
    report: Report,
    committed_in: dict[TopicPartition, list[tuple[Any, ...]]],
    out: dict[TopicPartition, list[tuple[Any, ...]]],
) -> None:
    expected = Counter((k, v.upper()) for rows in committed_in.values() for k, v, _ in rows)
    produced = Counter((k, v) for rows in out.values() for k, v, _ in rows)
    report.records_in = sum(expected.values())
    report.records_out = sum(produced.values())
    report.duplicates, report.missing, report.unexpected = delivery_errors(expected, produced)
    report.order_violations = order_violations(committed_in, out)


def _verify(log: Log, ledgers: tuple[LedgerEntry, ...]) -> Report:
    report = Report()
    committed_in = read_all(log, INPUT, "read_committed")
    all_in = read_all(log, INPUT, "read_uncommitted")
    out = read_all(log, OUTPUT, "read_committed")
    _compare(report, committed_in, out)
    report.aborted_skipped = sum(map(len, all_in.values())) - report.records_in
    report.micro_batches = sum(entry.batch_id + 1 for entry in ledgers)
    report.group_offsets_match = group_offsets_match(log, ledgers)
    report.lso_at_log_end = all(
        log.partition_log(tp).last_stable_offset == log.partition_log(tp).log_end_offset
        for topic in (INPUT, OUTPUT)
        for tp in log.partitions(topic)
    )
    return report


def delivery_errors(expected: Counter[Any], produced: Counter[Any]) -> tuple[int, int, int]:
    """``(duplicates, missing, unexpected)`` of ``produced`` against the multiset ``expected``.

    Duplicates are copies of a committed record beyond the number of times it was committed
    (a record committed twice upstream is expected twice downstream); unexpected records were
    never committed upstream at all (aborted, uncommitted or invented).
    """
    duplicates = sum(n - expected[r] for r, n in produced.items() if 0 < expected[r] < n)
    missing = sum((expected - produced).values())
    unexpected = sum(n for r, n in produced.items() if r not in expected)
    return duplicates, missing, unexpected


def order_violations(
    committed_in: dict[TopicPartition, list[tuple[Any, ...]]],
    out: dict[TopicPartition, list[tuple[Any, ...]]],
) -> int:
    """Records of one key must come out in the order they went in (one input partition per
    key, one output partition per key: Kafka's partitioner on both sides).

    The n-th copy of a record downstream stands for its n-th copy upstream, so a record
    committed twice upstream is no order violation. Records that were never committed upstream
    are counted as unexpected by ``delivery_errors``, not here.
    """
    positions: dict[tuple[Any, Any], list[int]] = {}
    for rows in committed_in.values():
        for index, (key, value, _) in enumerate(rows):
            positions.setdefault((key, value.upper()), []).append(index)
    violations = 0
    for rows in out.values():
        seen: Counter[tuple[Any, Any]] = Counter()
        last: dict[Any, int] = {}
        for key, value, _ in rows:
            copies = positions.get((key, value), [])
            if seen[(key, value)] >= len(copies):
                continue
            index = copies[seen[(key, value)]]
            seen[(key, value)] += 1
            if index < last.get(key, -1):
                violations += 1
            last[key] = index
    return violations


def group_offsets_match(log: Log, ledgers: tuple[LedgerEntry, ...]) -> bool:
    """The sink's group offsets equal the offsets its ledger recorded with the last committed
    batch, and those are the end offsets of the input (all of it consumed)."""
    if len(ledgers) != 1:
        return False  # one sink writes this log
    (entry,) = ledgers
    partitions = log.partitions(INPUT)
    committed = log.committed(entry.group_id, partitions)
    group = {tp: None if c is None else c.offset for tp, c in committed.items()}
    ledger = {TopicPartition(t, p): o for t, p, o in entry.offsets}
    ends = {tp: log.consumer().end_offset(tp) for tp in partitions}
    return group == ledger == ends


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=["workload", "query", "verify"])
    parser.add_argument("args", nargs="*")
    args = parser.parse_args(argv)
    if args.role == "workload":
        log_dir, txns, per_txn, seed, open_s, abort_every, pid, *pause = args.args
        run_workload(
            Path(log_dir),
            int(txns),
            int(per_txn),
            int(seed),
            float(open_s),
            int(abort_every),
            pid,
            float(pause[0]) if pause else 0.0,
        )
    elif args.role == "query":
        log_dir, checkpoint, mode, max_per_trigger, *bootstrap = args.args
        run_query(Path(log_dir), Path(checkpoint), mode, int(max_per_trigger), *bootstrap[:1])
    else:
        print(json.dumps(verify(Path(args.args[0]), *args.args[1:2]).as_dict()))


if __name__ == "__main__":
    main()
