"""Issue 24, defect 3: one small frame whose array declares 2**32-2 elements made kio's
native reader ask for 34 GB and the allocator abort ``txnlog serve``. Now every length,
count and size is checked against the bytes in the frame before kio reads it
(``txn_wire.frame_bounds``).

Over the wire, raw frames to a real server, open and secured (an authenticated principal
without a single ACL: the frame is decoded before authorization). In process, the walk is
compared with kio's own reading on a request of every (api_key, version) the server
advertises, and on each of them with every length field set to each extreme value; a null
array where Kafka's schema has none is refused too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_reader

from tests.txn_wire.auth_clients import plain_login, write_acls, write_users
from tests.txn_wire.frame_samples import advertised, has_schema, mutations, sample_frame
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import WAIT_S, RawClient
from txn_wire.codec import LENGTH, MalformedRequestError, decode_request, encode_request
from txn_wire.frame_bounds import (
    Encoding,
    FrameBoundsError,
    SchemaWalkError,
    check_request,
    field_map,
    plan_of,
)

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18
HUGE_COMPACT = b"\xff\xff\xff\xff\x0f"  # uvarint 2**32-1: a compact array of 2**32-2
NO_CLIENT_ID = struct.pack(">h", -1)
DECODABLE = [(key, version) for key, version in advertised() if has_schema(key, version)]


def metadata_v12_huge_topics() -> bytes:
    """The issue's frame: Metadata v12 whose topics array declares 2**32-2 elements."""
    body = (
        struct.pack(">hhi", METADATA, 12, 1)
        + NO_CLIENT_ID
        + b"\x00"  # header tagged fields
        + HUGE_COMPACT  # topics
        + b"\x01\x00\x00"  # allow_auto_topic_creation, include_..._operations, tagged fields
    )
    return LENGTH.pack(len(body)) + body


def produce_v9_huge_topics() -> bytes:
    body = (
        struct.pack(">hhi", PRODUCE, 9, 1)
        + NO_CLIENT_ID
        + b"\x00"
        + b"\x00"  # transactional_id: null
        + struct.pack(">hi", -1, 30_000)  # acks, timeout
        + HUGE_COMPACT  # topic_data
        + b"\x00"
    )
    return LENGTH.pack(len(body)) + body


def produce_v3_huge_partitions() -> bytes:
    """Legacy (int32) arrays: one topic whose partition_data declares 2**31-1 elements. kio
    asks for 17 GB: on a machine with more memory than that the (lazy) allocation succeeds
    and kio then fails on the missing elements, so this one crashes small machines only."""
    body = (
        struct.pack(">hhi", PRODUCE, 3, 1)
        + NO_CLIENT_ID
        + struct.pack(">h", -1)  # transactional_id: null
        + struct.pack(">hi", -1, 30_000)
        + struct.pack(">i", 1)  # one topic
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">i", 2**31 - 1)  # partition_data
    )
    return LENGTH.pack(len(body)) + body


HOSTILE = {
    "metadata-v12-compact-2^32-2": metadata_v12_huge_topics(),
    "produce-v9-compact-2^32-2": produce_v9_huge_topics(),
    "produce-v3-int32-2^31-1": produce_v3_huge_partitions(),
}


@pytest.fixture(params=["open", "secured"])
def hostile_target(
    request: pytest.FixtureRequest, log_dir: Path, tmp_path: Path
) -> Iterator[tuple[ServeProcess, RawClient]]:
    """A server and a connection that may send requests: on an open server any client; on a
    secured one alice, authenticated, with no ACL of her own (only bob has one)."""
    if request.param == "open":
        served = start_serve(log_dir)
    else:
        users = write_users(tmp_path / "users.json", {"alice": "a-secret", "bob": "b-secret"})
        acls = write_acls(tmp_path / "acls.txt", ["User:bob topic orders Describe allow"])
        served = start_serve(log_dir, "--users-file", str(users), "--acl-file", str(acls))
    try:
        client = (
            RawClient(served.port)
            if request.param == "open"
            else plain_login(served.port, "alice", "a-secret")
        )
        yield served, client
        client.close()
    finally:
        served.stop()


def assert_alive(served: ServeProcess, what: str) -> None:
    """AssertionError with the server's exit code and first line of stderr if it is gone."""
    code = served.process.poll()
    if code is not None:
        err = served.process.stderr.read() if served.process.stderr else ""
        first = err.strip().splitlines()[0] if err.strip() else "(no stderr)"
        raise AssertionError(f"txnlog serve died (exit {code}) after {what}: {first}")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_count_larger_than_its_frame_closes_the_connection_not_the_server(
    hostile_target: tuple[ServeProcess, RawClient], name: str
) -> None:
    served, client = hostile_target
    frame = HOSTILE[name]
    what = f"one {len(frame)}-byte frame ({name})"
    client.send_bytes(frame)
    closed = client.is_closed_by_server()
    try:
        bystander = RawClient(served.port)
        versions = bystander.request(
            API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        bystander.close()
    except OSError:  # refused or reset: the server is going or gone; say how it ended
        with contextlib.suppress(subprocess.TimeoutExpired):
            served.process.wait(timeout=WAIT_S)
        assert_alive(served, what)
        raise
    assert_alive(served, what)
    assert closed, "the connection that sent the frame stays open"
    assert versions["error_code"] == 0


@pytest.mark.parametrize(("api_key", "version"), DECODABLE)
def test_the_walk_ends_where_kio_ends_on_every_advertised_request(
    api_key: int, version: int
) -> None:
    frame = sample_frame(api_key, version)[LENGTH.size :]
    schema = load_request_schema(api_key, version)
    _, header_size = entity_reader(schema.__header_schema__)(frame, 0)
    _, body_size = entity_reader(schema)(frame, header_size)
    assert check_request(schema, frame) == header_size + body_size == len(frame)
    lengths = field_map(schema, frame)
    assert lengths, "a sample request without a single length field"
    assert [f.offset for f in lengths] == sorted({f.offset for f in lengths})
    assert decode_request(frame).api_key == api_key


@pytest.mark.parametrize(("api_key", "version"), DECODABLE)
def test_every_length_field_at_an_extreme_is_refused_unless_it_says_null(
    api_key: int, version: int
) -> None:
    """Every extreme but null (negative, 2**31-1, 2**32-2, the largest varint, one more
    than fits, an overlong varint) cannot fit and is refused, and decode_request says so.
    Null (-1) is a valid length, but the bytes it leaves behind are read as what follows:
    the walk may refuse it or not; what it accepts, kio reads to the same end."""
    schema = load_request_schema(api_key, version)
    for mutation in mutations(api_key, version):
        frame = mutation.frame[LENGTH.size :]
        if mutation.value != -1:
            with pytest.raises(FrameBoundsError):
                check_request(schema, frame)
            with pytest.raises(MalformedRequestError, match="refused before decoding"):
                decode_request(frame)
            continue
        assert mutation.field.encoding not in (Encoding.TAGGED_COUNT, Encoding.TAGGED_SIZE)
        try:
            end = check_request(schema, frame)
        except FrameBoundsError:
            continue
        assert_kio_agrees(schema, frame, end, mutation.describe())


def assert_kio_agrees(schema: type[object], frame: bytes, end: int, what: str) -> None:
    """kio, run only on what the walk accepted, ends where the walk ended, or refuses."""
    try:
        _, header_size = entity_reader(schema.__header_schema__)(frame, 0)  # type: ignore[attr-defined]
        _, body_size = entity_reader(schema)(frame, header_size)  # type: ignore[type-var]
    except Exception:
        return  # kio refuses it for another reason (a null where none may be): safe
    assert header_size + body_size == end, f"kio read {header_size + body_size}: {what}"


@settings(max_examples=3000, deadline=None)
@given(
    st.sampled_from(DECODABLE),
    st.integers(0, 400),
    st.binary(min_size=1, max_size=6),
    st.booleans(),
)
def test_any_flipped_or_truncated_request_the_walk_accepts_kio_reads_to_the_same_end(
    which: tuple[int, int], at: int, written: bytes, truncate: bool
) -> None:
    frame = sample_frame(*which)[LENGTH.size :]
    at = min(at, len(frame))
    frame = frame[:at] if truncate else frame[:at] + written + frame[at + len(written) :]
    schema = load_request_schema(*which)
    try:
        end = check_request(schema, frame)
    except FrameBoundsError:
        return
    assert_kio_agrees(schema, frame, end, f"{which} {'cut' if truncate else written!r} @{at}")


def test_a_null_array_is_refused_where_kafkas_schema_has_no_null() -> None:
    """kio reads null for any array; Kafka refuses it for a non-nullable one, and handlers
    iterate such arrays (they raised TypeError on None)."""
    produce = bytearray(sample_frame(PRODUCE, 9)[LENGTH.size :])
    schema = load_request_schema(PRODUCE, 9)
    [topic_data] = [f for f in field_map(schema, bytes(produce)) if f.where.endswith("topic_data")]
    produce[topic_data.offset] = 0  # compact null; the one topic's bytes follow, unread
    with pytest.raises(FrameBoundsError, match="topic_data: null at offset 28"):
        check_request(schema, bytes(produce))
    metadata = encode_request(METADATA, 12, 1, {"topics": None})[LENGTH.size :]
    assert decode_request(metadata).body["topics"] is None  # nullable: all topics


def test_a_field_type_the_walk_does_not_know_is_refused_not_passed_on() -> None:
    mystery = dataclasses.make_dataclass(
        "Mystery",
        [("value", int, dataclasses.field(metadata={"kafka_type": "int96"}))],
        namespace={"__flexible__": False},
        frozen=True,
    )
    with pytest.raises(SchemaWalkError, match="int96"):
        plan_of(mystery)
