"""Zigzag varints and varlongs (F-19): fixed vectors, round trips, Kafka's limits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import util as kafka_util

from txn_log.errors import CorruptRecordError
from txn_log.record.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    decode_mostly_short_varint_array,
    decode_short_varint_array,
    decode_varint,
    decode_varint_array,
    decode_varlong,
    encode_varint,
    encode_varlong,
    pair_view,
    size_of_varint,
    unzigzag,
    varint_sizes,
    zigzag,
    zigzag_array,
)

int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)

# F-19: zigzag then base-128, least significant group first (protobuf sint32 / sint64).
FIXED_VARINTS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (8192, "808001"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "encoded"), FIXED_VARINTS)
def test_fixed_varint_vectors_f19(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)
    assert size_of_varint(value) == len(encoded) // 2


def test_fixed_varlong_extremes() -> None:
    assert encode_varlong(INT64_MAX).hex() == "fe" + "ff" * 8 + "01"
    assert encode_varlong(INT64_MIN).hex() == "ff" * 9 + "01"
    assert decode_varlong(bytes.fromhex("ff" * 9 + "01")) == (INT64_MIN, 10)


def test_zigzag_maps_small_magnitudes_to_small_numbers() -> None:
    assert [zigzag(v) for v in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]
    assert [unzigzag(u) for u in (0, 1, 2, 3, 4)] == [0, -1, 1, -2, 2]


@given(int32s)
def test_varint_round_trip_and_matches_kafka_python(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))
    out = bytearray()
    kafka_util.encode_varint(value, out.append)
    assert bytes(out) == encoded


@given(int64s)
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert decode_varlong(encoded) == (value, len(encoded))
    assert size_of_varint(value) == len(encoded) <= 10


# --- test oracles: whole-array encoding in one matrix ------------------------------------------


def encode_varint_array(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sizes, matrix)`` for a whole int64 array, without a Python loop per element: the
    straightforward form of what the columnar encoder writes field by field.

    ``matrix`` is a C-ordered ``(len(values), width)`` uint8 array, ``width`` the largest
    size; row ``i`` holds the encoding of ``values[i]`` in its first ``sizes[i]`` bytes and
    zeros after. ``matrix[np.arange(width) < sizes[:, None]]`` is the concatenation of all
    encodings in order.
    """
    raw = zigzag_array(values)
    sizes = varint_sizes(values)
    width = int(sizes.max()) if sizes.size else 1
    matrix = np.empty((raw.shape[0], width), dtype=np.uint8)
    for group in range(width):
        septet = (raw >> np.uint64(7 * group)) & np.uint64(0x7F)
        more = sizes > group + 1
        matrix[:, group] = septet.astype(np.uint8) | (more.astype(np.uint8) << 7)
    if width > 1:
        matrix[np.arange(width) >= sizes[:, None]] = 0
    return sizes, matrix


def encode_varints(values: np.ndarray) -> bytes:
    """The concatenated zigzag encodings of an int64 array."""
    sizes, matrix = encode_varint_array(values)
    return bytes(matrix[np.arange(matrix.shape[1]) < sizes[:, None]].tobytes())


@settings(max_examples=50)
@given(st.lists(int64s, min_size=1, max_size=50))
def test_array_encode_equals_scalar_and_decodes_back(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    expected = b"".join(encode_varlong(v) for v in values)
    assert encode_varints(array) == expected
    sizes, matrix = encode_varint_array(array)
    assert sizes.tolist() == [len(encode_varlong(v)) for v in values]
    assert matrix.shape == (len(values), max(sizes))
    positions = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    buf = np.frombuffer(expected, dtype=np.uint8)
    decoded, decoded_sizes = decode_varint_array(buf, positions, 10)
    assert decoded.tolist() == values
    assert np.broadcast_to(decoded_sizes, sizes.shape).tolist() == sizes.tolist()


@settings(max_examples=50)
@given(st.lists(st.integers(-8192, 8191), min_size=1, max_size=50))
def test_short_decoder_matches_full_decoder(values: list[int]) -> None:
    data = b"".join(encode_varint(v) for v in values) + b"\x00"
    sizes = varint_sizes(np.array(values))
    positions = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    buf = np.frombuffer(data, dtype=np.uint8)
    short = decode_short_varint_array(pair_view(buf), positions)
    assert short is not None
    assert short[0].tolist() == values
    assert short[1].tolist() == sizes.tolist()


def test_short_decoder_defers_three_byte_varints() -> None:
    buf = np.frombuffer(encode_varint(8192) + b"\x00", dtype=np.uint8)
    assert decode_short_varint_array(pair_view(buf), np.array([0])) is None
    assert decode_varint_array(buf, np.array([0]), 5)[0].tolist() == [8192]


@settings(max_examples=100)
@given(
    st.lists(
        st.one_of(st.integers(-8192, 8191), st.integers(INT32_MIN, INT32_MAX)),
        min_size=1,
        max_size=60,
    ),
    st.booleans(),
)
def test_mostly_short_decoder_matches_full_decoder(values: list[int], at_last_byte: bool) -> None:
    """1-2 byte varints from the pair tables, longer ones (here up to 5 bytes) by the full
    decode, whichever way they mix; one starting on the buffer's last byte too."""
    data = b"".join(encode_varint(v) for v in values)
    if not at_last_byte:
        data += b"\x00"
    sizes = varint_sizes(np.array(values))
    positions = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    buf = np.frombuffer(data, dtype=np.uint8)
    decoded, decoded_sizes = decode_mostly_short_varint_array(buf, pair_view(buf), positions, 5)
    assert decoded.tolist() == values
    assert decoded_sizes.tolist() == sizes.tolist()


def test_mostly_short_decoder_refuses_what_the_full_decoder_refuses() -> None:
    data = encode_varint(1) + b"\x80\x80\x80\x80\x80\x01" + encode_varint(2)
    buf = np.frombuffer(data, dtype=np.uint8)
    with pytest.raises(CorruptRecordError, match="longer than the 5 bytes"):
        decode_mostly_short_varint_array(buf, pair_view(buf), np.array([0, 1, 7]), 5)
    data = encode_varint(1) + b"\xff\xff\xff\xff\x1f"
    buf = np.frombuffer(data, dtype=np.uint8)
    with pytest.raises(CorruptRecordError, match="overflows int32"):
        decode_mostly_short_varint_array(buf, pair_view(buf), np.array([0, 1]), 5)


def test_varint_longer_than_five_bytes_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="longer than the 5 bytes"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01")
    buf = np.frombuffer(b"\x80\x80\x80\x80\x80\x01", dtype=np.uint8)
    with pytest.raises(CorruptRecordError, match="longer than the 5 bytes"):
        decode_varint_array(buf, np.array([0]), 5)


def test_varint_overflowing_int32_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="overflows int32"):
        decode_varint(b"\xff\xff\xff\xff\x1f")
    with pytest.raises(CorruptRecordError, match="overflows int32"):
        decode_varint_array(np.frombuffer(b"\xff\xff\xff\xff\x1f", np.uint8), np.array([0]), 5)


def test_varlong_overflowing_int64_is_corrupt() -> None:
    data = b"\xff" * 9 + b"\x02"
    with pytest.raises(CorruptRecordError, match="overflows int64"):
        decode_varlong(data)
    with pytest.raises(CorruptRecordError, match="overflows int64"):
        decode_varint_array(np.frombuffer(data, np.uint8), np.array([0]), 10)


def test_truncated_varint_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varint(b"\x80\x80")


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1])
def test_encode_varint_rejects_values_outside_int32(value: int) -> None:
    with pytest.raises(ValueError, match="outside int32"):
        encode_varint(value)


def test_encode_varlong_rejects_values_outside_int64() -> None:
    with pytest.raises(ValueError, match="outside int64"):
        encode_varlong(INT64_MAX + 1)
