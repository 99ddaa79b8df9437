"""Issue 24, defect 3: every length, count and size of a request is checked against the
bytes in its frame before kio reads it (``txn_wire.frame_bounds``); the wire test with real
servers is ``test_oversized_counts``.

In process, the walk is compared with kio's own reading on a request of every
(api_key, version) the server advertises, and on each of them with every length field set to
each extreme value, and on random flips and cuts; a null array where Kafka's schema has none
is refused too. kio runs only on what the walk accepted (else it could abort this process).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_reader

from tests.txn_wire.frame_samples import advertised, has_schema, mutations, sample_frame
from txn_wire.codec import LENGTH, MalformedRequestError, decode_request, encode_request
from txn_wire.frame_bounds import (
    Encoding,
    FrameBoundsError,
    SchemaWalkError,
    check_request,
    field_map,
    plan_of,
)

PRODUCE, METADATA = 0, 3
DECODABLE = [(key, version) for key, version in advertised() if has_schema(key, version)]


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
