"""Record batches no well-behaved client writes, with a CRC that passes: what an adversary sends.

Each builder starts from a batch the codec encodes and changes what it must (a header field,
the records section, the codec bits), then recomputes the CRC-32C over attributes..end (F-26),
so the batch passes the CRC check and only the validator can refuse it. Shared by the engine's
validator tests and the wire tests that send the same bytes through ``txnlog serve``.
"""

from __future__ import annotations

import struct
import zlib

from txn_log.record.batch_header import (
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    compute_crc,
)
from txn_log.record.codec import encode_records

NOW = 1_700_000_000_000
FIELDS = (
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "records_count",
)


def good_batch(
    values: list[bytes], *, keys: list[bytes | None] | None = None, **options: object
) -> bytes:
    """A valid batch of ``values`` (keys null unless given), encoded by the codec."""
    keys = keys if keys is not None else [None] * len(values)
    records = [(k, v, NOW, ()) for k, v in zip(keys, values, strict=True)]
    return encode_records(records, now_ms=NOW, **options)


def with_crc(batch: bytes | bytearray) -> bytes:
    """``batch`` with its CRC-32C recomputed, so that it passes the CRC check (F-26)."""
    data = bytearray(batch)
    struct.pack_into(">I", data, CRC_OFFSET, compute_crc(data))
    return bytes(data)


def with_header(batch: bytes, **changes: int) -> bytes:
    """``batch`` with header fields (``HEADER``'s names) changed and its CRC recomputed."""
    values = dict(zip(FIELDS, HEADER.unpack_from(batch), strict=True))
    unknown = set(changes) - set(values)
    if unknown:
        raise ValueError(f"no header field {sorted(unknown)}")
    values.update(changes)
    return with_crc(HEADER.pack(*values.values()) + batch[HEADER_SIZE:])


def with_records_section(batch: bytes, section: bytes, *, compression: int | None = None) -> bytes:
    """``batch``'s header over another records section (length fixed, CRC recomputed);
    ``compression`` sets the codec bits."""
    values = dict(zip(FIELDS, HEADER.unpack_from(batch), strict=True))
    values["batch_length"] = HEADER_SIZE - LOG_OVERHEAD + len(section)
    if compression is not None:
        values["attributes"] = (values["attributes"] & ~0x07) | compression
    return with_crc(HEADER.pack(*values.values()) + section)


def gzip_bytes(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


def undecompressable_gzip(values: list[bytes]) -> bytes:
    """A gzip batch whose records section is not a gzip stream (its CRC is valid)."""
    batch = good_batch(values, compression=Compression.GZIP)
    section = bytearray(batch[HEADER_SIZE:])
    section[len(section) // 2 :] = b"\xa5" * (len(section) - len(section) // 2)
    return with_records_section(batch, bytes(section))


def gzip_bomb(expanded_bytes: int) -> bytes:
    """A one-record gzip batch whose records section inflates to ``expanded_bytes`` of zeros
    (a ~1,000:1 ratio: 1 GiB is about a megabyte on the wire)."""
    batch = good_batch([b"x"], compression=Compression.GZIP)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = [packer.compress(chunk) for _ in range(expanded_bytes >> 20)]
    parts.append(packer.flush())
    return with_records_section(batch, b"".join(parts))


def records_of(batch: bytes) -> bytes:
    """The uncompressed records section of an uncompressed batch."""
    return batch[HEADER_SIZE:]
