"""Record batches v2 <-> Arrow (F-11..F-24): exact bytes, round trips, kafka-python agreement,
corrupt input."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import crc32c
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tests.batch_walk import iter_batches
from txn_log.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError
from txn_log.record.batch_header import (
    Compression,
    TimestampType,
    set_base_offset,
    set_log_append_time,
)
from txn_log.record.codec import (
    HEADERS_TYPE,
    RECORD_SCHEMA,
    Record,
    decode_batch,
    encode_batch,
    encode_batch_buffer,
    encode_records,
    iter_records,
)

NOW = 1_700_000_000_000
Row = tuple[bytes | None, bytes | None, int | None, list[tuple[str, bytes | None]]]
INDEPENDENT_CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD]
BOOLS = st.booleans()
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

headers_st = st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=6)), max_size=3)
row_st = st.tuples(
    st.none() | st.binary(max_size=24),
    st.none() | st.binary(max_size=300),
    st.none() | st.integers(NOW - 2**40, NOW + 2**40),  # deltas of either sign (F-17)
    headers_st,
)


def table_of(rows: list[Row], *, headers: bool = True) -> pa.Table:
    columns: dict[str, Any] = {
        "key": pa.array([r[0] for r in rows], pa.binary()),
        "value": pa.array([r[1] for r in rows], pa.binary()),
        "timestamp": pa.array([r[2] for r in rows], pa.int64()),
    }
    if headers:
        columns["headers"] = pa.array(
            [[{"key": k, "value": v} for k, v in r[3]] for r in rows], HEADERS_TYPE
        )
    return pa.table(columns)


def expected_rows(rows: list[Row], base_offset: int) -> list[dict[str, Any]]:
    return [
        {
            "offset": base_offset + i,
            "timestamp": NOW if ts is None else ts,
            "key": key,
            "value": value,
            "headers": [{"key": k, "value": v} for k, v in headers],
        }
        for i, (key, value, ts, headers) in enumerate(rows)
    ]


def batch_of(records: bytes, count: int, *, attributes: int = 0, last_delta: int = 0) -> bytes:
    """A batch header written independently of txnlog's code, with a valid CRC-32C."""
    tail = struct.pack(">hiqqqhii", attributes, last_delta, NOW, NOW, -1, -1, -1, count) + records
    head = struct.pack(">qiib", 0, len(tail) + 9, 0, 2)
    return head + struct.pack(">I", crc32c.crc32c(tail)) + tail


# --- exact bytes -------------------------------------------------------------------------------


def test_hand_derived_batch_bytes() -> None:
    rows: list[Row] = [(b"k", b"v1", 1000, []), (None, b"", 990, [("h", b"x")])]
    records = bytes.fromhex(
        "12"  # record 0: length 9
        "00"
        "00"
        "00"  # attributes, timestamp delta 0, offset delta 0
        "02"
        "6b"  # key length 1, "k"
        "04"
        "7631"  # value length 2, "v1"
        "00"  # no headers
        "14"  # record 1: length 10
        "00"
        "13"
        "02"  # attributes, timestamp delta -10 (zigzag 19), offset delta 1
        "01"  # null key (-1)
        "00"  # empty value (length 0)
        "02"
        "02"
        "68"
        "02"
        "78"  # one header: key "h", value "x"
    )
    tail = (
        bytes.fromhex(
            "0000"  # attributes: no codec, CreateTime, not transactional
            "00000001"  # last_offset_delta 1
            "00000000000003e8"  # base_timestamp 1000: the first record's (F-17)
            "00000000000003e8"  # max_timestamp 1000
            "ffffffffffffffff"
            "ffff"
            "ffffffff"  # no producer id, epoch, sequence
            "00000002"  # records_count
        )
        + records
    )
    expected = (
        bytes.fromhex("0000000000000000000000460000000002")  # offset, 70, epoch 0, magic
        + crc32c.crc32c(tail).to_bytes(4, "big")
        + tail
    )
    ours = encode_batch(table_of(rows), now_ms=NOW, partition_leader_epoch=0)
    assert ours == expected
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for offset, (key, value, ts, headers) in enumerate(rows):
        builder.append(offset, ts, key, value, headers)
    assert bytes(builder.build()) == expected


# --- round trips -------------------------------------------------------------------------------


@FAST
@given(
    st.lists(row_st, min_size=1, max_size=25),
    st.sampled_from(list(Compression)),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**40),
)
def test_round_trip_through_arrow_and_the_scalar_path(
    rows: list[Row], codec: Compression, transactional: bool, with_headers: bool, base: int
) -> None:
    if not with_headers:
        rows = [(k, v, t, []) for k, v, t, _ in rows]
    options: dict[str, Any] = {
        "base_offset": base,
        "compression": codec,
        "transactional": transactional,
        "producer_id": 7 if transactional else -1,
        "producer_epoch": 3,
        "base_sequence": 11,
    }
    batch = encode_batch(table_of(rows, headers=with_headers), now_ms=NOW, **options)
    decoded = decode_batch(batch)
    assert decoded.records.schema == RECORD_SCHEMA
    assert decoded.records.to_pylist() == expected_rows(rows, base)
    header = decoded.header
    assert (header.base_offset, header.records_count, header.last_offset_delta) == (
        base,
        len(rows),
        len(rows) - 1,
    )
    assert header.compression is codec and header.is_transactional is transactional
    stamps = [NOW if r[2] is None else r[2] for r in rows]
    assert (header.base_timestamp, header.max_timestamp) == (stamps[0], max(stamps))
    scalar = [(r[0], r[1], r[2], tuple(r[3])) for r in rows]
    assert encode_records(scalar, now_ms=NOW, **options) == batch
    assert list(iter_records(batch)) == [
        Record(base + i, stamps[i], TimestampType.CREATE_TIME, k, v, tuple(h))
        for i, (k, v, _, h) in enumerate(rows)
    ]


@FAST
@given(st.lists(row_st, min_size=1, max_size=40), st.sampled_from(INDEPENDENT_CODECS), BOOLS)
def test_a_batch_decodes_alike_from_bytes_and_from_a_view_inside_other_bytes(
    rows: list[Row], codec: Compression, writable: bool
) -> None:
    """A segment scan hands on views into the bytes it read (``PartitionReader.read``): a
    batch decodes from a read-only view at any position of a larger buffer, headers and
    compressed records included, as from its own bytes; a writable view is copied first, so
    changing its buffer afterwards changes nothing decoded."""
    batch = encode_batch(table_of(rows), now_ms=NOW, compression=codec, base_offset=9)
    around = b"x" * 13 + batch + b"y" * 5
    view = memoryview(bytearray(around) if writable else around)[13 : 13 + len(batch)]
    decoded = decode_batch(view).records
    if writable:
        view[-1] ^= 0xFF
    assert decoded.to_pylist() == decode_batch(batch).records.to_pylist()
    assert decoded.to_pylist() == expected_rows(rows, 9)


@pytest.mark.parametrize("codec", INDEPENDENT_CODECS, ids=lambda c: c.name)
def test_records_over_8_kib_take_the_exact_length_path(codec: Compression) -> None:
    rows: list[Row] = [
        (b"k", bytes([i]) * size, NOW + i, []) for i, size in enumerate([10, 9000, 3, 70000, 8])
    ]
    batch = encode_batch(table_of(rows, headers=False), now_ms=NOW, compression=codec)
    assert decode_batch(batch).records.to_pylist() == expected_rows(rows, 0)
    assert [r.value for r in DefaultRecordBatch(batch)] == [r[1] for r in rows]


def test_log_append_time_reports_max_timestamp_for_every_record() -> None:
    rows: list[Row] = [(None, b"a", 5, []), (None, b"b", 9, [])]
    stamped = encode_batch(table_of(rows), now_ms=42, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert decode_batch(stamped).header.max_timestamp == 42
    assert decode_batch(stamped).records.column("timestamp").to_pylist() == [42, 42]
    later = bytearray(encode_batch(table_of(rows), now_ms=0))
    set_log_append_time(later, 77)
    set_base_offset(later, 500)
    decoded = decode_batch(bytes(later))
    assert decoded.records.column("timestamp").to_pylist() == [77, 77]
    assert decoded.records.column("offset").to_pylist() == [500, 501]
    assert [r.timestamp for r in DefaultRecordBatch(bytes(later))] == [77, 77]
    assert {r.timestamp_type for r in iter_records(bytes(later))} == {TimestampType.LOG_APPEND_TIME}


def test_arrow_input_types() -> None:
    chunked = pa.table(
        {
            "value": pa.chunked_array([pa.array(["a", None]), pa.array(["ccc"])], pa.string()),
            "key": pa.chunked_array(
                [pa.array([b"k"], pa.large_binary()), pa.array([None, b""], pa.large_binary())]
            ),
            "timestamp": pa.chunked_array(
                [pa.array([1_500_000, None, -1_500], pa.timestamp("us"))]
            ),
        }
    )
    records = decode_batch(encode_batch(chunked, now_ms=NOW)).records.to_pylist()
    assert [r["value"] for r in records] == [b"a", None, b"ccc"]
    assert [r["key"] for r in records] == [b"k", None, b""]
    assert [r["timestamp"] for r in records] == [1500, NOW, -2]  # floored to ms
    seconds = pa.record_batch({"value": [b"x"], "timestamp": pa.array([3], pa.timestamp("s"))})
    assert decode_batch(encode_batch(seconds, now_ms=0)).records["timestamp"].to_pylist() == [3000]


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (pa.table({"key": [b"k"]}), "needs a 'value' column"),
        (pa.table({"value": pa.array([], pa.binary())}), "at least one record"),
        (pa.table({"value": [1, 2]}), "must be binary or string"),
        (pa.table({"value": [b"v"], "timestamp": [1.5]}), "int64 ms or timestamp"),
        (pa.table({"value": [b"v"], "headers": [[1]]}), "list<struct<key: string"),
    ],
)
def test_unusable_input_is_an_invalid_record_value_error(columns: pa.Table, message: str) -> None:
    with pytest.raises(InvalidRecordError, match=message) as raised:
        encode_batch(columns, now_ms=NOW)
    assert isinstance(raised.value, ValueError)


def test_transactional_batches_need_a_producer_id_f14() -> None:
    with pytest.raises(InvalidRecordError, match="producer id"):
        encode_batch(pa.table({"value": [b"v"]}), now_ms=NOW, transactional=True)


# --- kafka-python as an independent decoder and encoder ----------------------------------------


def their_rows(batch: bytes) -> list[tuple[Any, ...]]:
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]


def our_rows(batch: bytes) -> list[tuple[Any, ...]]:
    return [
        (
            r["offset"],
            r["timestamp"],
            r["key"],
            r["value"],
            [(h["key"], h["value"]) for h in r["headers"]],
        )
        for r in decode_batch(batch).records.to_pylist()
    ]


@FAST
@given(st.lists(row_st, min_size=1, max_size=20), st.sampled_from(INDEPENDENT_CODECS), BOOLS)
def test_kafka_python_decodes_our_batches(
    rows: list[Row], codec: Compression, transactional: bool
) -> None:
    batch = encode_batch(
        table_of(rows),
        now_ms=NOW,
        compression=codec,
        transactional=transactional,
        producer_id=9 if transactional else -1,
        base_offset=1000,
    )
    assert their_rows(batch) == our_rows(batch)
    theirs = DefaultRecordBatch(batch)
    assert theirs.compression_type == codec
    assert theirs.is_transactional is transactional and not theirs.is_control_batch
    assert (theirs.first_timestamp, theirs.max_timestamp) == (
        decode_batch(batch).header.base_timestamp,
        decode_batch(batch).header.max_timestamp,
    )


@FAST
@given(st.lists(row_st, min_size=1, max_size=20), st.sampled_from(INDEPENDENT_CODECS), BOOLS)
def test_we_decode_kafka_pythons_batches(
    rows: list[Row], codec: Compression, transactional: bool
) -> None:
    builder = DefaultRecordBatchBuilder(
        2, codec, transactional, 4 if transactional else -1, 0, 0, 1 << 24
    )
    for offset, (key, value, ts, headers) in enumerate(rows):
        builder.append(offset, NOW if ts is None else ts, key, value, headers)
    batch = bytes(builder.build())
    assert our_rows(batch) == their_rows(batch)
    assert decode_batch(batch).header.is_transactional is transactional
    assert [
        (r.offset, r.timestamp_ms, r.key, r.value, list(r.headers)) for r in iter_records(batch)
    ] == their_rows(batch)


# --- batches in a buffer -----------------------------------------------------------------------


def test_iter_batches_splits_and_stops_at_a_short_tail() -> None:
    first = encode_batch(pa.table({"value": [b"a", b"b"]}), now_ms=NOW)
    second = encode_batch(pa.table({"value": [b"c"]}), now_ms=NOW, base_offset=2)
    buffer = first + second + second[:40]
    found = list(iter_batches(buffer))
    assert [(pos, h.base_offset, h.records_count) for pos, h in found] == [
        (0, 0, 2),
        (len(first), 2, 1),
    ]
    assert list(iter_batches(first + second[:-1], len(first))) == []
    assert [p for p, _ in iter_batches(first + second, len(first))] == [len(first)]


def test_a_batch_whose_records_were_all_compacted_away_decodes_to_no_rows() -> None:
    empty = batch_of(b"", 0, last_delta=4)  # F-06: the header survives, offsets too
    decoded = decode_batch(empty)
    assert decoded.records.num_rows == 0 and decoded.header.next_offset == 5
    assert list(iter_records(empty)) == []


# --- corrupt input -----------------------------------------------------------------------------

Decoder = Callable[[bytes], object]
DECODERS: list[Decoder] = [decode_batch, lambda b: list(iter_records(b))]
ONE_RECORD = bytes.fromhex("10000000026b027600")  # key "k", value "v"


@pytest.mark.parametrize("decode", DECODERS, ids=["arrow", "scalar"])
def test_wrong_crc_names_offset_and_both_crcs(decode: Decoder) -> None:
    batch = bytearray(encode_batch(pa.table({"value": [b"v"]}), now_ms=NOW, base_offset=33))
    batch[-2] ^= 0xFF  # the value byte
    with pytest.raises(CorruptRecordError, match=r"base offset 33.*stored 0x\w{8}, computed 0x"):
        decode(bytes(batch))
    assert decode_batch(bytes(batch), verify_crc=False).records.num_rows == 1


@pytest.mark.parametrize("decode", DECODERS, ids=["arrow", "scalar"])
def test_unknown_compression_code_with_a_valid_crc(decode: Decoder) -> None:
    with pytest.raises(UnsupportedCompressionTypeError, match="unknown compression code 7"):
        decode(batch_of(ONE_RECORD, 1, attributes=7))


@pytest.mark.parametrize("decode", DECODERS, ids=["arrow", "scalar"])
def test_truncated_batch(decode: Decoder) -> None:
    batch = encode_batch(pa.table({"value": [b"v" * 50]}), now_ms=NOW)
    size = len(batch)
    with pytest.raises(CorruptRecordError, match=f"declares {size} bytes but {size - 1}"):
        decode(batch[:-1])
    with pytest.raises(CorruptRecordError, match="truncated batch header"):
        decode(batch[:60])


@pytest.mark.parametrize("decode", DECODERS, ids=["arrow", "scalar"])
@pytest.mark.parametrize(
    ("records", "count"),
    [
        (ONE_RECORD * 2, 3),  # records_count larger than the records
        (ONE_RECORD * 3, 2),  # ... smaller
        (ONE_RECORD[:-1], 1),  # truncated record
        (b"\x0f" + ONE_RECORD[1:], 1),  # negative record length
        (b"\x11" + ONE_RECORD[1:], 1),  # length -9, whose zigzag image 17 >> 1 fits exactly
        (b"\x12" + ONE_RECORD[1:] + b"\x00", 1),  # fields do not add up to the length
        (b"\x16" + bytes.fromhex("0000008080808080010000"), 1),  # 6-byte varint
        (ONE_RECORD[:-1] + b"\x01", 1),  # negative header count
        (ONE_RECORD[:4] + b"\x0c" + ONE_RECORD[5:], 1),  # key overruns the record
        (ONE_RECORD + b"\x00", 1),  # trailing byte
    ],
    ids=[
        "count-high",
        "count-low",
        "truncated",
        "neg-length",
        "odd-length",
        "no-sum",
        "long-varint",
        "neg-headers",
        "key-overrun",
        "trailing",
    ],
)
def test_corrupt_records_are_rejected(decode: Decoder, records: bytes, count: int) -> None:
    with pytest.raises(CorruptRecordError):
        decode(batch_of(records, count))


def test_the_corrupt_case_builder_makes_valid_batches() -> None:
    assert [r.value for r in iter_records(batch_of(ONE_RECORD * 2, 2))] == [b"v", b"v"]
    assert decode_batch(batch_of(ONE_RECORD * 2, 2)).records["key"].to_pylist() == [b"k", b"k"]
    assert their_rows(batch_of(ONE_RECORD, 1))[0][2:4] == (b"k", b"v")


def test_encode_records_refuses_an_empty_batch() -> None:
    with pytest.raises(InvalidRecordError, match="at least one record"):
        encode_records([], now_ms=NOW)


def test_iter_batches_rejects_a_bad_magic() -> None:
    batch = bytearray(encode_batch(pa.table({"value": [b"v"]}), now_ms=NOW))
    batch[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        list(iter_batches(bytes(batch)))


@FAST
@given(
    st.integers(1, 300),
    st.sampled_from(["null", "present", "mixed", "absent"]),
    st.lists(st.integers(-100, 100), min_size=1, max_size=4),
    st.integers(0, 200),
    st.sampled_from(list(Compression)),
)
def test_columns_without_headers_encode_as_the_scalar_path(
    count: int, keys: str, steps: list[int], value_size: int, codec: Compression
) -> None:
    """Without headers the columnar encoder lays out the bytes between values (each gap
    holds the previous record's header count and the next record's fields up to its value,
    cut at the key unless every key is null): for sections long enough that offset deltas
    take two bytes, null, present, mixed and absent keys, timestamps either side of the
    first, values of either varint size, its batch is the scalar path's byte for byte."""
    key_of = {
        "null": lambda i: None,
        "present": lambda i: b"k%d" % i,
        "mixed": lambda i: None if i % 3 else b"key" * (i % 5),
        "absent": lambda i: None,
    }[keys]
    rows = [
        (key_of(i), b"v" * ((value_size + i) % 201), NOW + steps[i % len(steps)] * i, ())
        for i in range(count)
    ]
    columns: dict[str, Any] = {
        "value": pa.array([r[1] for r in rows], pa.binary()),
        "timestamp": pa.array([r[2] for r in rows], pa.int64()),
    }
    if keys != "absent":
        columns["key"] = pa.array([r[0] for r in rows], pa.binary())
    options: dict[str, Any] = {"compression": codec, "producer_id": 3, "base_sequence": 5}
    batch = encode_batch(pa.table(columns), now_ms=NOW, **options)
    assert batch == encode_records(rows, now_ms=NOW, **options)
    assert [r.value for r in iter_records(batch)] == [r[1] for r in rows]


@FAST
@given(
    st.lists(row_st, min_size=1, max_size=80),
    st.sampled_from(list(Compression)),
    st.booleans(),
    st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]),
)
def test_a_batch_in_the_encoders_buffer_is_encode_batchs_batch(
    rows: list[Row], codec: Compression, with_headers: bool, timestamp_type: TimestampType
) -> None:
    """``encode_batch_buffer`` (the producer's encoder) gives ``encode_batch``'s bytes; an
    uncompressed batch is written around the records in the Arrow buffer they were laid out
    in (the header into the room before them), not copied into a new ``bytes``."""
    if not with_headers:
        rows = [(k, v, t, []) for k, v, t, _ in rows]
    table = table_of(rows, headers=with_headers)
    options: dict[str, Any] = {
        "compression": codec,
        "producer_id": 9,
        "producer_epoch": 2,
        "base_sequence": 40,
        "transactional": True,
        "timestamp_type": timestamp_type,
        "now_ms": NOW,
    }
    batch = encode_batch_buffer(table, **options)
    assert bytes(batch) == encode_batch(table, **options)
    if codec is Compression.NONE:
        assert isinstance(batch, memoryview) and isinstance(batch.obj, pa.Buffer)
        assert not batch.readonly
