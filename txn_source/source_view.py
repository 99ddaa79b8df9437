"""What planning needs from where the source reads, whatever that is (DESIGN §6).

``SourceView`` is the driver's view of a log directory (``log_view.LogView``) or of a Kafka
cluster (``kafka_view.KafkaView``); ``open_view`` picks one by the options' location, so
``planning``, ``stream_planner`` and ``reader`` stay the same in both modes. Only the read
tasks differ, and ``planning`` builds those by mode.

A view belongs to one planning process; none is picklable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from offsets.offset_range import OffsetRange
from offsets.resolve import OffsetLookup
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_partition import TopicPartition
from txn_source.options import SourceOptions, Subscription


class SourceView(OffsetLookup, Protocol):
    """Partitions and offsets at the query's isolation level (``OffsetLookup``), plus what a
    read task is planned with."""

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions ``subscription`` reads now, sorted; ConfigError for an ``assign``ed
        partition that does not exist."""
        ...

    def exists(self, tp: TopicPartition) -> bool: ...

    def log_bounds(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """``(log start, log end)`` of each partition now, whatever the isolation level;
        None for one that does not exist."""
        ...

    def latest_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]: ...

    def topic_id(self, topic_partition: TopicPartition) -> str | None:
        """The id of the partition's topic now; None where it is not known."""
        ...

    def aborted_txns(self, offset_range: OffsetRange) -> tuple[AbortedTxn, ...]:
        """What the executor must drop by itself; () where its reads filter for it."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> SourceView: ...

    def __exit__(self, *exc_info: object) -> None: ...


def open_view(options: SourceOptions) -> SourceView:
    """A ``KafkaView`` in Kafka mode (confluent-kafka is imported only then), else a
    ``LogView`` of the log directory."""
    cluster = options.kafka
    if cluster is not None:
        from txn_source.kafka_view import KafkaView

        return KafkaView(cluster, options.isolation_level)
    from txn_source.log_view import LogView

    return LogView(options.path, options.isolation_level)
