"""What a partition checks and rewrites in a client batch before writing it: Kafka's
``LogValidator`` (F-05, F-09, F-11, F-14, F-18, F-25, F-26, F-31, T-08, K-04; DESIGN §1, §4).

Every append path reaches the log through ``PartitionLog.append`` (the engine's producers and
the Spark sink through it, ``txnlog serve``'s Produce through it), so these checks are made
once, here, for all of them. One append computes the batch's CRC-32C once (twice with
LogAppendTime), never more:

1. ``validate_client_batch`` checks the whole batch once, before the partition lock is taken,
   and changes nothing:
   - the frame: length and CRC-32C (``validate_batch``), a known codec, not a control batch
     (F-31), at most ``max.message.bytes`` (F-09);
   - the header against itself: at least one record, and ``last_offset_delta`` equal to
     ``records_count - 1`` (F-05: else the next batch would take the same offsets, or the
     log end would jump by up to 2³¹); a producer id of -1 or above; a transactional batch
     carries a producer id (F-14); a client's idempotent batch carries a sequence;
   - the header against the records, for client batches: the records section inflates
     within ``records_limit`` (a decompression bomb is refused, never inflated), holds
     exactly ``records_count`` well-formed records with offset deltas 0..n-1
     (``batch_records.check_records``), and on a compacted topic every record has a key
     (Kafka: "Compacted topic cannot accept message without key"; the cleaner could never
     remove it).
   Kafka's errors: INVALID_RECORD (87) for a batch whose parts disagree, CORRUPT_MESSAGE (2)
   for bytes that do not decode, MESSAGE_TOO_LARGE (10) for size.
   Then ``maybe_recompress``: when the topic's ``compression.type`` is a codec (not
   ``producer``) and the batch is in another one, the batch is compressed again in the
   topic's codec (``record.recompression``), keeping its producer id, epoch, sequence,
   transactional bit, timestamps and records; its size is checked against
   ``max.message.bytes`` again, as Kafka does when a message's size may have changed. The
   caller passes client batches only: a control batch is never recompressed (Kafka: "do not
   compress control records"), nor are the coordinators' own batches. The second CRC
   computation of such an append is the new batch's.
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
from txn_log.errors import (
    ExpectedOffsetMismatchError,
    InvalidRecordError,
    RecordTooLargeError,
    TxnLogError,
)
from txn_log.record.batch_header import (
    NO_PRODUCER_ID,
    BatchHeader,
    TimestampType,
    parse_header,
    set_base_offset,
    set_log_append_time,
    validate_batch,
)
from txn_log.record.batch_records import check_records
from txn_log.record.compression import records_limit
from txn_log.record.recompression import recompress_batch
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

NO_EXPECTED_OFFSET = -1
NO_LOG_APPEND_TIME = -1


def validate_client_batch(
    topic_partition: TopicPartition,
    config: TopicConfig,
    batch: bytearray,
    *,
    client: bool = True,
) -> BatchHeader:
    """The one full check of a batch before it is appended (step 1 above); raises
    CorruptRecordError, UnsupportedCompressionTypeError, InvalidRecordError or
    RecordTooLargeError. ``client`` False (the coordinators' own batches, which the engine
    encoded) skips the walk of the records and the sequence rule."""
    header = validate_batch(batch)
    _ = header.compression  # an unknown codec raises UnsupportedCompressionTypeError
    if header.is_control:
        raise InvalidRecordError(
            f"{topic_partition}: a client may not append a control batch; COMMIT and "
            "ABORT markers are written by the transaction coordinator only"
        )
    if len(batch) > config.max_message_bytes:
        raise RecordTooLargeError(
            f"{topic_partition}: batch of {len(batch)} bytes exceeds the topic's "
            f"max.message.bytes of {config.max_message_bytes}"
        )
    _check_header(topic_partition, header, client=client)
    if client:
        _check_records(topic_partition, config, batch, header)
    return header


def maybe_recompress(
    topic_partition: TopicPartition, config: TopicConfig, batch: bytearray, header: BatchHeader
) -> tuple[bytearray, BatchHeader]:
    """``(batch, header)`` as the topic stores it: unchanged when its codec is the topic's
    target (``TopicConfig.target_compression``), else a copy compressed again in that codec
    (step 1 above). RecordTooLargeError when the new batch exceeds ``max.message.bytes``."""
    target = config.target_compression(header.compression)
    if target is header.compression or header.is_control:
        return batch, header
    limit = records_limit(config.max_message_bytes)
    try:
        converted = recompress_batch(batch, header, target, limit)
    except TxnLogError as error:
        raise type(error)(f"{topic_partition}: {error}") from None
    if len(converted) > config.max_message_bytes:
        raise RecordTooLargeError(
            f"{topic_partition}: batch of {len(batch)} bytes in {header.compression.name.lower()}"
            f" is {len(converted)} bytes in the topic's compression.type "
            f"{config.compression_type}, more than its max.message.bytes of "
            f"{config.max_message_bytes}"
        )
    return converted, parse_header(converted)


def _check_header(topic_partition: TopicPartition, header: BatchHeader, *, client: bool) -> None:
    """The header's fields against each other (Kafka's ``LogValidator.validateBatch``)."""
    count = header.records_count
    if count < 1:
        raise InvalidRecordError(
            f"{topic_partition}: a data batch must hold records; records_count is {count}"
        )
    if header.last_offset_delta != count - 1:
        raise InvalidRecordError(
            f"{topic_partition}: inconsistent batch offset range and record count: "
            f"last_offset_delta {header.last_offset_delta} with {count} records (it must be "
            f"{count - 1}: a batch's offsets are base_offset..base_offset + count - 1)"
        )
    if header.producer_id < NO_PRODUCER_ID:
        raise InvalidRecordError(
            f"{topic_partition}: producer id {header.producer_id} is invalid (-1 for none, "
            "else >= 0)"
        )
    if header.is_transactional and not header.has_producer_id:
        raise InvalidRecordError(
            f"{topic_partition}: a transactional batch must carry a producer id"
        )
    if client and header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(
            f"{topic_partition}: invalid sequence number {header.base_sequence} for producer "
            f"{header.producer_id}: a batch with a producer id carries a sequence >= 0"
        )


def _check_records(
    topic_partition: TopicPartition, config: TopicConfig, batch: bytearray, header: BatchHeader
) -> None:
    """The records against the header, within the topic's inflation limit, and the
    compacted topic's key rule."""
    limit = records_limit(config.max_message_bytes)
    try:
        summary = check_records(batch, header, limit)
    except TxnLogError as error:
        raise type(error)(f"{topic_partition}: {error}") from None
    if config.compact and summary.null_keys:
        why = (
            "Compacted topic cannot accept message without key in topic partition "
            f"{topic_partition}."
        )
        raise InvalidRecordError(
            f"{topic_partition}: compacted topic cannot accept a record without a key "
            f"({summary.null_keys} of the batch's {summary.records} records have none): the "
            "log cleaner keeps one record per key, and could never remove a keyless one",
            tuple((index, why) for index in summary.null_key_indexes),
        )


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
            f"log end offset {log_end}; the whole batch was refused"
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
