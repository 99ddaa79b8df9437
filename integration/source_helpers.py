"""Helpers for the source's Spark tests: write test data with the engine's producers, run a
``txnlog`` stream to completion and collect what each micro-batch saw."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txn_log.log import Log
from txn_log.producer.producer import Producer

TOPIC = "t"


@dataclass(frozen=True, order=True)
class Seen:
    """One delivered row, as the tests compare them."""

    topic: str
    partition: int
    offset: int
    value: bytes


def committed(
    log: Log, values: Iterable[bytes], *, partition: int | None = None, txn_id: str = "w"
) -> None:
    """One committed transaction of ``values``."""
    producer = _begin(log, txn_id)
    for value in values:
        producer.send(TOPIC, value, partition=partition)
    producer.commit_transaction()


def aborted(
    log: Log, values: Iterable[bytes], *, partition: int | None = None, txn_id: str = "w"
) -> None:
    """One transaction whose records reach the log and are then aborted."""
    producer = _begin(log, txn_id)
    for value in values:
        producer.send(TOPIC, value, partition=partition)
    producer.flush()
    producer.abort_transaction()


def left_open(log: Log, values: Iterable[bytes], *, partition: int, txn_id: str) -> Producer:
    """A transaction whose records are in the log, neither committed nor aborted yet."""
    producer = _begin(log, txn_id)
    for value in values:
        producer.send(TOPIC, value, partition=partition)
    producer.flush()
    return producer


def _begin(log: Log, txn_id: str) -> Producer:
    producer = log.producer(txn_id)
    producer.init_transactions()
    producer.begin_transaction()
    return producer


def values(n: int, prefix: str = "v") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def seen(rows: Iterable[Any]) -> list[Seen]:
    return sorted(Seen(r.topic, r.partition, r.offset, bytes(r.value)) for r in rows)


def source(spark: Any, path: Path, **options: str) -> Any:
    """``spark.readStream.format("txnlog")`` on topic ``t`` from the earliest offsets."""
    reader = spark.readStream.format("txnlog")
    for key, value in {"subscribe": TOPIC, "startingOffsets": "earliest", **options}.items():
        reader = reader.option(key, value)
    return reader.load(str(path))


def run_available_now(
    stream: Any,
    checkpoint: Path,
    on_batch: Callable[[int], None] | None = None,
) -> list[list[Seen]]:
    """Run ``stream`` with Trigger.AvailableNow to its end; the rows of each micro-batch.

    ``on_batch(batch_id)`` runs on the driver after each batch is collected.
    """
    batches: list[list[Seen]] = []

    def collect(batch: Any, batch_id: int) -> None:
        batches.append(seen(batch.select("topic", "partition", "offset", "value").collect()))
        if on_batch is not None:
            on_batch(batch_id)

    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        query.stop()
    return batches


def flatten(batches: Iterable[list[Seen]]) -> list[Seen]:
    return sorted(row for batch in batches for row in batch)
