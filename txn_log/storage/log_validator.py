"""What a partition checks and rewrites in a client batch before writing it: Kafka's
``LogValidator`` (F-09, F-11, F-25, F-26, F-31, T-08, K-04).

One append computes the batch's CRC-32C once (twice with LogAppendTime), never more:

1. ``validate_client_batch`` checks the whole batch once, before the partition lock is taken:
   length and CRC-32C (``validate_batch``), a known codec, not a control batch, at most
   ``max.message.bytes``, at least one record. It changes nothing.
2. Under the lock, ``assign_offsets`` rewrites the base offset, which lies outside the CRC
   (F-11), so the CRC checked in step 1 still holds, and, when the topic asks for
   LogAppendTime, stamps it inside the CRC and recomputes the CRC once (T-08). The header is
   parsed again (61 bytes) but the batch is not checked whole again, neither here nor by the
   segment it is written to (``LogSegment.append(verify_crc=False)``).

The caller hands in its own copy of the client's bytes, so the bytes checked in step 1 are
exactly the bytes written. Stateless; thread-safe.
"""

from __future__ import annotations

from txn_log.clock import Clock
from txn_log.errors import ExpectedOffsetMismatchError, InvalidRecordError, RecordTooLargeError
from txn_log.record.batch_header import (
    BatchHeader,
    TimestampType,
    parse_header,
    set_base_offset,
    set_log_append_time,
    validate_batch,
)
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

NO_EXPECTED_OFFSET = -1
NO_LOG_APPEND_TIME = -1


def validate_client_batch(
    topic_partition: TopicPartition, config: TopicConfig, batch: bytearray
) -> BatchHeader:
    """The one full check of a client batch (step 1 above); raises CorruptRecordError,
    UnsupportedCompressionTypeError, InvalidRecordError or RecordTooLargeError."""
    header = validate_batch(batch)
    _ = header.compression  # an unknown codec raises UnsupportedCompressionTypeError
    if header.is_control:
        raise InvalidRecordError(
            f"{topic_partition}: a client may not append a control batch; COMMIT and "
            "ABORT markers are written by the transaction coordinator only (F-31)"
        )
    if len(batch) > config.max_message_bytes:
        raise RecordTooLargeError(
            f"{topic_partition}: batch of {len(batch)} bytes exceeds the topic's "
            f"max.message.bytes of {config.max_message_bytes} (F-09)"
        )
    if header.records_count < 1:
        raise InvalidRecordError(f"{topic_partition}: a data batch must hold records")
    return header


def check_expected_offset(
    topic_partition: TopicPartition, config: TopicConfig, expected_offset: int, log_end: int
) -> None:
    """KIP-27 (K-04): when the topic enables ``check.expected.offsets`` and ``expected_offset``
    is not -1, it must equal the log end offset (exclusive), or the whole batch is refused."""
    if not config.check_expected_offsets or expected_offset == NO_EXPECTED_OFFSET:
        return
    if expected_offset != log_end:
        raise ExpectedOffsetMismatchError(
            f"{topic_partition}: expected offset {expected_offset} does not match the "
            f"log end offset {log_end}; the whole batch was refused (KIP-27)"
        )


def assign_offsets(
    batch: bytearray, base_offset: int, config: TopicConfig, clock: Clock
) -> tuple[BatchHeader, int]:
    """Give a validated batch its offsets from ``base_offset`` (inclusive), and LogAppendTime
    (``clock``'s now) if the topic uses it (step 2 above); returns the new header and the
    LogAppendTime stamped (-1 when none). The records are never decompressed (KIP-31)."""
    set_base_offset(batch, base_offset)
    log_append_time = NO_LOG_APPEND_TIME
    if config.message_timestamp_type is TimestampType.LOG_APPEND_TIME:
        log_append_time = clock.time_ms()
        set_log_append_time(batch, log_append_time)
    return parse_header(batch), log_append_time
