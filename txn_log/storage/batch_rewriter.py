"""Rewriting one record batch without some of its records: the log cleaner's re-encoder.

The cleaner copies a batch whole when it keeps every record (no re-encoding, KIP-31). When it
keeps only some, this module builds the batch again from the surviving records' own bytes:

- every surviving record is copied byte for byte, so its offset delta, timestamp delta, key,
  value and headers are unchanged; the batch keeps its base offset and base timestamp (the
  deltas' origin), so each record keeps its absolute offset and timestamp (T-05: the offsets
  of removed records become holes);
- the header keeps everything the producer state is computed from: producer id, epoch, base
  sequence, the transactional and control bits and ``last_offset_delta`` (F-06: the range of
  offsets and sequence numbers a batch used never changes); only ``records_count``, the length,
  the max timestamp (of the survivors, under CreateTime; T-07) and the CRC are new;
- a batch left with no record keeps its header (``records_count`` 0), so a producer's last
  epoch and sequence survive the cleaning of all its records (P-29, X-14);
- a compressed batch is compressed again with its own codec.

``range_keeper`` builds the empty, producer-less batch that holds a segment's last offset when
the batch there is removed, so that every cleaned segment still ends where it ended.
All functions are pure (bytes in, bytes out).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from txn_log.errors import CorruptRecordError
from txn_log.record.batch_header import (
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    Compression,
    TimestampType,
    compute_crc,
    make_attributes,
)
from txn_log.record.batch_records import records_section
from txn_log.record.compression import MAX_RECORDS_BYTES, compress
from txn_log.record.varint import decode_varint, decode_varlong


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record of a batch: its absolute offset and timestamp, key, whether its value is
    null (a tombstone), and its exact bytes (length prefix included)."""

    offset: int
    timestamp: int
    key: bytes | None
    is_tombstone: bool
    data: bytes


def iter_raw_records(
    batch: bytes, header: BatchHeader, max_records_bytes: int = MAX_RECORDS_BYTES
) -> Iterator[RawRecord]:
    """The records of one whole (CRC-checked) batch with their bytes; CorruptRecordError when
    the records do not add up to the batch, RecordTooLargeError when they would inflate past
    ``max_records_bytes`` (never inflated, ``batch_records``)."""
    data, position = records_section(batch, header, max_records_bytes)
    end = len(data)
    for index in range(header.records_count):
        length, body = decode_varint(data, position)
        stop = body + length
        if length < 1 or stop > end:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset}: record {index} declares {length} bytes"
            )
        timestamp_delta, cursor = decode_varlong(data, body + 1)  # after the attributes byte
        offset_delta, cursor = decode_varint(data, cursor)
        key_length, cursor = decode_varint(data, cursor)
        key = data[cursor : cursor + key_length] if key_length >= 0 else None
        cursor += max(key_length, 0)
        value_length, _ = decode_varint(data, cursor)
        if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
            timestamp = header.max_timestamp
        else:
            timestamp = header.base_timestamp + timestamp_delta
        yield RawRecord(
            header.base_offset + offset_delta, timestamp, key, value_length < 0, data[position:stop]
        )
        position = stop
    if position != end:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset}: {end - position} bytes follow its "
            f"{header.records_count} records"
        )


def _pack(header: BatchHeader, body: bytes, count: int, max_timestamp: int) -> bytes:
    packed = HEADER.pack(
        header.base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(body),
        header.partition_leader_epoch,
        header.magic,
        0,  # the CRC, below
        header.attributes,
        header.last_offset_delta,  # F-06: never changes
        header.base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
    )
    batch = bytearray(packed + body)
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch))
    return bytes(batch)


def rebuild_batch(header: BatchHeader, kept: Sequence[RawRecord]) -> bytes:
    """``header``'s batch holding only ``kept`` (a subsequence of its records, in order)."""
    records = b"".join(record.data for record in kept)
    body = (
        records if header.compression is Compression.NONE else compress(records, header.compression)
    )
    max_timestamp = header.max_timestamp
    if kept and header.timestamp_type is TimestampType.CREATE_TIME:
        max_timestamp = max(record.timestamp for record in kept)
    return _pack(header, body, len(kept), max_timestamp)


def range_keeper(header: BatchHeader) -> bytes:
    """An empty batch over ``header``'s offsets with no producer: what stays of a segment's
    last batch when it is removed, so the segment keeps its offset range (``next_offset``)."""
    attributes = make_attributes(Compression.NONE, TimestampType.CREATE_TIME)
    packed = HEADER.pack(
        header.base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        header.partition_leader_epoch,
        header.magic,
        0,
        attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
        0,
    )
    batch = bytearray(packed)
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch))
    return bytes(batch)
