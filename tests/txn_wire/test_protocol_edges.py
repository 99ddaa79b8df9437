"""What no well-behaved client sends, sent over a raw socket to a real ``txnlog serve``:
Kafka's error codes for bad batches and producer states (§7), and bad frames that close one
connection, never the server, and never touch the log."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import directory_bytes
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_log.record.codec import encode_records
from txn_log.record.control import ControlType, encode_control_batch
from txn_log.topic_partition import TopicPartition
from txn_wire.codec import decode_response, encode_request

PRODUCE, INIT_PRODUCER_ID, API_VERSIONS = 0, 22, 18
NOW = 1_700_000_000_000


@pytest.fixture
def client(server: ServeProcess) -> Iterator[RawClient]:
    raw = RawClient(server.port)
    yield raw
    raw.close()


def batch(values: list[bytes], **options: object) -> bytes:
    return encode_records([(None, v, NOW, ()) for v in values], now_ms=NOW, **options)


def produce(
    client: RawClient, records: bytes, *, topic: str = "orders", txn: str | None = None
) -> dict[str, object]:
    body = {
        "transactional_id": txn,
        "acks": -1,
        "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    response = client.request(PRODUCE, 9, body)
    partition: dict[str, object] = response["responses"][0]["partition_responses"][0]
    return partition


def fresh_producer_id(client: RawClient) -> int:
    answer = client.request(
        INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60_000}
    )
    assert answer["error_code"] == 0
    producer_id: int = answer["producer_id"]
    return producer_id


def test_api_versions_lists_what_is_served_and_answers_an_unknown_version_as_kafka(
    client: RawClient,
) -> None:
    answer = client.request(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    assert answer["error_code"] == 0
    assert ranges[PRODUCE] == (3, 9) and ranges[1] == (4, 12) and ranges[INIT_PRODUCER_ID] == (0, 4)
    # an ApiVersions version the server does not speak: UNSUPPORTED_VERSION in a v0 response
    frame = bytearray(encode_request(API_VERSIONS, 3, 77, {}))
    struct.pack_into(">h", frame, 6, 99)  # the api_version field after length and api_key
    client.send_bytes(bytes(frame))
    correlation_id, fallback = decode_response(API_VERSIONS, 0, client.read_frame())
    assert correlation_id == 77
    assert fallback["error_code"] == 35
    assert {k["api_key"] for k in fallback["api_keys"]} == set(ranges)


def test_produce_errors_carry_kafkas_codes_and_write_nothing_E02_E03_F31(
    server: ServeProcess, client: RawClient
) -> None:
    producer_id = fresh_producer_id(client)
    good = batch([b"a", b"b"], producer_id=producer_id, producer_epoch=0, base_sequence=0)
    first = produce(client, good)
    assert (first["error_code"], first["base_offset"]) == (0, 0)
    before = directory_bytes(server.path, content_only=True)

    # a retried batch: NONE with the original offsets, nothing written (E-01)
    retried = produce(client, good)
    assert (retried["error_code"], retried["base_offset"]) == (0, 0)
    # a sequence gap: OUT_OF_ORDER_SEQUENCE_NUMBER (E-02)
    gap = batch([b"c"], producer_id=producer_id, producer_epoch=0, base_sequence=5)
    assert produce(client, gap)["error_code"] == 45
    # a wrong CRC: CORRUPT_MESSAGE
    corrupt = bytearray(batch([b"d"]))
    corrupt[-1] ^= 0xFF
    assert produce(client, bytes(corrupt))["error_code"] == 2
    # a length field pointing past the data: CORRUPT_MESSAGE
    assert produce(client, batch([b"e"])[:-3])["error_code"] == 2
    # a control batch from a client (F-31, B-19): INVALID_RECORD
    marker = encode_control_batch(
        ControlType.COMMIT,
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp_ms=NOW,
    )
    assert produce(client, marker, txn="t")["error_code"] == 87
    # ... and without a transactional id, refused whole as KafkaApis does (a marker is a
    # transactional batch): TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(client, marker)["error_code"] == 53
    # an unknown topic
    assert produce(client, batch([b"f"]), topic="nowhere")["error_code"] == 3
    assert directory_bytes(server.path, content_only=True) == before

    # an older epoch after a newer one: INVALID_PRODUCER_EPOCH (E-03)
    newer = batch([b"g"], producer_id=producer_id, producer_epoch=1, base_sequence=0)
    assert produce(client, newer)["error_code"] == 0
    older = batch([b"h"], producer_id=producer_id, producer_epoch=0, base_sequence=2)
    assert produce(client, older)["error_code"] == 47


def test_a_batch_over_max_message_bytes_is_MESSAGE_TOO_LARGE(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("small", 1, {"max.message.bytes": 200})
    served = start_serve(path)
    try:
        raw = RawClient(served.port)
        assert produce(raw, batch([b"x" * 300]), topic="small")["error_code"] == 10
        assert produce(raw, batch([b"x" * 10]), topic="small")["error_code"] == 0
        raw.close()
    finally:
        served.stop()


def test_a_transactional_produce_to_a_partition_not_in_the_transaction_is_refused_KIP890(
    server: ServeProcess, client: RawClient
) -> None:
    answer = client.request(
        INIT_PRODUCER_ID, 4, {"transactional_id": "kip890", "transaction_timeout": 60_000}
    )
    pid, epoch = answer["producer_id"], answer["producer_epoch"]
    records = batch(
        [b"hanging"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
    )
    refused = produce(client, records, txn="kip890")
    assert refused["error_code"] == 48  # INVALID_TXN_STATE: abortable for librdkafka
    added = client.request(
        24,
        3,
        {
            "v3_and_below_transactional_id": "kip890",
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": "orders", "partitions": [0]}],
        },
    )
    assert (
        added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"]
        == 0
    )
    accepted = produce(client, records, txn="kip890")
    assert (accepted["error_code"], accepted["base_offset"]) == (0, 0)


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">i", 200 * 1024 * 1024),  # over socket.request.max.bytes: never read
        struct.pack(">i", -5),
        struct.pack(">i", 3) + b"abc",  # shorter than a request header
        struct.pack(">i", 12) + struct.pack(">hhi", 999, 0, 1) + b"\0\0\0\0",  # unknown api
        struct.pack(">i", 10) + struct.pack(">hhi", PRODUCE, 9, 1) + b"\xff\xff",  # garbage
        struct.pack(">i", 50) + b"only part of it",  # the client vanishes mid-frame
    ],
    ids=["oversize", "negative", "short", "unknown-api", "garbage", "truncated"],
)
def test_a_bad_frame_closes_that_connection_only_and_touches_nothing(
    server: ServeProcess, frame: bytes
) -> None:
    before = directory_bytes(server.path, content_only=True)
    bad = RawClient(server.port)
    bystander = RawClient(server.port)
    bad.send_bytes(frame)
    if not frame.endswith(b"only part of it"):
        assert bad.is_closed_by_server()
    bad.close()
    answer = bystander.request(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    assert answer["error_code"] == 0
    bystander.close()
    assert server.process.poll() is None
    assert directory_bytes(server.path, content_only=True) == before


def test_init_producer_id_bumps_only_the_current_producers_epoch_KIP360_R05(
    client: RawClient,
) -> None:
    def init(version: int, **fields: object) -> dict[str, object]:
        body = {"transactional_id": "kip360", "transaction_timeout": 60_000, **fields}
        return client.request(INIT_PRODUCER_ID, version, body)

    first = init(4)
    pid, epoch = first["producer_id"], first["producer_epoch"]
    bumped = init(4, producer_id=pid, producer_epoch=epoch)
    assert (bumped["error_code"], bumped["producer_id"], bumped["producer_epoch"]) == (
        0,
        pid,
        epoch + 1,  # type: ignore[operator]
    )
    assert init(4, producer_id=pid, producer_epoch=epoch)["error_code"] == 90  # PRODUCER_FENCED
    assert init(3, producer_id=pid, producer_epoch=epoch)["error_code"] == 47  # before KIP-588
    assert init(4, producer_id=pid + 1, producer_epoch=epoch + 1)["error_code"] == 90  # type: ignore[operator]
    too_long = client.request(
        INIT_PRODUCER_ID, 4, {"transactional_id": "kip360", "transaction_timeout": 10**9}
    )
    assert too_long["error_code"] == 50  # INVALID_TRANSACTION_TIMEOUT (E-11)


def fetch(
    client: RawClient, offsets: dict[int, int], partition_max_bytes: int, max_bytes: int
) -> dict[int, dict[str, object]]:
    body = {
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "topics": [
            {
                "topic": "orders",
                "partitions": [
                    {"partition": p, "fetch_offset": o, "partition_max_bytes": partition_max_bytes}
                    for p, o in offsets.items()
                ],
            }
        ],
    }
    answer = client.request(1, 12, body)
    return {p["partition_index"]: p for p in answer["responses"][0]["partitions"]}


def test_fetch_returns_whole_batches_within_kip74_limits_R01(client: RawClient) -> None:
    batches = [batch([f"{n}-{i}".encode() * 10 for i in range(5)]) for n in range(3)]
    for records in batches:
        for partition in (0, 1):
            body = {
                "transactional_id": None,
                "acks": -1,
                "timeout": 30_000,
                "topic_data": [
                    {"name": "orders", "partition_data": [{"index": partition, "records": records}]}
                ],
            }
            assert (
                client.request(PRODUCE, 9, body)["responses"][0]["partition_responses"][0][
                    "error_code"
                ]
                == 0
            )
    size = len(batches[0])

    # from the middle of the first batch: that whole batch, untouched but for its base offset
    middle = fetch(client, {0: 2}, partition_max_bytes=1 << 20, max_bytes=1 << 20)[0]
    returned = middle["records"]
    assert isinstance(returned, bytes) and len(returned) == 3 * size
    for i, original in enumerate(batches):
        got = returned[i * size : (i + 1) * size]
        assert int.from_bytes(got[:8], "big") == 5 * i  # the offset the log assigned
        assert got[8:] == original[8:]  # everything else as the client sent it
    assert (middle["high_watermark"], middle["last_stable_offset"]) == (15, 15)

    # partition_max_bytes below one batch: the first batch still comes (KIP-74), no more
    small = fetch(client, {0: 0, 1: 0}, partition_max_bytes=size // 2, max_bytes=1 << 20)
    assert len(small[0]["records"]) == size
    assert small[1]["records"] == b""  # not the first partition: its batch does not fit
    # max_bytes for the whole response: two batches of partition 0, none of partition 1
    capped = fetch(client, {0: 0, 1: 0}, partition_max_bytes=1 << 20, max_bytes=2 * size)
    assert (len(capped[0]["records"]), len(capped[1]["records"])) == (2 * size, 0)
    # past the end: OFFSET_OUT_OF_RANGE; at the end: nothing, no error
    assert fetch(client, {0: 16}, 1 << 20, 1 << 20)[0]["error_code"] == 1
    at_end = fetch(client, {0: 15}, 1 << 20, 1 << 20)[0]
    assert (at_end["error_code"], at_end["records"]) == (0, b"")


def test_acks_0_gets_no_answer_and_the_next_request_is_answered_in_order(
    server: ServeProcess, client: RawClient
) -> None:
    body = {
        "transactional_id": None,
        "acks": 0,
        "timeout": 30_000,
        "topic_data": [
            {"name": "orders", "partition_data": [{"index": 1, "records": batch([b"fire"])}]}
        ],
    }
    client.correlation_id += 1
    client.send_bytes(encode_request(PRODUCE, 9, client.correlation_id, body))
    answer = client.request(
        2,
        6,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": "orders", "partitions": [{"partition_index": 1, "timestamp": -1}]}],
        },
    )
    assert answer["topics"][0]["partitions"][0]["offset"] == 1  # the acks=0 record is there


def test_read_committed_fetch_lists_exactly_the_aborted_transactions_B12(
    server: ServeProcess, client: RawClient
) -> None:
    with Log.open(server.path) as log:
        for commit in (True, False, True, False):
            producer = log.producer("aborter")
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("orders", b"x", partition=0)
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
        reader = log.partition_reader(TopicPartition("orders", 0))
        expected = [(t.producer_id, t.first_offset) for t in reader.collect_aborted_txns(0, 8)]
    assert len(expected) == 2
    body = {
        "max_wait": 0,
        "min_bytes": 1,
        "isolation_level": 1,
        "topics": [
            {
                "topic": "orders",
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    committed = client.request(1, 12, body)["responses"][0]["partitions"][0]
    assert [
        (t["producer_id"], t["first_offset"]) for t in committed["aborted_transactions"]
    ] == expected
    assert (committed["high_watermark"], committed["last_stable_offset"]) == (8, 8)
    uncommitted = client.request(1, 12, {**body, "isolation_level": 0})["responses"][0][
        "partitions"
    ][0]
    assert uncommitted["aborted_transactions"] is None  # read_uncommitted: no list, as Kafka


def test_auto_create_topics_when_configured(tmp_path: Path) -> None:
    served = start_serve(tmp_path / "log", "--auto-create-topics", "--default-partitions", "3")
    try:
        raw = RawClient(served.port)
        assert produce(raw, batch([b"new"]), topic="fresh")["error_code"] == 0
        answer = raw.request(
            3, 12, {"topics": [{"name": "also-new"}], "allow_auto_topic_creation": True}
        )
        assert len(answer["topics"][0]["partitions"]) == 3
        refused = raw.request(
            3, 12, {"topics": [{"name": "not-this"}], "allow_auto_topic_creation": False}
        )
        assert refused["topics"][0]["error_code"] == 3
        raw.close()
    finally:
        served.stop()
    with Log.open(tmp_path / "log") as log:
        assert {"fresh", "also-new"} <= set(log.topics()) and "not-this" not in log.topics()


def test_hundreds_of_idle_connections_do_not_stop_the_server_answering(
    server: ServeProcess,
) -> None:
    idle = [RawClient(server.port) for _ in range(300)]
    versions = {"client_software_name": "t", "client_software_version": "1"}
    fresh = RawClient(server.port)
    assert fresh.request(API_VERSIONS, 3, versions)["error_code"] == 0
    fresh.close()
    assert all(c.request(API_VERSIONS, 3, versions)["error_code"] == 0 for c in idle[::30])
    for c in idle:
        c.close()
