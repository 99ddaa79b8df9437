"""A minimal builder of uncompressed magic-2 record batches, for storage tests only.

Independent of the record codec on purpose (it is written in parallel): the header comes from
``batch_header.HEADER``, records are Kafka's v2 record layout with zigzag varints, and the CRC is
CRC-32C over attributes..end (F-25, F-26). Control batches carry one control record whose key is
``version int16, type int16`` (ABORT=0, COMMIT=1) and value ``version int16, coordinator_epoch
int32`` (F-15, F-30).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from txn_log.record.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    Compression,
    TimestampType,
    make_attributes,
    parse_header,
)

BASE_TIMESTAMP = 1_700_000_000_000


def zigzag_varint(value: int) -> bytes:
    """Kafka's signed varint/varlong: zigzag, then 7 bits per byte, low group first."""
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(buf: bytes | memoryview, position: int) -> tuple[int, int]:
    """Decode one zigzag varint at ``position``; returns (value, next position)."""
    shift = 0
    encoded = 0
    while True:
        byte = buf[position]
        position += 1
        encoded |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (encoded >> 1) ^ -(encoded & 1), position


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = bytearray(b"\x00")  # record attributes: unused
    body += zigzag_varint(timestamp_delta)
    body += zigzag_varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += zigzag_varint(-1)
        else:
            body += zigzag_varint(len(field)) + field
    body += zigzag_varint(0)  # no headers
    return zigzag_varint(len(body)) + bytes(body)


def build_batch(
    base_offset: int = 0,
    count: int = 1,
    *,
    timestamps: Sequence[int] | None = None,
    value_size: int = 16,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    log_append_time: int | None = None,
    partition_leader_epoch: int = 0,
) -> bytes:
    """A data batch of ``count`` records; ``timestamps`` per record (default BASE_TIMESTAMP+i)."""
    stamps = (
        list(timestamps) if timestamps is not None else [BASE_TIMESTAMP + i for i in range(count)]
    )
    if len(stamps) != count:
        raise ValueError(f"{len(stamps)} timestamps for {count} records")
    first = stamps[0]
    records = b"".join(
        encode_record(i, stamp - first, b"k%d" % i, bytes([i % 251]) * value_size)
        for i, stamp in enumerate(stamps)
    )
    return _assemble(
        base_offset=base_offset,
        last_offset_delta=count - 1,
        base_timestamp=first,
        max_timestamp=max(stamps) if log_append_time is None else log_append_time,
        producer=(producer_id, producer_epoch, base_sequence),
        attributes=make_attributes(
            Compression.NONE,
            TimestampType.CREATE_TIME if log_append_time is None else TimestampType.LOG_APPEND_TIME,
            transactional=transactional,
        ),
        records=records,
        count=count,
        partition_leader_epoch=partition_leader_epoch,
    )


def build_control_batch(
    base_offset: int,
    *,
    producer_id: int,
    producer_epoch: int = 0,
    commit: bool = True,
    timestamp: int = BASE_TIMESTAMP,
    coordinator_epoch: int = 0,
) -> bytes:
    """A transactional control batch holding one COMMIT (or ABORT) marker, LogAppendTime."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return _assemble(
        base_offset=base_offset,
        last_offset_delta=0,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer=(producer_id, producer_epoch, -1),
        attributes=make_attributes(
            Compression.NONE, TimestampType.LOG_APPEND_TIME, transactional=True, control=True
        ),
        records=encode_record(0, 0, key, value),
        count=1,
        partition_leader_epoch=0,
    )


def _assemble(
    *,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer: tuple[int, int, int],
    attributes: int,
    records: bytes,
    count: int,
    partition_leader_epoch: int,
) -> bytes:
    producer_id, producer_epoch, base_sequence = producer
    batch = bytearray(HEADER_SIZE) + records
    HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,  # crc, filled below
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def record_timestamps(batch: memoryview | bytes) -> list[tuple[int, int]]:
    """``(offset, timestamp)`` of each record of an uncompressed batch (the codec's job)."""
    header = parse_header(batch)
    position = HEADER_SIZE
    result: list[tuple[int, int]] = []
    for _ in range(header.records_count):
        length, position = read_varint(batch, position)
        end = position + length
        position += 1  # record attributes
        timestamp_delta, position = read_varint(batch, position)
        offset_delta, position = read_varint(batch, position)
        result.append((header.base_offset + offset_delta, header.base_timestamp + timestamp_delta))
        position = end
    return result
