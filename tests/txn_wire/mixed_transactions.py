"""Engine-written committed and aborted transactions, and the engine's own reading of a topic,
for the tests that compare what a Kafka client reads over the wire with what the engine reads
on the same directory (issue 15: "the same data read three ways agrees exactly").

A row is ``(topic, partition, offset, key, value)``: what the tests compare."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import TopicPartition as KafkaPartition

from tests.txn_wire.wire_clients import WAIT_S, confluent_consumer
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

Row = tuple[str, int, int, bytes | None, bytes | None]
Sent = tuple[int, bytes | None, bytes | None]  # (partition, key, value) in the order it was sent


def engine_transactions(path: Path, topic: str, transactional_id: str = "engine-txn") -> list[Sent]:
    """Write to both partitions of ``topic``: commit, abort, commit (the aborted records reach
    the log before their ABORT marker). Returns the committed records, in the order sent."""
    committed: list[Sent] = []
    with Log.open(path) as log:
        producer = log.producer(transactional_id)
        producer.init_transactions()
        for round_, commit in enumerate((True, False, True)):
            producer.begin_transaction()
            for i in range(6):
                partition = i % 2
                key = f"ek{round_}-{i}".encode()
                value = f"{transactional_id}-{'c' if commit else 'a'}{round_}-{i}".encode()
                producer.send(topic, value, key=key, partition=partition)
                if commit:
                    committed.append((partition, key, value))
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()
                producer.abort_transaction()
    return committed


def engine_rows(path: Path, topic: str, isolation: str) -> list[Row]:
    """Every record of ``topic`` the engine's consumer delivers under ``isolation``, in
    (partition, offset) order."""
    rows: list[Row] = []
    with Log.open(path) as log:
        consumer = log.consumer(isolation)
        for tp in log.partitions(topic):
            for record in consumer.read(tp, consumer.start_offset(tp)):
                rows.append((topic, tp.partition, record.offset, record.key, record.value))
    return sorted(rows, key=lambda row: (row[1], row[2]))


def log_ends(path: Path, topic: str) -> dict[int, int]:
    """Each partition's log end offset (= LSO once no transaction is open): where a client's
    position must reach to have read everything."""
    with Log.open(path) as log:
        return {
            tp.partition: log.partition_reader(TopicPartition(topic, tp.partition)).log_end_offset
            for tp in log.partitions(topic)
        }


def in_send_order(rows: list[Row]) -> list[Sent]:
    """``rows`` as (partition, key, value), partition by partition in offset order, to compare
    with what was sent (sends to one partition keep their order)."""
    return [(p, k, v) for _, p, _, k, v in sorted(rows, key=lambda row: (row[1], row[2]))]


def by_partition(sent: list[Sent]) -> list[Sent]:
    """``sent`` grouped partition by partition, each partition's records in sending order."""
    return sorted(sent, key=lambda record: record[0])  # sorted() is stable


def confluent_rows(bootstrap: str, path: Path, topic: str, isolation: str) -> list[Row]:
    """Every record of ``topic`` a confluent-kafka consumer over the wire delivers under
    ``isolation``, reading each partition from 0 until its position reaches the log end (a
    position, not the last record seen: markers and aborted records leave gaps)."""
    ends = log_ends(path, topic)
    consumer = confluent_consumer(bootstrap, isolation)
    consumer.assign([KafkaPartition(topic, p, 0) for p in ends])
    rows: list[Row] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                if message.error():
                    raise AssertionError(f"consumer error: {message.error()}")
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                rows.append((topic, partition, offset, message.key(), message.value()))
            positions = consumer.position([KafkaPartition(topic, p) for p in ends])
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                return sorted(rows, key=lambda row: (row[1], row[2]))
    finally:
        consumer.close()
    raise AssertionError(f"the consumer did not reach {ends}; got {rows}")
