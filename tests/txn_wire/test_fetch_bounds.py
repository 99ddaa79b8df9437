"""What a Fetch or ListOffsets may ask, bounded and checked as Kafka's broker does
(``KafkaApis.handleFetchRequest``, ``ReplicaManager.fetchOffset``): a hostile or buggy client
gets a bounded answer or a clear error, never an unbounded read or another isolation level's
data. Raw frames (no real client sends these)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_wire.fetch import FETCH_MAX_BYTES

FETCH, LIST_OFFSETS = 1, 2
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
P0 = TopicPartition("orders", 0)


def _fetch(
    partitions: list[dict[str, Any]],
    *,
    max_bytes: int = 0x7FFFFFFF,
    min_bytes: int = 1,
    max_wait: int = 0,
    isolation: int = 0,
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": max_wait,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": "orders", "partitions": partitions}] if partitions else [],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _asked(partition: int, offset: int = 0) -> dict[str, Any]:
    return {
        "partition": partition,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 0x7FFFFFFF,
    }


def test_a_partition_named_many_times_is_read_once_and_the_answer_capped(
    log_dir: Path, server: ServeProcess
) -> None:
    """64 MiB in the partition, asked 200 times with max_bytes 2 GiB: the answer names the
    partition once and carries at most fetch.max.bytes (55 MiB) of records. Before: 200
    copies of the partition's records (a ~60 KB request asking for gigabytes)."""
    with Log.open(log_dir) as log:
        producer = log.producer()
        for i in range(64):
            producer.send("orders", value=bytes([i]) * (1024 * 1024 - 200), partition=0)
            producer.flush()
        producer.close()
    raw = RawClient(server.port)
    try:
        answer = raw.request(FETCH, 12, _fetch([_asked(0) for _ in range(200)]))
        partitions = answer["responses"][0]["partitions"]
        assert [p["partition_index"] for p in partitions] == [0]
        size = len(partitions[0]["records"])
        assert 0 < size <= FETCH_MAX_BYTES, size
        assert size >= FETCH_MAX_BYTES - 2 * 1024 * 1024  # filled up to the cap, not less
        twice = raw.request(FETCH, 12, _fetch([_asked(0, 0), _asked(1), _asked(0, 10)]))
        offsets = [p["partition_index"] for p in twice["responses"][0]["partitions"]]
        assert offsets == [0, 1]  # first places kept; partition 0 read at its last offset
        assert twice["responses"][0]["partitions"][0]["records"][:8] == (10).to_bytes(8, "big")
    finally:
        raw.close()


def test_an_unknown_isolation_level_is_refused_not_read_uncommitted(
    log_dir: Path, server: ServeProcess
) -> None:
    """isolation_level 2 (or -1) with a transaction open: Fetch and ListOffsets answer
    INVALID_REQUEST for every partition. Before: read as read_uncommitted, the open
    transaction's records and the high watermark were handed out."""
    with Log.open(log_dir) as log:
        producer = log.producer("open-txn")
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("orders", value=b"uncommitted", partition=0)
        producer.flush()
        raw = RawClient(server.port)
        try:
            for level in (2, -1):
                answer = raw.request(FETCH, 12, _fetch([_asked(0)], isolation=level))
                partition = answer["responses"][0]["partitions"][0]
                assert partition["error_code"] == INVALID_REQUEST, partition
                assert partition["records"] in (b"", None)
                listed = raw.request(LIST_OFFSETS, 7, _list(level, -1))
                assert listed["topics"][0]["partitions"][0]["error_code"] == INVALID_REQUEST
            committed = raw.request(LIST_OFFSETS, 7, _list(1, -1))["topics"][0]["partitions"][0]
            assert committed["error_code"] == 0 and committed["offset"] == 0  # the LSO
        finally:
            raw.close()
            producer.abort_transaction()
            producer.close()


def _list(isolation: int, timestamp: int) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [
            {
                "name": "orders",
                "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                ],
            }
        ],
    }


def test_list_offsets_refuses_timestamps_its_version_cannot_answer(
    log_dir: Path, server: ServeProcess
) -> None:
    """-3 (max timestamp) needs v7; -4 and -5 (KIP-405) are not served: UNSUPPORTED_VERSION;
    other negative values INVALID_REQUEST. Before: each was searched as a timestamp and
    answered with the first record's offset."""
    with Log.open(log_dir) as log:
        producer = log.producer()
        for i in range(3):
            producer.send("orders", value=b"v", partition=0, timestamp_ms=1_000 + i)
        producer.flush()
        producer.close()
    raw = RawClient(server.port)

    def code(version: int, timestamp: int) -> tuple[int, int]:
        answer = raw.request(LIST_OFFSETS, version, _list(0, timestamp))
        partition = answer["topics"][0]["partitions"][0]
        return partition["error_code"], partition.get("offset", -1)

    try:
        assert code(7, -3) == (0, 2)  # the newest timestamp's offset
        assert code(6, -3)[0] == UNSUPPORTED_VERSION
        assert code(7, -4)[0] == UNSUPPORTED_VERSION
        assert code(7, -5)[0] == UNSUPPORTED_VERSION
        assert code(7, -6)[0] == INVALID_REQUEST
        assert code(7, -1) == (0, 3)
        assert code(7, -2) == (0, 0)
    finally:
        raw.close()


def test_min_bytes_zero_and_an_empty_fetch_answer_at_once(server: ServeProcess) -> None:
    """Kafka answers a Fetch at once when min_bytes is 0 or it names no partition; a long
    poll (here max_wait 120 s) would leave the client waiting. The socket gives up after 15 s,
    which fails the test if the server waits."""
    raw = RawClient(server.port)
    raw.sock.settimeout(15)
    try:
        empty = raw.request(FETCH, 12, _fetch([_asked(0)], min_bytes=0, max_wait=120_000))
        assert empty["responses"][0]["partitions"][0]["records"] in (b"", None)
        nothing = raw.request(FETCH, 12, _fetch([], max_wait=120_000))
        assert nothing["responses"] == []
    finally:
        raw.close()
