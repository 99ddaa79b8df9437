"""Produce, Fetch, ListOffsets and Metadata through ``txnlog serve``, driven by unmodified
Kafka clients (confluent-kafka = librdkafka, kafka-python) in this process, the server a
real subprocess, and the engine API appending to the same directory meanwhile (DESIGN §3)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import kafka
import pytest
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaPartition

from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.wire_clients import (
    WAIT_S,
    confluent_consumer,
    confluent_producer,
    consume_to,
    produce_all,
)
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def engine_values(path: Path, topic: str, partition: int, isolation: str) -> list[bytes]:
    with Log.open(path) as log:
        consumer = log.consumer(isolation)
        tp = TopicPartition(topic, partition)
        return [r.value for r in consumer.read(tp, consumer.start_offset(tp))]


def test_serve_prints_its_address_and_says_it_is_open(server: ServeProcess) -> None:
    assert server.banner[0].startswith(f"txnlog serve: listening on 127.0.0.1:{server.port} ")
    assert "open: no authentication" in server.banner[1]
    assert "loopback only" in server.banner[1]


@pytest.mark.parametrize("idempotent", [False, True])
def test_confluent_produce_then_consume_both_isolations_R02_R01(
    server: ServeProcess, idempotent: bool
) -> None:
    producer = confluent_producer(server.bootstrap, **{"enable.idempotence": idempotent})
    sends = [("orders", i % 2, f"value-{i}".encode()) for i in range(200)]
    acked = produce_all(producer, sends)
    assert sorted(acked) == sorted([(p, o) for p in (0, 1) for o in range(100)])
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = confluent_consumer(server.bootstrap, isolation)
        got = consume_to(consumer, "orders", {0: 100, 1: 100})
        consumer.close()
        for partition in (0, 1):
            values = [v for p, _, v in got if p == partition]
            assert values == [v for _, p, v in sends if p == partition]
            assert values == engine_values(server.path, "orders", partition, isolation)


@pytest.mark.parametrize("idempotent", [False, True])
def test_kafka_python_produce_then_consume(server: ServeProcess, idempotent: bool) -> None:
    producer = kafka.KafkaProducer(
        bootstrap_servers=server.bootstrap, enable_idempotence=idempotent, acks="all"
    )
    futures = [producer.send("orders", f"kp-{i}".encode(), partition=1) for i in range(50)]
    offsets = [f.get(timeout=WAIT_S).offset for f in futures]
    producer.close()
    assert offsets == list(range(50))
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=server.bootstrap,
            isolation_level=isolation,
            enable_auto_commit=False,
            consumer_timeout_ms=WAIT_S * 1000,
        )
        consumer.assign([kafka.TopicPartition("orders", 1)])
        consumer.seek_to_beginning()
        values = [next(consumer).value for _ in range(50)]
        assert consumer.position(kafka.TopicPartition("orders", 1)) == 50
        consumer.close()
        assert values == [f"kp-{i}".encode() for i in range(50)]


def test_long_poll_wakes_on_an_engine_append_from_another_process(server: ServeProcess) -> None:
    """The server is one more peer of the directory: a record the engine appends in this
    process while a consumer long-polls is delivered (the fetch wakes on the new log end)."""
    consumer = confluent_consumer(server.bootstrap, "read_committed", **{"fetch.wait.max.ms": 5000})
    consumer.assign([KafkaPartition("orders", 0, 0)])
    assert consumer.poll(1.0) is None  # nothing yet: the consumer is long-polling

    def append_later() -> None:
        time.sleep(0.5)
        with Log.open(server.path) as log:
            producer = log.producer()
            producer.send("orders", b"from-the-engine", partition=0)
            producer.flush()

    writer = threading.Thread(target=append_later)
    writer.start()
    got = consume_to(consumer, "orders", {0: 1})
    writer.join()
    consumer.close()
    assert got == [(0, 0, b"from-the-engine")]


def test_kafka_python_long_poll_wakes_on_an_engine_append(server: ServeProcess) -> None:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        fetch_max_wait_ms=5000,
    )
    partition = kafka.TopicPartition("orders", 1)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    assert consumer.poll(timeout_ms=500) == {}

    def append_later() -> None:
        time.sleep(0.5)
        with Log.open(server.path) as log:
            producer = log.producer()
            producer.send("orders", b"woken", partition=1)
            producer.flush()

    writer = threading.Thread(target=append_later)
    writer.start()
    values = []
    deadline = time.monotonic() + WAIT_S
    while not values and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            values += [r.value for r in records]
    writer.join()
    consumer.close()
    assert values == [b"woken"]


def _engine_transactions(path: Path) -> tuple[list[bytes], list[bytes]]:
    """Committed and aborted engine transactions interleaved on orders-0, then one left open.
    Returns (committed values, every data value in log order)."""
    committed: list[bytes] = []
    everything: list[bytes] = []
    with Log.open(path) as log:
        for round_ in range(6):
            producer = log.producer(f"engine-{round_ % 2}")
            producer.init_transactions()
            producer.begin_transaction()
            values = [f"t{round_}-{i}".encode() for i in range(5)]
            for value in values:
                producer.send("orders", value, partition=0)
            producer.flush()
            everything += values
            if round_ % 3 == 1:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
                committed += values
        open_producer = log.producer("engine-open")
        open_producer.init_transactions()
        open_producer.begin_transaction()
        open_producer.send("orders", b"open-1", partition=0)
        open_producer.flush()
        everything.append(b"open-1")
    return committed, everything


def test_read_committed_stops_at_an_open_transaction_and_never_sees_aborted_B05_B13(
    server: ServeProcess,
) -> None:
    committed, everything = _engine_transactions(server.path)
    with Log.open(server.path) as log:
        reader = log.partition_reader(TopicPartition("orders", 0))
        lso, high_watermark = reader.last_stable_offset, reader.high_watermark
    assert lso < high_watermark  # the open transaction pins the LSO

    consumer = confluent_consumer(server.bootstrap, "read_committed")
    got = consume_to(consumer, "orders", {0: lso})
    assert [v for _, _, v in got] == committed
    assert consumer.get_watermark_offsets(KafkaPartition("orders", 0), timeout=WAIT_S) == (0, lso)
    consumer.close()
    assert engine_values(server.path, "orders", 0, "read_committed") == committed

    uncommitted = confluent_consumer(server.bootstrap, "read_uncommitted")
    got = consume_to(uncommitted, "orders", {0: high_watermark})
    assert [v for _, _, v in got] == everything
    assert (
        uncommitted.get_watermark_offsets(KafkaPartition("orders", 0), timeout=WAIT_S)[1]
        == high_watermark
    )
    uncommitted.close()

    kp = kafka.KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=WAIT_S * 1000,
    )
    partition = kafka.TopicPartition("orders", 0)
    kp.assign([partition])
    kp.seek_to_beginning()
    values = []
    while kp.position(partition) < lso:
        for records in kp.poll(timeout_ms=500).values():
            values += [r.value for r in records]
    assert kp.end_offsets([partition])[partition] == lso
    kp.close()
    assert values == committed


def test_list_offsets_earliest_latest_and_by_timestamp_R03(server: ServeProcess) -> None:
    base = 1_700_000_000_000
    with Log.open(server.path) as log:
        producer = log.producer()
        for i in range(10):
            producer.send("orders", f"ts-{i}".encode(), partition=1, timestamp_ms=base + 1000 * i)
            producer.flush()  # one batch per record, so the time index has entries to find
    consumer = confluent_consumer(server.bootstrap, "read_committed")
    assert consumer.get_watermark_offsets(KafkaPartition("orders", 1), timeout=WAIT_S) == (0, 10)
    found = [
        consumer.offsets_for_times([KafkaPartition("orders", 1, base + 1000 * i + 500)], WAIT_S)
        for i in (-1, 3, 9)
    ]
    assert [tps[0].offset for tps in found] == [0, 4, -1]
    consumer.close()

    kp = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap)
    partition = kafka.TopicPartition("orders", 1)
    answer = kp.offsets_for_times({partition: base + 2000})[partition]
    assert (answer.offset, answer.timestamp) == (2, base + 2000)
    assert kp.beginning_offsets([partition])[partition] == 0
    assert kp.end_offsets([partition])[partition] == 10
    kp.close()


def test_fetch_out_of_range_is_OFFSET_OUT_OF_RANGE(server: ServeProcess) -> None:
    produce_all(confluent_producer(server.bootstrap), [("orders", 0, b"only")])
    consumer = confluent_consumer(
        server.bootstrap, "read_committed", **{"auto.offset.reset": "error"}
    )
    consumer.assign([KafkaPartition("orders", 0, 5)])
    deadline = time.monotonic() + WAIT_S
    error = None
    while error is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error():
            error = message.error()
    consumer.close()
    assert error is not None
    assert error.code() == KafkaError._AUTO_OFFSET_RESET
    assert "out of range" in error.str().lower()

    kp = kafka.KafkaConsumer(
        bootstrap_servers=server.bootstrap, auto_offset_reset="none", enable_auto_commit=False
    )
    partition = kafka.TopicPartition("orders", 0)
    kp.assign([partition])
    kp.seek(partition, 7)
    with pytest.raises(kafka.errors.OffsetOutOfRangeError):
        for _ in range(40):
            kp.poll(timeout_ms=250)
    kp.close()


def test_metadata_names_unknown_topics_and_flags_internal_ones(server: ServeProcess) -> None:
    consumer = confluent_consumer(server.bootstrap, "read_committed")
    metadata = consumer.list_topics(timeout=WAIT_S)
    assert set(metadata.topics) >= {"orders", "__consumer_offsets", "__transaction_state"}
    assert len(metadata.topics["orders"].partitions) == 2
    assert metadata.topics["orders"].partitions[0].leader == 0
    missing = consumer.list_topics("nowhere", timeout=WAIT_S).topics["nowhere"]
    assert missing.error is not None
    assert missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    consumer.close()


def test_metadata_reports_each_topics_id_KIP516(server: ServeProcess) -> None:
    """Metadata v10+ carries the engine's topic id (Kafka's printed form decoded to its 16
    bytes), so that clients tell a re-created topic from the one they knew; before, the nil
    UUID."""
    import base64
    import uuid

    from tests.txn_wire.wire_clients import RawClient

    client = RawClient(server.port)
    answer = client.request(3, 12, {"topics": [{"name": "orders", "topic_id": None}]})
    client.close()
    (topic,) = answer["topics"]
    with Log.open(server.path, read_only=True) as log:
        printed = log.partition_reader(TopicPartition("orders", 0)).topic_id
    assert printed is not None
    assert topic["topic_id"] == uuid.UUID(bytes=base64.urlsafe_b64decode(printed + "=="))
    assert topic["topic_id"] != uuid.UUID(int=0)
