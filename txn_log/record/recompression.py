"""A record batch compressed again in another codec: what a broker does to a batch whose codec
is not its topic's ``compression.type`` (Kafka's ``LogValidator``: no in-place assignment when
the source and target codecs differ; DESIGN §4).

Only the codec changes. The records section is inflated (within the caller's bound,
``batch_records.records_section``) and compressed again as one stream in the target codec
(``compression``); its bytes are the producer's, record for record, so every record keeps its
offset delta, timestamp delta, key, value and headers. The 61-byte header keeps every field but
three::

    batch_length  the new records section's length + 49
    attributes    codec bits 0-2 set to the target; timestamp type, transactional and control
                  bits kept (a control batch is never handed in: the validator refuses clients'
                  ones and markers are written by the coordinator)
    crc           CRC-32C of the new bytes from the attributes on (F-26)

so the producer id, epoch and base sequence (idempotence and transactions: P-08, F-14), the
base and max timestamps and ``last_offset_delta`` (the offsets the batch takes) are those the
producer sent. The base offset is left as it was: the log assigns it afterwards, outside the CRC
(F-11). Pure functions, thread-safe.
"""

from __future__ import annotations

import struct

from txn_log.record.batch_header import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    compute_crc,
)
from txn_log.record.batch_records import records_section
from txn_log.record.compression import compress

_INT16 = struct.Struct(">h")  # attributes
_INT32 = struct.Struct(">i")  # batch_length
_UINT32 = struct.Struct(">I")  # crc


def recompress_batch(
    batch: bytearray, header: BatchHeader, codec: Compression, max_records_bytes: int
) -> bytearray:
    """``batch`` (one whole, validated batch, ``header`` its header) with its records section
    in ``codec``; a copy, ``batch`` is not changed. RecordTooLargeError when the section
    inflates past ``max_records_bytes``; UnsupportedCompressionTypeError when this build cannot
    write ``codec``."""
    records, position = records_section(batch, header, max_records_bytes)
    body = compress(memoryview(records)[position:], codec)
    out = bytearray(HEADER_SIZE + len(body))
    out[:HEADER_SIZE] = memoryview(batch)[:HEADER_SIZE]
    out[HEADER_SIZE:] = body
    _INT32.pack_into(out, BATCH_LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    attributes = (header.attributes & ~COMPRESSION_MASK) | int(codec)
    _INT16.pack_into(out, ATTRIBUTES_OFFSET, attributes)
    _UINT32.pack_into(out, CRC_OFFSET, compute_crc(out))
    return out
