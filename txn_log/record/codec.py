"""Record batches v2 to and from Arrow columns, a whole batch at a time (F-11..F-24).

The records section after the 61-byte header (see ``batch_header``) holds ``records_count``
records back to back, compressed as one stream when the codec bits are set (F-13):

    Record =>                                         (F-16, F-19: every int is a zigzag varint)
      length          varint   bytes after this field, to the end of the record (F-18)
      attributes      int8     unused, written 0 (F-22)
      timestamp_delta varlong  signed; timestamp = base_timestamp + delta (F-17)
      offset_delta    varint   offset = base_offset + delta; we write 0..n-1 (KIP-31)
      key_length      varint   -1 = null key
      key             bytes
      value_length    varint   -1 = null value (F-20: Kafka keeps the field)
      value           bytes
      header_count    varint   (F-24, KIP-82)
      headers         [key_length varint, key UTF-8, value_length varint (-1 = null), value]

There is no per-record CRC (F-21): the batch CRC-32C covers everything from the attributes on.

Whole batches go to and from Arrow through ``columnar_decode`` / ``columnar_encode`` (numpy
and Arrow ``take``, no Python loop per record but the one that finds record starts); single
records go through ``iter_records`` / ``encode_records``, a plain Python path for control
records, tests and tools. Both paths write identical bytes and are byte-compatible with
Kafka's ``DefaultRecordBatch``.

Invariants: ``decode_batch(encode_batch(t, ...))`` returns ``t``'s keys, values, timestamps and
headers with offsets ``base_offset + i``; every decoded buffer position is checked against the
record lengths before Arrow sees it, so corrupt input raises ``CorruptRecordError`` and never
reads outside the batch. All functions are pure and thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import crc32c
import numpy as np
import pyarrow as pa

from txn_log.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from txn_log.record.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    Compression,
    TimestampType,
    codec_from_id,
    make_attributes,
    parse_header,
    validate_batch,
)
from txn_log.record.batch_records import check_count, records_section
from txn_log.record.columnar_decode import (
    HEADER_TYPE,
    HEADERS_TYPE,
    MIN_RECORD_SIZE,
    Headers,
    headers_column,
    key_value_columns,
    read_headers,
    record_layout,
)
from txn_log.record.columnar_encode import encode_columns
from txn_log.record.compression import MAX_RECORDS_BYTES, compress
from txn_log.record.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

__all__ = [
    "HEADERS_TYPE",
    "HEADER_TYPE",
    "RECORD_SCHEMA",
    "DecodedBatch",
    "Headers",
    "Record",
    "decode_batch",
    "encode_batch",
    "encode_batch_buffer",
    "encode_records",
    "iter_records",
]

RECORD_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS_TYPE, nullable=False),
    ]
)
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """One decoded batch: its header and its records as ``RECORD_SCHEMA`` columns."""

    header: BatchHeader
    records: pa.RecordBatch


@dataclass(frozen=True, slots=True)
class Record:
    """One record with absolute offset and timestamp (max timestamp under LogAppendTime)."""

    offset: int
    timestamp_ms: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


def _byte_view(batch: bytes | bytearray | memoryview) -> memoryview:
    """A read-only byte view of ``batch``, without copying ``bytes`` or a read-only contiguous
    byte view (a batch as a segment scan read it: ``PartitionReader.read``); of a copy
    otherwise (a ``bytearray`` or writable view may change under the decoder)."""
    if isinstance(batch, bytes):
        return memoryview(batch)
    if (
        isinstance(batch, memoryview)
        and batch.readonly
        and batch.contiguous
        and batch.ndim == 1
        and batch.format in ("B", "b", "c")
    ):
        return batch.cast("B")
    return memoryview(bytes(batch))


def _check_header(data: bytes | memoryview, verify_crc: bool) -> BatchHeader:
    header = validate_batch(data) if verify_crc else parse_header(data)
    if header.size_in_bytes != len(data):
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} declares {header.size_in_bytes} bytes but "
            f"{len(data)} were given"
        )
    return header


def decode_batch(
    batch: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_records_bytes: int = MAX_RECORDS_BYTES,
) -> DecodedBatch:
    """Decode one whole batch into ``RECORD_SCHEMA`` columns (F-11..F-24).

    Offsets are absolute (``base_offset + offset_delta``); under LogAppendTime every record
    reports ``max_timestamp``. A batch with ``records_count`` 0 (all records compacted away,
    F-06) decodes to zero rows. Raises ``CorruptRecordError`` on a wrong CRC, a bad count or
    truncated records, ``UnsupportedCompressionTypeError`` for an unknown codec, and
    ``RecordTooLargeError`` for a records section that would inflate past
    ``max_records_bytes`` (never inflated: ``batch_records``).
    """
    data = _byte_view(batch)
    header = _check_header(data, verify_crc)
    records, position = records_section(data, header, min(max_records_bytes, _INT32_MAX))
    count, end = header.records_count, len(records)
    if end > _INT32_MAX:  # Arrow binary offsets are int32
        raise RecordTooLargeError(f"records section of {end} bytes exceeds 2 GiB")
    check_count(header, end - position)
    if count == 0:
        return DecodedBatch(header, pa.RecordBatch.from_pylist([], schema=RECORD_SCHEMA))
    layout = record_layout(records, position, end, count)
    headers = headers_column(records, layout)  # also checks every record's field sum
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        timestamps = np.full(count, header.max_timestamp, dtype=np.int64)
    else:
        timestamps = layout.timestamp_delta + np.int64(header.base_timestamp)
    keys, values = key_value_columns(pa.py_buffer(records), layout)
    offsets = layout.offset_delta + np.int64(header.base_offset)
    columns = [pa.array(offsets), pa.array(timestamps), keys, values, headers]
    return DecodedBatch(header, pa.RecordBatch.from_arrays(columns, schema=RECORD_SCHEMA))


def _timestamp_type(value: TimestampType | int) -> TimestampType:
    """``TimestampType(value)`` (ValueError for another int), without the Enum call for a
    member (every batch encoded passes one)."""
    return value if isinstance(value, TimestampType) else TimestampType(value)


def _header(
    body_size: int,
    count: int,
    timestamps: tuple[int, int],
    codec: Compression,
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The batch header of ``count`` records in ``body_size`` bytes, its CRC still 0."""
    if transactional and producer_id < 0:
        raise InvalidRecordError("a transactional batch needs a producer id >= 0")
    batch_length = HEADER_SIZE - LOG_OVERHEAD + body_size
    if batch_length > _INT32_MAX:
        raise RecordTooLargeError(f"batch of {batch_length} bytes exceeds the int32 length field")
    attributes = make_attributes(
        codec, _timestamp_type(timestamp_type), transactional=transactional
    )
    try:
        return HEADER.pack(
            base_offset,
            batch_length,
            partition_leader_epoch,
            MAGIC,
            0,  # crc, computed by the caller over the packed bytes
            attributes,
            count - 1,  # last_offset_delta: deltas are 0..n-1 (KIP-31, F-05)
            timestamps[0],  # base_timestamp: the first record's (F-17)
            timestamps[1],  # max_timestamp (F-10)
            producer_id,
            producer_epoch,
            base_sequence,
            count,  # records_count
        )
    except struct.error as error:
        raise InvalidRecordError(f"batch header field out of range: {error}") from None


def _assemble(
    records: Any,
    count: int,
    timestamps: tuple[int, int],
    *,
    compression: Compression | int = Compression.NONE,
    **options: Any,
) -> bytes:
    """Header + (compressed) records with the CRC-32C over attributes..end (F-11, F-26)."""
    codec = codec_from_id(int(compression))
    body = records if codec is Compression.NONE else compress(records, codec)
    header = _header(len(body), count, timestamps, codec, **options)
    crc = crc32c.crc32c(body, crc32c.crc32c(header[ATTRIBUTES_OFFSET:]))
    return b"".join((header[:CRC_OFFSET], struct.pack(">I", crc), header[ATTRIBUTES_OFFSET:], body))


def _assemble_framed(
    framed: memoryview,
    count: int,
    timestamps: tuple[int, int],
    *,
    compression: Compression | int = Compression.NONE,
    **options: Any,
) -> bytes | memoryview:
    """``_assemble`` of the records in ``framed`` (a writable view: ``HEADER_SIZE`` bytes of
    room, then the records): uncompressed, the header and CRC are written into the room
    and ``framed`` is the batch, no copy of the records; compressed, a new ``bytes``."""
    codec = codec_from_id(int(compression))
    if codec is not Compression.NONE:
        return _assemble(framed[HEADER_SIZE:], count, timestamps, compression=codec, **options)
    framed[:HEADER_SIZE] = _header(len(framed) - HEADER_SIZE, count, timestamps, codec, **options)
    struct.pack_into(">I", framed, CRC_OFFSET, crc32c.crc32c(framed[ATTRIBUTES_OFFSET:]))
    return framed


def encode_batch(
    columns: pa.RecordBatch | pa.Table,
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    compression: Compression | int = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = -1,
    now_ms: int,
) -> bytes:
    """One batch from Arrow columns ``value`` (required), ``key``, ``timestamp``, ``headers``.

    Offset deltas are 0..n-1 (KIP-31); ``base_timestamp`` is the first record's timestamp and
    deltas are signed (F-17); null or absent timestamps are ``now_ms``. Under LogAppendTime
    ``max_timestamp`` is ``now_ms`` (the append time, T-08). Raises ``InvalidRecordError``
    (a ``ValueError``) for no rows (Kafka never writes an empty data batch), a missing
    ``value`` column or unusable column types.
    """
    return bytes(
        encode_batch_buffer(
            columns,
            base_offset=base_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            transactional=transactional,
            compression=compression,
            timestamp_type=timestamp_type,
            partition_leader_epoch=partition_leader_epoch,
            now_ms=now_ms,
        )
    )


def encode_batch_buffer(
    columns: pa.RecordBatch | pa.Table,
    *,
    now_ms: int,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    **options: Any,
) -> bytes | memoryview:
    """``encode_batch``'s batch without its last copy: uncompressed, a writable view of the
    Arrow buffer the encoder built the records in, with the header written into the room
    left before them; compressed, ``bytes``. For a caller that hands the batch on and drops
    it, as the producer does (the log copies what it appends): a batch of 0.5 MB then costs
    no copy and no allocation from the C heap, where a 0.5 MB block freed next to the log's
    own copy was given back to the system and faulted in again for every batch."""
    framed, timestamps = encode_columns(columns, now_ms)
    log_append = _timestamp_type(timestamp_type) is TimestampType.LOG_APPEND_TIME
    bounds = (int(timestamps[0]), now_ms if log_append else int(timestamps.max()))
    return _assemble_framed(
        framed, len(timestamps), bounds, timestamp_type=timestamp_type, **options
    )


# --- one record at a time: control records, tests, tools -----------------------------------


def _wrap64(value: int) -> int:
    """int64 two's-complement wrap, as Java's long and numpy's int64 arithmetic do."""
    return ((value + (1 << 63)) % (1 << 64)) - (1 << 63)


def _nullable(data: bytes | None) -> list[bytes]:
    return [encode_varint(-1)] if data is None else [encode_varint(len(data)), data]


def _record_bytes(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
) -> bytes:
    """One record (F-16, F-24) with its length prefix; the scalar twin of ``_records_bytes``."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    parts += [*_nullable(key), *_nullable(value), encode_varint(len(headers))]
    for header_key, header_value in headers:
        parts += [*_nullable(header_key.encode("utf-8")), *_nullable(header_value)]
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def encode_records(
    records: Sequence[tuple[bytes | None, bytes | None, int | None, Headers]],
    *,
    now_ms: int,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    **options: Any,
) -> bytes:
    """``encode_batch`` for a few ``(key, value, timestamp_ms or None, headers)`` tuples.

    Encodes record by record in Python (faster than Arrow for a handful of records); the
    bytes equal ``encode_batch``'s for the same records and options.
    """
    if not records:
        raise InvalidRecordError("a batch needs at least one record; Kafka writes none empty")
    stamps = [now_ms if record[2] is None else record[2] for record in records]
    body = b"".join(
        _record_bytes(index, _wrap64(stamp - stamps[0]), key, value, tuple(headers))
        for index, ((key, value, _, headers), stamp) in enumerate(zip(records, stamps, strict=True))
    )
    log_append = _timestamp_type(timestamp_type) is TimestampType.LOG_APPEND_TIME
    bounds = (stamps[0], now_ms if log_append else max(stamps))
    return _assemble(body, len(records), bounds, timestamp_type=timestamp_type, **options)


def _read_record(data: bytes, position: int, end: int, header: BatchHeader) -> Record:
    """The record whose attributes byte is at ``position`` and which ends at ``end``."""
    timestamp_delta, position = decode_varlong(data, position + 1)
    offset_delta, position = decode_varint(data, position)
    fields: list[bytes | None] = []
    for _ in range(2):  # key, then value; a negative length is null
        length, position = decode_varint(data, position)
        if position + max(length, 0) > end:
            raise CorruptRecordError(f"record at offset delta {offset_delta} is truncated")
        fields.append(data[position : position + length] if length >= 0 else None)
        position += max(length, 0)
    count, position = decode_varint(data, position)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    headers, position = read_headers(data, position, count, end)
    if position != end:
        raise CorruptRecordError(f"record at offset delta {offset_delta} fields do not add up")
    log_append = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    timestamp = header.max_timestamp if log_append else header.base_timestamp + timestamp_delta
    return Record(
        header.base_offset + offset_delta,
        _wrap64(timestamp),
        header.timestamp_type,
        fields[0],
        fields[1],
        headers,
    )


def iter_records(
    batch: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_records_bytes: int = MAX_RECORDS_BYTES,
) -> Iterator[Record]:
    """The records of one whole batch, one ``Record`` at a time (small batches, tools);
    inflating them is bounded as in ``decode_batch``."""
    data = batch if isinstance(batch, bytes) else bytes(batch)
    header = _check_header(data, verify_crc)
    records, position = records_section(data, header, max_records_bytes)
    end = len(records)
    for index in range(header.records_count):
        if position >= end:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset} declares {header.records_count} "
                f"records but holds {index}"
            )
        length, body = decode_varint(records, position)
        if length < MIN_RECORD_SIZE - 1 or body + length > end:
            raise CorruptRecordError(f"record {index} declares length {length}")
        yield _read_record(records, body, body + length, header)
        position = body + length
    if position != end:
        raise CorruptRecordError(f"{end - position} bytes follow the last record")
