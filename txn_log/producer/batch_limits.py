"""The size rules of one producer batch (F-09): whether a record fits a topic's
``max.message.bytes`` alone, compressed or not (``check_record_fits``, ``send()``'s check, and
``fits_alone_size``, the size below which its common case needs no check), how many records
the next part of a batch that came out too large takes (``split_count``), and the error that
names a record too large even alone (``drop_too_large``, ``too_large_message``). Pure
functions of their arguments, but ``drop_too_large``, which removes the record it names.
"""

from __future__ import annotations

from collections.abc import Callable

from txn_log.errors import RecordTooLargeError
from txn_log.producer.producer_batch import ProducerBuffer
from txn_log.producer.producer_record import ProducerRecord, max_compressed_size, record_size
from txn_log.record.batch_header import HEADER_SIZE, Compression
from txn_log.topic_partition import TopicPartition

MAX_BATCH_BYTES = (1 << 31) - 1
"""The batch length field's limit (int32), whatever ``max.message.bytes`` says."""


def split_count(count: int, batch_bytes: int, limit: int) -> int:
    """How many of the ``count`` records whose batch took ``batch_bytes`` (> ``limit``) to
    put in the next, smaller batch: their share of the limit, at least one, fewer than
    ``count`` (so that splitting always ends)."""
    return max(1, min(count - 1, count * limit // batch_bytes))


def fits_alone_size(max_bytes: int, compression: Compression) -> int:
    """The largest record size (in a batch, header excluded) that ``check_record_fits``
    accepts on its first comparison: any record at most this large fits ``max_bytes`` alone,
    compressed or not. -1 when none does."""
    limit = min(max_bytes, MAX_BATCH_BYTES) - HEADER_SIZE
    low, high = -1, max(limit, -1)  # max_compressed_size(s) >= s: the answer is below limit
    while low < high:
        middle = (low + high + 1) // 2
        if max_compressed_size(middle, compression) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def check_record_fits(
    tp: TopicPartition,
    record: ProducerRecord,
    body_size: int,
    size_in_batch: int,
    max_bytes: int,
    compression: Compression,
    encode: Callable[[list[ProducerRecord], int], bytes | memoryview],
) -> None:
    """RecordTooLargeError unless ``record`` alone makes a batch within ``max_bytes`` (F-09):
    exactly, and compressed (``encode``, the producer's own) when ``max_compressed_size`` says
    the codec could grow it past the limit. That is the batch the producer writes for this
    record alone, so a record accepted here never fails there on size while the config holds.

    ``size_in_batch`` (the record's size at its place in its buffer, never less than alone)
    decides the common case in one comparison.
    """
    limit = min(max_bytes, MAX_BATCH_BYTES)
    if HEADER_SIZE + max_compressed_size(size_in_batch, compression) <= limit:
        return
    size = record_size(body_size, 0, 0)
    if HEADER_SIZE + size > limit:
        raise RecordTooLargeError(too_large_message(tp, size, None, max_bytes))
    if HEADER_SIZE + max_compressed_size(size, compression) > limit:
        compressed = len(encode([record], 0))
        if compressed > limit:
            raise RecordTooLargeError(
                too_large_message(tp, size, (compressed, compression), max_bytes)
                + "; the data does not compress: send it uncompressed or in smaller records"
            )


def drop_too_large(
    tp: TopicPartition,
    buffer: ProducerBuffer,
    batch_bytes: int,
    limit: int,
    compression: Compression,
) -> RecordTooLargeError:
    """Drop the record at the head of ``buffer``, whose batch alone took ``batch_bytes`` (more
    than ``limit``), and return the error that names it, for the caller to raise."""
    size = buffer.head_size()
    key = buffer.head_key()
    buffer.remove_head(1)
    compressed = None if compression is Compression.NONE else (batch_bytes, compression)
    return RecordTooLargeError(
        f"{too_large_message(tp, size, compressed, limit)}; the record ("
        f"{'null key' if key is None else f'key {key[:40]!r}'}) was dropped, "
        f"{buffer.count} record(s) after it stay buffered"
    )


def too_large_message(
    tp: TopicPartition,
    record_bytes: int,
    compressed: tuple[int, Compression] | None,
    max_bytes: int,
) -> str:
    """RecordTooLargeError's message: the record's size, its batch's size before (and after)
    compression, and the limit (F-09)."""
    batch = f"a batch of {HEADER_SIZE + record_bytes} bytes"
    if compressed is not None:
        batch += f", {compressed[0]} bytes with {compressed[1].name.lower()} compression"
    return (
        f"{tp}: record of {record_bytes} bytes makes {batch}, more than the topic's "
        f"max.message.bytes of {max_bytes}"
    )
