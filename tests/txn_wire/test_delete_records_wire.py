"""DeleteRecords (21) against a real ``txnlog serve``: confluent-kafka's AdminClient
``delete_records`` (librdkafka, as ``kafka-delete-records`` drives a broker), Kafka's answer per
partition, a consumer with ``auto.offset.reset=earliest`` starting at the new low watermark,
the ACL it needs (Delete on the topic), and hostile requests answered partition by partition,
never a crash (issue 25 item 7, issue 26 ``kafka-delete-records`` parity)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient

from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.test_admin_delete_grow import acl_server, as_user
from tests.txn_wire.wire_clients import WAIT_S, RawClient, confluent_consumer
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_wire.api_versions import SUPPORTED

DELETE_RECORDS, API_VERSIONS = 21, 18
OUT_OF_RANGE, UNKNOWN = 1, 3
__all__ = ["acl_server"]  # the fixture: a SASL server with ACLs over the same log


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """``orders`` with 10 records in partition 0 and 4 in partition 1; ``kv`` compacted."""
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
        log.create_topic("kv", 1, {"cleanup.policy": "compact"})
        producer = log.producer()
        for i in range(14):
            producer.send("orders", b"v%d" % i, key=b"k%d" % i, partition=0 if i < 10 else 1)
        producer.close()
    return path


def answers(futures: dict[KafkaPartition, Future[object]]) -> dict[tuple[str, int], object]:
    """(topic, partition) → its low watermark, or its Kafka error code."""
    found: dict[tuple[str, int], object] = {}
    for tp, future in futures.items():
        try:
            found[tp.topic, tp.partition] = future.result(WAIT_S).low_watermark  # type: ignore[attr-defined]
        except KafkaException as error:
            found[tp.topic, tp.partition] = error.args[0].code()
    return found


def poll_offsets(consumer: Consumer, count: int) -> list[tuple[int, int]]:
    """(partition, offset) of the first ``count`` records the consumer delivers."""
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + WAIT_S
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append((message.partition(), message.offset()))
    return seen


def start(log_dir: Path, partition: int = 0) -> int:
    with Log.open(log_dir, read_only=True) as log:
        return log.partition_reader(TopicPartition("orders", partition)).log_start_offset


def test_admin_delete_records_moves_low_watermarks_and_earliest_consumers_start_there(
    server: ServeProcess, log_dir: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    asked = [
        KafkaPartition("orders", 0, 6),
        KafkaPartition("orders", 1, -1),  # OFFSET_END: the high watermark
        KafkaPartition("kv", 0, 0),
        KafkaPartition("__consumer_offsets", 0, 0),
        KafkaPartition("nowhere", 0, 1),
    ]
    assert answers(admin.delete_records(asked, operation_timeout=5)) == {
        ("orders", 0): 6,
        ("orders", 1): 4,
        ("kv", 0): KafkaError.POLICY_VIOLATION,
        ("__consumer_offsets", 0): KafkaError.TOPIC_EXCEPTION,  # Kafka: no client deletes there
        ("nowhere", 0): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    assert answers(admin.delete_records([KafkaPartition("orders", 0, 11)])) == {
        ("orders", 0): KafkaError.OFFSET_OUT_OF_RANGE  # past the high watermark 10
    }
    assert answers(admin.delete_records([KafkaPartition("orders", 0, 2)])) == {("orders", 0): 6}
    assert start(log_dir) == 6

    consumer = confluent_consumer(server.bootstrap, "read_committed", **{"group.id": "fresh"})
    try:
        assert consumer.get_watermark_offsets(KafkaPartition("orders", 0), WAIT_S) == (6, 10)
        consumer.subscribe(["orders"])
        assert sorted(poll_offsets(consumer, 4)) == [(0, 6), (0, 7), (0, 8), (0, 9)]
    finally:
        consumer.close()
    # a position below the low watermark is out of range (Fetch): reset to the earliest, 6
    assigned = confluent_consumer(server.bootstrap, "read_committed")
    try:
        assigned.assign([KafkaPartition("orders", 0, 1)])
        assert poll_offsets(assigned, 1) == [(0, 6)]
    finally:
        assigned.close()


def test_every_version_answers_hostile_partitions_one_by_one(
    server: ServeProcess, log_dir: Path
) -> None:
    """Negative offsets other than -1, offsets past the high watermark or at int64's end,
    negative and missing partition indexes, names no topic can have, a partition named twice
    (answered once, for its last offset, as Kafka's map does) and a large array of unknown
    partitions: each answered with its code and low watermark -1, and the server answers the
    next request."""
    assert SUPPORTED[DELETE_RECORDS] == (0, 2)
    raw = RawClient(server.port)
    hostile = [
        {"name": "orders", "partitions": [
            {"partition_index": 0, "offset": -2},
            {"partition_index": 1, "offset": -2},
            {"partition_index": -1, "offset": 0},
            {"partition_index": 2, "offset": 0},
            {"partition_index": 0, "offset": 3},
            {"partition_index": 0, "offset": 1},
        ]},
        {"name": "../etc", "partitions": [{"partition_index": 0, "offset": 0}]},
        {"name": "", "partitions": [{"partition_index": 0, "offset": 0}]},
        {"name": "gone", "partitions": [
            {"partition_index": i, "offset": 0} for i in range(20_000)
        ]},
    ]  # fmt: skip
    for version in (0, 1, 2):
        answer = raw.request(DELETE_RECORDS, version, {"topics": hostile, "timeout": 1000})
        got = {
            (t["name"], p["partition_index"]): (p["error_code"], p["low_watermark"])
            for t in answer["topics"]
            for p in t["partitions"]
        }
        assert sum(len(t["partitions"]) for t in answer["topics"]) == len(got)  # once each
        assert len(got) == 4 + 2 + 20_000
        assert got["orders", 0] == (0, 1)  # its last offset, 1; -2 and 3 never applied
        assert got["orders", 1] == (OUT_OF_RANGE, -1)
        assert got["orders", -1] == got["orders", 2] == (UNKNOWN, -1)
        assert got["../etc", 0] == got["", 0] == got["gone", 19_999] == (UNKNOWN, -1)
        assert raw.request(API_VERSIONS, 0, {})["error_code"] == 0
    huge = [{"name": "orders", "partitions": [{"partition_index": 1, "offset": 2**63 - 1}]}]
    answer = raw.request(DELETE_RECORDS, 2, {"topics": huge, "timeout": 0})
    assert answer["topics"][0]["partitions"][0]["error_code"] == OUT_OF_RANGE
    raw.close()
    assert start(log_dir, 0) == 1 and start(log_dir, 1) == 0


def test_delete_records_needs_delete_on_the_topic(acl_server: ServeProcess, log_dir: Path) -> None:
    """Kafka's ``handleDeleteRecordsRequest``: Delete on the TOPIC, else
    TOPIC_AUTHORIZATION_FAILED for each of its partitions, and nothing changes (the grants of
    ``test_admin_delete_grow``: "owner" may delete app-*, "viewer" only describe)."""
    with Log.open(log_dir) as log:
        producer = log.producer()
        for i in range(4):
            producer.send("app-a", b"v%d" % i, partition=0)
        producer.close()
    app = TopicPartition("app-a", 0)
    asked = [KafkaPartition("app-a", 0, 3), KafkaPartition("orders", 0, 5)]
    refused = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert answers(as_user(acl_server, "viewer").delete_records(asked)) == {
        ("app-a", 0): refused,
        ("orders", 0): refused,
    }
    with Log.open(log_dir, read_only=True) as log:
        assert log.partition_reader(app).log_start_offset == 0
    assert answers(as_user(acl_server, "owner").delete_records(asked)) == {
        ("app-a", 0): 3,
        ("orders", 0): refused,
    }
    with Log.open(log_dir, read_only=True) as log:
        assert log.partition_reader(app).log_start_offset == 3
    assert start(log_dir) == 0
