"""Transactions over the wire (R-04..R-10): confluent-kafka's transactional producer against
``txnlog serve``, checked through a read_committed Kafka consumer and through the engine."""

from __future__ import annotations

import time
from pathlib import Path

import kafka
import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.wire_clients import WAIT_S, confluent_consumer, consume_to
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def transactional_producer(
    server: ServeProcess, transactional_id: str, **config: object
) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **config,
        }
    )
    producer.init_transactions(WAIT_S)
    return producer


def engine_committed(path: Path, partition: int) -> list[bytes]:
    with Log.open(path) as log:
        consumer = log.consumer("read_committed")
        tp = TopicPartition("orders", partition)
        return [r.value for r in consumer.read(tp, 0)]


def test_commit_and_abort_with_offsets_sent_in_the_transaction_R06_R10(
    server: ServeProcess, log_dir: Path
) -> None:
    with Log.open(log_dir) as log:  # offsets of a partition that does not exist are refused
        log.create_topic("input", 1)
    producer = transactional_producer(server, "copier-1")
    group_metadata = confluent_consumer(
        server.bootstrap, "read_committed", **{"group.id": "copier-group"}
    )
    committed: dict[int, list[bytes]] = {0: [], 1: []}
    for round_, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        for i in range(10):
            value = f"r{round_}-{i}".encode()
            producer.produce("orders", value=value, partition=i % 2)
            if commit:
                committed[i % 2].append(value)
        producer.send_offsets_to_transaction(
            [KafkaPartition("input", 0, 100 + round_)],
            group_metadata.consumer_group_metadata(),
            WAIT_S,
        )
        if commit:
            producer.commit_transaction(WAIT_S)
        else:
            producer.abort_transaction(WAIT_S)
    group_metadata.close()

    with Log.open(server.path) as log:
        ends = {
            p: log.partition_reader(TopicPartition("orders", p)).last_stable_offset for p in (0, 1)
        }
        offsets = log.committed("copier-group", [TopicPartition("input", 0)])
    assert offsets[TopicPartition("input", 0)].offset == 104  # the last committed round's
    consumer = confluent_consumer(server.bootstrap, "read_committed")
    got = consume_to(consumer, "orders", ends)
    consumer.close()
    for partition in (0, 1):
        over_the_wire = [v for p, _, v in got if p == partition]
        assert over_the_wire == committed[partition]
        assert engine_committed(server.path, partition) == committed[partition]


def test_a_zombie_is_fenced_by_a_new_instance_E03_E04(server: ServeProcess) -> None:
    zombie = transactional_producer(server, "fenced-id")
    zombie.begin_transaction()
    zombie.produce("orders", value=b"zombie", partition=0)
    zombie.flush(WAIT_S)
    successor = transactional_producer(server, "fenced-id")  # bumps the epoch, aborts the open txn
    successor.begin_transaction()
    successor.produce("orders", value=b"successor", partition=0)
    successor.commit_transaction(WAIT_S)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(WAIT_S)
    error = raised.value.args[0]
    assert error.fatal()
    assert "fenced" in error.str().lower()
    assert engine_committed(server.path, 0) == [b"successor"]


def test_an_open_transaction_is_aborted_after_its_timeout_C25(server: ServeProcess) -> None:
    """The engine's own rule: a reader planning past an open transaction lets the coordinator
    abort it once its timeout passed; the producer is fenced."""
    producer = transactional_producer(server, "slow-id", **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce("orders", value=b"never-committed", partition=1)
    producer.flush(WAIT_S)
    with Log.open(server.path) as log:
        reader = log.partition_reader(TopicPartition("orders", 1))
        assert reader.last_stable_offset == 0  # pinned by the open transaction
    time.sleep(1.5)  # past the transaction's timeout
    consumer = confluent_consumer(server.bootstrap, "read_committed")
    got = consume_to(consumer, "orders", {1: 2})  # the data and the ABORT marker
    consumer.close()
    assert got == []
    with pytest.raises(KafkaException):
        producer.commit_transaction(WAIT_S)
    assert engine_committed(server.path, 1) == []


def test_kafka_python_transactional_producer(server: ServeProcess) -> None:
    producer = kafka.KafkaProducer(
        bootstrap_servers=server.bootstrap, transactional_id="kp-txn", acks="all"
    )
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("orders", b"kp-committed", partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("orders", b"kp-aborted", partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert engine_committed(server.path, 0) == [b"kp-committed"]
