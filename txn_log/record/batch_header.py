"""The 61-byte header of a record batch, magic 2, exactly as Kafka ships it (F-11, F-13).

    offset  width  field
    ------  -----  ---------------------------------------------------------------
         0      8  base_offset             int64   offset of the first record (F-05)
         8      4  batch_length            int32   bytes after this field = size - 12
        12      4  partition_leader_epoch  int32   not covered by the CRC
        16      1  magic                   int8    = 2 (F-01)
        17      4  crc                     uint32  CRC-32C of bytes [21, end) (F-25, F-26)
        21      2  attributes              int16   see BatchAttributes (F-13)
        23      4  last_offset_delta       int32   last offset = base_offset + delta
        27      8  base_timestamp          int64   ms; record timestamps are deltas (F-17)
        35      8  max_timestamp           int64   ms; for the time index (F-10)
        43      8  producer_id             int64   -1 without idempotence
        51      2  producer_epoch          int16   -1 without idempotence
        53      4  base_sequence           int32   -1 without idempotence
        57      4  records_count           int32
        61      …  records                 (compressed as a whole when a codec is set)

Decision (checklist §14.1, F-11/F-26): the seed documents' 53-byte layout is *not* used; files
are byte-compatible with Kafka's own record format so that Kafka's tools and codecs read them.
The base offset sits outside the CRC, so the log assigns offsets by rewriting 8 bytes without
touching (or decompressing) the records (KIP-31, T-01..T-04).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum, IntFlag

import crc32c

from txn_log.errors import CorruptRecordError, UnsupportedCompressionTypeError

MAGIC = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

HEADER = struct.Struct(
    ">"
    "q"  # base_offset
    "i"  # batch_length
    "i"  # partition_leader_epoch
    "b"  # magic
    "I"  # crc
    "h"  # attributes
    "i"  # last_offset_delta
    "q"  # base_timestamp
    "q"  # max_timestamp
    "q"  # producer_id
    "h"  # producer_epoch
    "i"  # base_sequence
    "i"  # records_count
)
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = struct.calcsize(">qi")  # 12: base_offset + batch_length precede the counted bytes
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = struct.calcsize(">q")  # 8
MAGIC_OFFSET = struct.calcsize(">qii")  # 16
CRC_OFFSET = struct.calcsize(">qiib")  # 17
ATTRIBUTES_OFFSET = struct.calcsize(">qiibI")  # 21: CRC coverage starts here
MAX_TIMESTAMP_OFFSET = struct.calcsize(">qiibIhiq")  # 35
PREFIX = struct.Struct(">qiib")  # base_offset, batch_length, leader epoch, magic: 17 bytes

if HEADER_SIZE != 61 or ATTRIBUTES_OFFSET != 21:  # pragma: no cover - layout guard
    raise ImportError("record batch header layout drifted from Kafka's 61-byte v2 header")


class Compression(IntEnum):
    """Codec ids in attribute bits 0-2 (F-13)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, name: str | int) -> Compression:
        """A codec from its Kafka config name (``compression.type``) or id."""
        if isinstance(name, int):
            try:
                return cls(name)
            except ValueError:
                raise UnsupportedCompressionTypeError(
                    f"unknown compression code {name}; valid codes are "
                    f"{', '.join(f'{c.value} ({c.name.lower()})' for c in cls)}"
                ) from None
        key = name.strip().upper()
        if key not in cls.__members__:
            raise UnsupportedCompressionTypeError(
                f"unknown compression.type {name!r}; valid values are "
                f"{', '.join(c.name.lower() for c in cls)}"
            )
        return cls[key]


class TimestampType(IntEnum):
    """Attribute bit 3 (F-13, T-08). Kafka's clients have a third value, -1
    (NO_TIMESTAMP_TYPE), for records older than v1; a v2 batch is always one of these two."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchAttributes(IntFlag):
    """The attribute bits above the codec (F-13). Bits 7-15 are unused and written as 0."""

    TIMESTAMP_TYPE = 0x08  # set = LogAppendTime
    TRANSACTIONAL = 0x10  # a COMMIT/ABORT marker will follow (F-14)
    CONTROL = 0x20  # every record is a control record (F-15, batch level)
    DELETE_HORIZON = 0x40  # KIP-534; tolerated on read, never written


COMPRESSION_MASK = 0x07
# the same bits as plain ints, for the header's properties (asked several times per append:
# an IntFlag operand makes ``&`` a Python-level call, an Enum call a lookup through its class)
_TIMESTAMP_TYPE_BIT = int(BatchAttributes.TIMESTAMP_TYPE)
_TRANSACTIONAL_BIT = int(BatchAttributes.TRANSACTIONAL)
_CONTROL_BIT = int(BatchAttributes.CONTROL)
_CODECS = {int(codec): codec for codec in Compression}


def codec_from_id(code: int) -> Compression:
    """``Compression.parse`` of a codec id (UnsupportedCompressionTypeError for an unknown
    one), without the Enum call for the known ones."""
    codec = _CODECS.get(code)
    return codec if codec is not None else Compression.parse(code)


def make_attributes(
    compression: Compression,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    *,
    transactional: bool = False,
    control: bool = False,
) -> int:
    """The int16 attribute word for a batch."""
    attributes = int(compression)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= _TRANSACTIONAL_BIT
    if control:
        attributes |= _CONTROL_BIT
    return attributes


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The decoded fixed header of one batch. Offsets are absolute; ``next_offset`` is exclusive."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        """Bytes the whole batch takes in the file: header and records."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        """Offset of the last record, inclusive (F-05: base + delta, the next batch is +1)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """First offset after this batch, exclusive."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (P-09), wrapping at int32 max (P-12); -1 if none."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)

    @property
    def compression(self) -> Compression:
        return codec_from_id(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Decode the header at ``position``; checks magic and length but not the CRC.

    Raises CorruptRecordError naming the position when fewer than 61 bytes remain, the magic
    is not 2, or the batch length is smaller than a header.
    """
    if len(buf) - position < HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated batch header at position {position}: "
            f"{len(buf) - position} of {HEADER_SIZE} bytes"
        )
    header = BatchHeader(*HEADER.unpack_from(buf, position))
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"batch at position {position} has magic {header.magic}; only magic {MAGIC} "
            "(record batch v2) is supported"
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch at position {position} has length {header.batch_length}, less than "
            f"the {HEADER_SIZE - LOG_OVERHEAD} bytes of its own header"
        )
    return header


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C over ``batch[21:]`` (attributes to end), as stored in the header (F-26)."""
    return int(crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))


def is_crc_valid(batch: bytes | bytearray | memoryview, header: BatchHeader) -> bool:
    """Whether the stored CRC matches the bytes; ``batch`` is exactly one whole batch."""
    return compute_crc(batch) == header.crc


def validate_batch(batch: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse and fully check one whole batch (length matches the buffer, CRC valid)."""
    header = parse_header(batch, 0)
    if header.size_in_bytes != len(batch):
        raise CorruptRecordError(
            f"batch at position {position} declares {header.size_in_bytes} bytes but "
            f"{len(batch)} were given"
        )
    actual = compute_crc(batch)
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at position {position} (base offset {header.base_offset}) fails its "
            f"CRC-32C check: stored {header.crc:#010x}, computed {actual:#010x}"
        )
    return header


def set_base_offset(batch: bytearray | memoryview, base_offset: int) -> None:
    """Assign the batch's absolute offsets in place: 8 bytes, outside the CRC (KIP-31)."""
    struct.pack_into(">q", batch, BASE_OFFSET_OFFSET, base_offset)


def set_log_append_time(batch: bytearray | memoryview, timestamp_ms: int) -> None:
    """Stamp LogAppendTime (T-08): set the type bit and max timestamp, then redo the CRC.

    The records are not touched; readers report ``max_timestamp`` for every record of a
    LogAppendTime batch, as Kafka does.
    """
    view = memoryview(batch)
    (attributes,) = struct.unpack_from(">h", view, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", view, ATTRIBUTES_OFFSET, attributes | BatchAttributes.TIMESTAMP_TYPE)
    struct.pack_into(">q", view, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    struct.pack_into(">I", view, CRC_OFFSET, compute_crc(view))
