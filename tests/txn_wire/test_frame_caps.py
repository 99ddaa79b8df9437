"""Issue 24, defect 4: frame caps, before and after authentication (R-12).

A connection that has not authenticated may announce at most sasl.server.max.receive.size
(512 KiB, ``--sasl-max-receive-size``) a frame, requests and bare SASL tokens alike; a larger
length prefix closes the connection at once, before a byte of the body is read (it used to
wait for 100 MiB from anybody). After authentication, and on a server without SASL, the cap
is socket.request.max.bytes (``--socket-request-max-bytes``, 100 MiB). Raw frames to real
``txnlog serve`` processes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.txn_wire.auth_clients import SASL_HANDSHAKE, plain_login, write_users
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_log.record.codec import encode_records
from txn_log.topic_partition import TopicPartition
from txn_wire.broker import ServeConfig
from txn_wire.codec import LENGTH, decode_response, encode_request

PRODUCE, API_VERSIONS = 0, 18
NOW = 1_700_000_000_000
HUNDRED_MIB = 100 * 1024 * 1024
SASL_MAX_RECEIVE_SIZE = 524288  # Kafka's default sasl.server.max.receive.size
SOCKET_REQUEST_MAX_BYTES = 104857600  # Kafka's default socket.request.max.bytes
CLOSE_WAIT_S = 10  # a refused length closes at once; a server reading the body never does
USERS = {"alice": "alice-secret"}


@pytest.fixture
def log_with_big_topic(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("big", 1, {"max.message.bytes": 8 * 1024 * 1024})
    return path


def sasl_serve(path: Path, tmp_path: Path, *extra: str) -> ServeProcess:
    users = write_users(tmp_path / "users.json", USERS)
    return start_serve(path, "--users-file", str(users), *extra)


def closed_at_once(client: RawClient) -> bool:
    """Whether the server closes the connection within CLOSE_WAIT_S (False: it still waits
    for the rest of the frame)."""
    client.sock.settimeout(CLOSE_WAIT_S)
    try:
        return client.is_closed_by_server()
    except TimeoutError:
        return False


def exactly(size: int, build: Callable[[int], bytes]) -> bytes:
    """``build(n)`` (a length-prefixed frame growing with n) for the n that makes the frame,
    without its prefix, ``size`` bytes long."""
    n = size
    for _ in range(8):
        frame = build(n)
        excess = len(frame) - LENGTH.size - size
        if excess == 0:
            return frame
        n -= excess
    raise AssertionError(f"no frame of exactly {size} bytes")


def api_versions_of(size: int) -> bytes:
    """A valid ApiVersions v3 request of ``size`` bytes (a long client software name)."""
    return exactly(
        size,
        lambda n: encode_request(
            API_VERSIONS, 3, 1, {"client_software_name": "a" * n, "client_software_version": "1"}
        ),
    )


def produce_of(size: int) -> bytes:
    """A valid Produce v9 request to "big" of ``size`` bytes (one record, a long value)."""

    def build(n: int) -> bytes:
        records = encode_records([(None, b"v" * n, NOW, ())], now_ms=NOW)
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout": 30_000,
            "topic_data": [{"name": "big", "partition_data": [{"index": 0, "records": records}]}],
        }
        return encode_request(PRODUCE, 9, 1, body)

    return exactly(size, build)


def produce_error(client: RawClient, frame: bytes) -> int:
    client.send_bytes(frame)
    _, answer = decode_response(PRODUCE, 9, client.read_frame())
    code: int = answer["responses"][0]["partition_responses"][0]["error_code"]
    return code


def test_the_defaults_are_kafkas() -> None:
    config = ServeConfig()
    assert config.max_request_bytes == SOCKET_REQUEST_MAX_BYTES
    assert getattr(config, "sasl_max_receive_size", None) == SASL_MAX_RECEIVE_SIZE


@pytest.fixture
def sasl_server(log_with_big_topic: Path, tmp_path: Path) -> Iterator[ServeProcess]:
    served = sasl_serve(log_with_big_topic, tmp_path)
    try:
        yield served
    finally:
        served.stop()


@pytest.mark.parametrize("stage", ["first-frame", "after-handshake-v1", "bare-token-after-v0"])
def test_an_unauthenticated_100_MiB_length_prefix_is_refused_at_once_R12(
    sasl_server: ServeProcess, stage: str
) -> None:
    client = RawClient(sasl_server.port)
    if stage != "first-frame":
        version = 1 if stage == "after-handshake-v1" else 0
        handshake = client.request(SASL_HANDSHAKE, version, {"mechanism": "PLAIN"})
        assert handshake["error_code"] == 0
    client.send_bytes(LENGTH.pack(HUNDRED_MIB))  # and never the body
    assert closed_at_once(client), (
        f"the server still waits, {CLOSE_WAIT_S} s on, for the body of a {HUNDRED_MIB}-byte "
        f"frame from a connection that has not authenticated ({stage})"
    )
    client.close()
    assert plain_login(sasl_server.port, "alice", "alice-secret") is not None
    assert sasl_server.process.poll() is None


@pytest.mark.parametrize("cap", [None, 4096], ids=["default-512KiB", "option-4096"])
def test_before_authentication_frames_up_to_sasl_max_receive_size_are_read(
    log_with_big_topic: Path, tmp_path: Path, cap: int | None
) -> None:
    extra = () if cap is None else ("--sasl-max-receive-size", str(cap))
    limit = cap or SASL_MAX_RECEIVE_SIZE
    served = sasl_serve(log_with_big_topic, tmp_path, *extra)
    try:
        at_cap = RawClient(served.port)
        at_cap.send_bytes(api_versions_of(limit))
        _, answer = decode_response(API_VERSIONS, 3, at_cap.read_frame())
        assert answer["error_code"] == 0
        at_cap.close()
        over = RawClient(served.port)
        over.send_bytes(api_versions_of(limit + 1)[: LENGTH.size])  # the length only
        assert closed_at_once(over), f"a {limit + 1}-byte frame before authentication is read"
        over.close()
        # once authenticated, the same frame is read
        alice = plain_login(served.port, "alice", "alice-secret")
        alice.send_bytes(api_versions_of(limit + 1))
        assert decode_response(API_VERSIONS, 3, alice.read_frame())[1]["error_code"] == 0
        alice.close()
    finally:
        served.stop()


def test_an_authenticated_connection_may_send_up_to_socket_request_max_bytes(
    log_with_big_topic: Path, tmp_path: Path
) -> None:
    cap = 2 * 1024 * 1024
    served = sasl_serve(log_with_big_topic, tmp_path, "--socket-request-max-bytes", str(cap))
    try:
        alice = plain_login(served.port, "alice", "alice-secret")
        assert produce_error(alice, produce_of(cap)) == 0
        alice.send_bytes(produce_of(cap + 1)[: LENGTH.size])
        assert closed_at_once(alice), f"a {cap + 1}-byte frame over the cap is read"
        alice.close()
    finally:
        served.stop()
    with Log.open(log_with_big_topic) as log:
        reader = log.partition_reader(TopicPartition("big", 0))
        assert reader.log_end_offset == 1  # the request at the cap, once


def test_without_sasl_every_connection_has_socket_request_max_bytes_from_the_start(
    log_with_big_topic: Path,
) -> None:
    served = start_serve(log_with_big_topic)
    try:
        client = RawClient(served.port)
        assert produce_error(client, produce_of(SASL_MAX_RECEIVE_SIZE * 2)) == 0
        client.send_bytes(LENGTH.pack(SOCKET_REQUEST_MAX_BYTES + 1))
        assert closed_at_once(client)
        client.close()
    finally:
        served.stop()


def test_a_cap_that_is_not_a_positive_number_stops_serve_before_it_listens(
    log_with_big_topic: Path,
) -> None:
    with pytest.raises(RuntimeError, match="positive number"):
        start_serve(log_with_big_topic, "--sasl-max-receive-size", "0")
