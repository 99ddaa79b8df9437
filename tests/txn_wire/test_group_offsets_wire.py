"""Plain group offsets over the wire (OffsetCommit, OffsetFetch) live in the engine's store:
``txnlog groups describe`` and the engine see what a Kafka consumer committed, and a Kafka
consumer sees what the engine committed (O-01, one store for everyone)."""

from __future__ import annotations

import json
import subprocess

from confluent_kafka import TopicPartition as KafkaPartition

from tests.txn_wire.serve_process import TXNLOG, ServeProcess
from tests.txn_wire.wire_clients import WAIT_S, confluent_consumer
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def test_offsets_committed_by_a_kafka_consumer_are_the_engines_and_back(
    server: ServeProcess,
) -> None:
    consumer = confluent_consumer(server.bootstrap, "read_committed", **{"group.id": "wire-group"})
    consumer.commit(
        offsets=[KafkaPartition("orders", 0, 7), KafkaPartition("orders", 1, 3)], asynchronous=False
    )
    with Log.open(server.path) as log:
        committed = log.committed("wire-group", log.partitions("orders"))
        log.group_offsets.commit("engine-group", {TopicPartition("orders", 1): 11})
    assert {tp.partition: om.offset for tp, om in committed.items() if om} == {0: 7, 1: 3}

    described = subprocess.run(
        [TXNLOG, "groups", "describe", str(server.path), "wire-group", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rows = json.loads(described.stdout)["offsets"]
    assert {(r["topic"], r["partition"], r["committed_offset"]) for r in rows} == {
        ("orders", 0, 7),
        ("orders", 1, 3),
    }

    fetched = consumer.committed([KafkaPartition("orders", 0), KafkaPartition("orders", 1)], WAIT_S)
    assert [tp.offset for tp in fetched] == [7, 3]
    consumer.close()
    other = confluent_consumer(server.bootstrap, "read_committed", **{"group.id": "engine-group"})
    fetched = other.committed([KafkaPartition("orders", 0), KafkaPartition("orders", 1)], WAIT_S)
    other.close()
    assert [tp.offset for tp in fetched] == [-1001, 11]  # librdkafka's "no offset" for partition 0
