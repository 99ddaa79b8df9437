"""Control records: the COMMIT / ABORT transaction markers (F-15, F-28..F-33).

A marker is a batch of exactly one record whose batch attributes have both the transactional
and the control bit set (F-15: the control flag lives in the *batch* attributes, bit 5). Its
key and value are fixed binary layouts, big-endian:

    key   (4 bytes, never null)       value (6 bytes, never null)
    ------------------------------    --------------------------------------
    version  int16  = 0               version            int16  = 0
    type     int16  ControlType       coordinator_epoch  int32  (F-29, F-33)

Decision (F-28 [CONFLICT]): the seeds number the types COMMIT = 0, ABORT = 1; Kafka as shipped
(``ControlRecordType``) has **ABORT = 0, COMMIT = 1**. We use Kafka's numbering so that markers
written here are read correctly by Kafka's tools and librdkafka, and vice versa.

The batch is written the way Kafka's ``MemoryRecords.writeEndTransactionalMarker`` writes it:
no compression, timestamp type CreateTime (the attribute bit stays 0, even though F-30 calls a
marker's timestamp its append time: the broker passes the append time in as the record's
timestamp), base sequence -1, one record with offset delta 0 and timestamp delta 0, so that
base and max timestamp both equal ``timestamp_ms``.

Reading is lenient where Kafka is: a key or value with a version above 0 is parsed by its known
prefix (later versions may only append fields). Anything shorter than the layout above, a
negative version or an unknown type raises ``CorruptRecordError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from txn_log.errors import CorruptRecordError, InvalidRecordError
from txn_log.record.batch_header import (
    CRC_OFFSET,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    NO_SEQUENCE,
    Compression,
    TimestampType,
    compute_crc,
    make_attributes,
)
from txn_log.record.varint import encode_varint

CONTROL_KEY = struct.Struct(
    ">"
    "h"  # version, 0
    "h"  # type: ControlType
)
CONTROL_VALUE = struct.Struct(
    ">"
    "h"  # version, 0
    "i"  # coordinator_epoch
)
CURRENT_CONTROL_VERSION = 0


class ControlType(IntEnum):
    """The control record type in the key (F-28: Kafka's numbering, not the seeds')."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A parsed transaction marker: key version, type and the coordinator epoch (F-29)."""

    version: int
    control_type: ControlType
    coordinator_epoch: int


def control_key(control_type: ControlType) -> bytes:
    """The 4-byte key of a marker of ``control_type``."""
    return CONTROL_KEY.pack(CURRENT_CONTROL_VERSION, int(control_type))


def control_value(coordinator_epoch: int) -> bytes:
    """The 6-byte value of a transaction marker (F-29)."""
    return CONTROL_VALUE.pack(CURRENT_CONTROL_VERSION, coordinator_epoch)


def parse_control_record(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Parse a marker's key and value; ``CorruptRecordError`` names what is wrong."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecordError(
            f"control record key must be at least {CONTROL_KEY.size} bytes, got "
            f"{'null' if key is None else len(key)}"
        )
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key has negative version {version}")
    try:
        control_type = ControlType(type_id)
    except ValueError:
        raise CorruptRecordError(
            f"unknown control record type {type_id}; known: "
            f"{', '.join(f'{t.value} ({t.name})' for t in ControlType)}"
        ) from None
    if value is None or len(value) < CONTROL_VALUE.size:
        raise CorruptRecordError(
            f"{control_type.name} marker value must be at least {CONTROL_VALUE.size} bytes, "
            f"got {'null' if value is None else len(value)}"
        )
    value_version, coordinator_epoch = CONTROL_VALUE.unpack_from(value)
    if value_version < 0:
        raise CorruptRecordError(f"marker value has negative version {value_version}")
    return ControlRecord(version, control_type, coordinator_epoch)


def _marker_record(key: bytes, value: bytes) -> bytes:
    """One v2 record: attributes 0, timestamp delta 0, offset delta 0, no headers (F-16)."""
    body = b"".join(
        [
            b"\x00",  # record attributes, unused (F-22)
            encode_varint(0),  # timestamp delta
            encode_varint(0),  # offset delta
            encode_varint(len(key)),
            key,
            encode_varint(len(value)),
            value,
            encode_varint(0),  # header count (F-24)
        ]
    )
    return encode_varint(len(body)) + body


def encode_control_batch(
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A whole marker batch (78 bytes) with a valid CRC-32C, as Kafka writes it.

    Raises ``InvalidRecordError`` without a producer id: a marker always belongs to one
    (F-31), and Kafka refuses transactional batches without one.
    """
    if producer_id < 0:
        raise InvalidRecordError(
            f"a {ControlType(control_type).name} marker needs a producer id >= 0, got {producer_id}"
        )
    record = _marker_record(control_key(control_type), control_value(coordinator_epoch))
    attributes = make_attributes(
        Compression.NONE, TimestampType.CREATE_TIME, transactional=True, control=True
    )
    header = HEADER.pack(
        base_offset,
        HEADER.size - LOG_OVERHEAD + len(record),  # batch_length
        partition_leader_epoch,
        MAGIC,
        0,  # crc, set below
        attributes,
        0,  # last_offset_delta: one record
        timestamp_ms,  # base_timestamp
        timestamp_ms,  # max_timestamp
        producer_id,
        producer_epoch,
        NO_SEQUENCE,  # markers carry no sequence
        1,  # records_count
    )
    batch = bytearray(header + record)
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch))
    return bytes(batch)
