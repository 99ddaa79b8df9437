"""The driver's view of the log: which partitions a subscription reads now, their offsets at the
query's isolation level, and the aborted transactions inside a planned range.

It implements ``offsets.resolve.OffsetLookup``. Under read_committed ``latest`` is the last
stable offset, and asking for it lets the coordinator abort a transaction past its timeout
(DESIGN §4), so a stream never waits forever on a dead producer.

One instance per planning process; not picklable (it holds open files). Never creates a log:
the caller checks the path first (``options.check_log_path``).
"""

from __future__ import annotations

from collections.abc import Sequence

from offsets.offset_range import OffsetRange
from txn_log.consumer.read_committed import IsolationLevel
from txn_log.errors import ConfigError, UnknownTopicIdError, UnknownTopicOrPartitionError
from txn_log.log import Log
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_partition import TopicPartition
from txn_source.options import Assign, Subscribe, Subscription


class LogView:
    """Partitions and offsets of one log, read at one isolation level."""

    def __init__(self, path: str, isolation_level: IsolationLevel) -> None:
        self._log = Log.open(path)
        self._consumer = self._log.consumer(isolation_level)
        self.isolation_level = isolation_level

    # --- partitions ------------------------------------------------------------------------------

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions ``subscription`` reads now, sorted. Subscribed topics that do not
        exist yet have none (they are read from their start once created, as Kafka does)."""
        if isinstance(subscription, Assign):
            for tp in subscription.partitions:
                self._check_exists(tp)
            return list(subscription.partitions)
        existing = self._log.topics()
        if isinstance(subscription, Subscribe):
            topics = [t for t in subscription.topics if t in existing]
        else:
            topics = [t for t in existing if subscription.matches(t)]
        return sorted(tp for topic in topics for tp in self._log.partitions(topic))

    def _check_exists(self, tp: TopicPartition) -> None:
        try:
            count = len(self._log.partitions(tp.topic))
        except UnknownTopicOrPartitionError as exc:
            raise ConfigError(f"option 'assign': {exc}") from None
        if tp.partition >= count:
            raise ConfigError(
                f"option 'assign': partition {tp} does not exist; topic {tp.topic!r} has "
                f"partitions 0..{count - 1}"
            )

    def exists(self, tp: TopicPartition) -> bool:
        try:
            return tp.partition < len(self._log.partitions(tp.topic))
        except UnknownTopicOrPartitionError:
            return False

    # --- offsets (OffsetLookup) ------------------------------------------------------------------

    def earliest(self, topic_partition: TopicPartition) -> int:
        return self._consumer.start_offset(topic_partition)

    def latest(self, topic_partition: TopicPartition) -> int:
        return self._consumer.end_offset(topic_partition)

    def log_end(self, topic_partition: TopicPartition) -> int:
        return self._log.partition_log(topic_partition).log_end_offset

    def log_bounds(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        return {
            tp: (self.earliest(tp), self.log_end(tp)) if self.exists(tp) else None
            for tp in partitions
        }

    def for_timestamp(self, topic_partition: TopicPartition, timestamp_ms: int) -> int | None:
        return self._consumer.offset_for_timestamp(topic_partition, timestamp_ms)

    def latest_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.latest(tp) for tp in partitions}

    def topic_id(self, topic_partition: TopicPartition) -> str | None:
        """The id of the topic the partition belongs to now (Kafka's topic id, KIP-516)."""
        return self._log.partition_log(topic_partition).topic_id

    # --- transactions ----------------------------------------------------------------------------

    def aborted_txns(self, offset_range: OffsetRange) -> tuple[AbortedTxn, ...]:
        """Aborted transactions overlapping the range, as the engine's read plan collects
        them (``Consumer.aborted_txns``, the rule every reader uses); none under
        read_uncommitted, which delivers aborted records too.

        When the topic is deleted or re-created while they are collected, none: the range's
        ``topic_id`` (asked first, ``planning``) is then not the topic's any more, and the
        executor reports the partition gone instead of reading it (``partition``)."""
        tp = offset_range.topic_partition
        try:
            return tuple(self._consumer.aborted_txns(tp, offset_range.start, offset_range.end))
        except UnknownTopicIdError:
            return ()

    def close(self) -> None:
        self._log.close()

    def __enter__(self) -> LogView:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
