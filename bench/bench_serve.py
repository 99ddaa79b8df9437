"""confluent-kafka through ``txnlog serve`` beside the engine API in-process, in one run.

Produces N records of 100 bytes with an idempotent producer (acks=all) through a real
``txnlog serve`` subprocess, then consumes them read_committed with a confluent-kafka
consumer; then does the same with the engine's producer and consumer in this process. Prints
records/s for each. The headline (issue 27) is the in-process / wire produce ratio: the
embedded log exists so that a Python process needs no network hop, so ``Producer.send()`` in
process must be at least as fast as confluent-kafka through the server (target ≥ 1.0). Other
targets (issue 15): wire produce ≥ 100,000 records/s, wire consume ≥ 200,000 records/s.
Prints PASS/MISS; never asserts.

    .venv/bin/python bench/bench_serve.py [--records N]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

VALUE = b"v" * 100
RATIO_TARGET = 1.0
TXNLOG = str(Path(sys.executable).with_name("txnlog"))


def start_server(path: Path) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [TXNLOG, "serve", str(path), "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    if process.stdout is None:
        raise SystemExit("no stdout")
    line = process.stdout.readline()
    return process, int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])


def produce_consume(port: int, records: int, config: dict[str, Any]) -> tuple[float, float]:
    """confluent-kafka against the server on ``port``: ``records`` idempotent acks=all
    produces, then a read_committed consume of them; (produce, consume) records/s. ``config``
    adds client settings (SASL for ``bench_serve_auth``)."""
    bootstrap = {"bootstrap.servers": f"127.0.0.1:{port}", **config}
    producer = Producer(
        {
            **bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce("bench", VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(600):
        raise SystemExit("produce did not finish")
    produce_s = time.perf_counter() - started
    consumer = Consumer(
        {
            **bootstrap,
            "group.id": "bench",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
            "max.partition.fetch.bytes": 10 << 20,
        }
    )
    consumer.assign([KafkaPartition("bench", 0, 0)])
    started = time.perf_counter()
    seen = 0
    while seen < records:
        messages = consumer.consume(10_000, timeout=5)
        if any(m.error() for m in messages):
            raise SystemExit(f"consume failed: {[m.error() for m in messages if m.error()]}")
        seen += len(messages)
    consume_s = time.perf_counter() - started
    consumer.close()
    return records / produce_s, records / consume_s


def wire(path: Path, records: int) -> tuple[float, float]:
    process, port = start_server(path)
    try:
        return produce_consume(port, records, {})
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(60)


def in_process(path: Path, records: int) -> tuple[float, float]:
    with Log.open(path) as log:
        producer = log.producer()
        started = time.perf_counter()
        for _ in range(records):
            producer.send("bench", VALUE, partition=0)
        producer.flush()
        produce_s = time.perf_counter() - started
        consumer = log.consumer("read_committed")
        started = time.perf_counter()
        seen = sum(
            batch.num_rows
            for _, batch in consumer.iter_record_batches(TopicPartition("bench", 0), 0)
        )
        consume_s = time.perf_counter() - started
        if seen != records:
            raise SystemExit(f"in-process read {seen} of {records}")
        return records / produce_s, records / consume_s


def verdict(passed: bool) -> str:
    return "PASS" if passed else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("wire", "engine"):
            with Log.open(Path(tmp) / name) as log:
                log.create_topic("bench", 1)
        wire_produce, wire_consume = wire(Path(tmp) / "wire", args.records)
        engine_produce, engine_consume = in_process(Path(tmp) / "engine", args.records)
    ratio = engine_produce / wire_produce
    print(
        f"in-process / wire produce: {ratio:.2f} (target >= {RATIO_TARGET}) "
        f"{verdict(ratio >= RATIO_TARGET)}"
    )
    print(f"records: {args.records:,} x {len(VALUE)} bytes, one partition")
    print(
        f"engine produce (Producer.send, in-process): {engine_produce:12,.0f} records/s  "
        f"wire produce (idempotent, acks=all): {wire_produce:12,.0f} records/s "
        f"(target 100,000) {verdict(wire_produce >= 100_000)}"
    )
    print(
        f"engine consume (in-process):                {engine_consume:12,.0f} records/s  "
        f"wire consume (read_committed):       {wire_consume:12,.0f} records/s "
        f"(target 200,000) {verdict(wire_consume >= 200_000)}"
    )
    print(f"in-process / wire consume: {engine_consume / wire_consume:.2f}")


if __name__ == "__main__":
    main()
