"""aiokafka (an asyncio client with its own protocol code, no librdkafka) against ``txnlog
serve``: it produces plainly, idempotently and in transactions, and consumes under both
isolation levels, beside committed and aborted transactions the engine wrote to the same
directory. Under read_committed it gets exactly the committed records (B-05, B-12: the LSO and
the aborted-transactions list over the wire); under read_uncommitted every data record."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition as AioPartition  # type: ignore[import-untyped]

from tests.txn_wire.mixed_transactions import (
    Row,
    Sent,
    by_partition,
    engine_rows,
    engine_transactions,
    in_send_order,
    log_ends,
)
from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.wire_clients import WAIT_S

TOPIC = "orders"


async def aio_produce(bootstrap: str) -> tuple[list[Sent], list[tuple[int, int]]]:
    """A plain idempotent producer, then a transactional one committing one transaction and
    aborting another. Returns the committed records and the acked (partition, offset)s of the
    plain sends."""
    committed: list[Sent] = []
    acked: list[tuple[int, int]] = []
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await plain.start()
    try:
        for i in range(4):
            key, value = f"pk-{i}".encode(), f"aio-plain-{i}".encode()
            meta = await plain.send_and_wait(TOPIC, value, key=key, partition=i % 2)
            acked.append((meta.partition, meta.offset))
            committed.append((i % 2, key, value))
    finally:
        await plain.stop()

    txn = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-txn")
    await txn.start()
    try:
        async with txn.transaction():  # committed on leaving the block
            for i in range(4):
                key, value = f"tk-{i}".encode(), f"aio-c-{i}".encode()
                await txn.send_and_wait(TOPIC, value, key=key, partition=i % 2)
                committed.append((i % 2, key, value))
        await txn.begin_transaction()
        for i in range(4):  # acked, so in the log before the ABORT marker
            await txn.send_and_wait(TOPIC, f"aio-a-{i}".encode(), key=b"ak", partition=i % 2)
        await txn.abort_transaction()
    finally:
        await txn.stop()
    return committed, acked


async def aio_consume(bootstrap: str, isolation: str, ends: dict[int, int]) -> list[Row]:
    """Assign every partition from the beginning and fetch until the consumer's position on
    each reaches its end (position, not the last record: markers and aborted records leave
    gaps)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        partitions = [AioPartition(TOPIC, p) for p in ends]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        rows: list[Row] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            fetched: dict[Any, list[Any]] = await consumer.getmany(*partitions, timeout_ms=200)
            for messages in fetched.values():
                rows.extend((m.topic, m.partition, m.offset, m.key, m.value) for m in messages)
            positions = {tp.partition: await consumer.position(tp) for tp in partitions}
            if all(positions[p] >= end for p, end in ends.items()):
                return sorted(rows, key=lambda row: (row[1], row[2]))
        raise AssertionError(f"aiokafka did not reach {ends}; got {rows}")
    finally:
        await consumer.stop()


def test_aiokafka_reads_exactly_the_committed_records_under_read_committed_B05_B12(
    server: ServeProcess,
) -> None:
    committed = engine_transactions(server.path, TOPIC)
    wire_committed, acked = asyncio.run(aio_produce(server.bootstrap))
    committed += wire_committed
    ends = log_ends(server.path, TOPIC)

    read_committed = asyncio.run(aio_consume(server.bootstrap, "read_committed", ends))
    assert in_send_order(read_committed) == by_partition(committed)
    assert read_committed == engine_rows(server.path, TOPIC, "read_committed")
    plain = {(p, o) for _, p, o, k, _ in read_committed if k and k.startswith(b"pk-")}
    assert plain == set(acked)  # the offsets aiokafka was acked are where the records are

    read_uncommitted = asyncio.run(aio_consume(server.bootstrap, "read_uncommitted", ends))
    assert read_uncommitted == engine_rows(server.path, TOPIC, "read_uncommitted")
    aborted = [v for *_, v in read_uncommitted if v and b"-a" in v]
    assert len(aborted) == 6 + 4  # the engine's aborted transaction and aiokafka's
    assert set(read_committed) < set(read_uncommitted)
    assert set(read_uncommitted) - set(read_committed) == {
        row for row in read_uncommitted if row[4] in aborted
    }
