"""DeleteRecords (Kafka's API 21, ``kafka-delete-records``): move partitions' log start offsets
forward (DESIGN §2, "Deleting records").

Kafka's rules (``ReplicaManager.deleteRecordsOnLocalLog``, ``Partition.deleteRecordsOnLeader``,
``UnifiedLog.maybeIncrementLogStartOffset``), checked in this order per partition:

    an internal topic (its coordinators replay it        InvalidTopicError (17)
      from its log start)
    a partition that does not exist                      UnknownTopicOrPartitionError (3)
    ``cleanup.policy`` without ``delete``                PolicyViolationError (44)
    offset -1                                            the high watermark
    any other offset below 0, or above the high          OffsetOutOfRangeError (1), naming
      watermark                                          the valid range [0, high watermark]
    an offset at or below the current log start          nothing changes
    otherwise                                            the log start moves to it, durably

The answer per partition is its low watermark: the log start offset after the call (Kafka's
``lowWatermark``; with no replicas here, the leader's log start). Nothing is deleted from disk
here: segments wholly below the new start go at the next retention pass (``retention``), as
Kafka leaves them to its retention thread; readers refuse offsets below the start at once.

Pure functions; the partition writer (``PartitionLog.delete_records``) applies them under its
lock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from txn_log.errors import (
    InvalidTopicError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    TxnLogError,
)
from txn_log.topic_config import INTERNAL_TOPICS, TopicConfig
from txn_log.topic_partition import TopicPartition

HIGH_WATERMARK = -1
"""The offset that means "up to the high watermark" (Kafka's ``HIGH_WATERMARK``)."""

INVALID_LOW_WATERMARK = -1
"""Kafka's low watermark of a partition whose deletion failed."""


@dataclass(frozen=True)
class DeleteRecordsResult:
    """What DeleteRecords did to one partition: ``low_watermark`` is its log start offset after
    the call (inclusive), or ``INVALID_LOW_WATERMARK`` with ``error`` set when it was refused
    (nothing changed then)."""

    topic_partition: TopicPartition
    low_watermark: int
    error: TxnLogError | None = None


def check_topic(topic_partition: TopicPartition, config: TopicConfig) -> None:
    """Refuse records of an internal topic (InvalidTopicError) and of a topic whose
    ``cleanup.policy`` does not name ``delete`` (PolicyViolationError), as Kafka does."""
    if topic_partition.topic in INTERNAL_TOPICS:
        raise InvalidTopicError(
            f"cannot delete records of internal topic {topic_partition.topic!r} "
            f"({topic_partition}): its coordinator replays it from its log start"
        )
    if not config.delete:
        raise PolicyViolationError(
            f"records of partition {topic_partition} cannot be deleted: its topic has "
            f"cleanup.policy={config.cleanup_policy}, and only topics whose policy names "
            "'delete' allow it"
        )


def new_log_start_offset(
    topic_partition: TopicPartition, requested_offset: int, high_watermark: int
) -> int:
    """The log start ``requested_offset`` asks for (-1: the high watermark); raises
    OffsetOutOfRangeError naming the partition, the offset and the valid range unless it lies
    in [0, high watermark]. Whether it moves the start forward is the caller's to decide."""
    offset = high_watermark if requested_offset == HIGH_WATERMARK else requested_offset
    if not 0 <= offset <= high_watermark:
        raise OffsetOutOfRangeError(
            f"{topic_partition}: cannot delete records before offset {requested_offset}: "
            f"the offset must lie in [0, {high_watermark}] (the high watermark), or be "
            f"{HIGH_WATERMARK} for the high watermark"
        )
    return offset


def delete_records(
    offsets: Mapping[TopicPartition, int], delete: Callable[[TopicPartition, int], int]
) -> dict[TopicPartition, DeleteRecordsResult]:
    """Apply ``delete(partition, offset) -> low watermark`` to each partition; a refusal (a
    ``TxnLogError``) becomes that partition's result and the others go on, as Kafka answers
    each partition on its own. Partitions are not atomic together (nor are they in Kafka)."""
    results: dict[TopicPartition, DeleteRecordsResult] = {}
    for topic_partition, offset in offsets.items():
        try:
            results[topic_partition] = DeleteRecordsResult(
                topic_partition, delete(topic_partition, offset)
            )
        except TxnLogError as error:
            results[topic_partition] = DeleteRecordsResult(
                topic_partition, INVALID_LOW_WATERMARK, error
            )
    return results
