"""The driver's view of a Kafka cluster (Kafka mode, DESIGN §6): ``LogView``'s methods
(``source_view.SourceView``) over confluent-kafka.

- partitions: from the cluster's metadata; ``subscribePattern`` skips Kafka's internal topics
  (``__consumer_offsets``, ``__transaction_state``) as the Java consumer does by default;
- offsets: ListOffsets through ``get_watermark_offsets`` on a consumer whose ``isolation.level``
  is the query's: its low value is the log start, its high value the last stable offset (LSO)
  under read_committed and the high watermark under read_uncommitted (KAFKA-WIRE B). The log
  end (``log_end``) is the high watermark whatever the isolation level, from a second,
  read_uncommitted consumer; ``for_timestamp`` is ``offsets_for_times``;
- ``aborted_txns`` is empty: the executors' read_committed consumers drop aborted records and
  markers themselves (``kafka_partition``);
- ``topic_id``: the topic's id (KIP-516) from the AdminClient's ``describe_topics``
  (``topic_id_of``), so that a read task planned on a topic that is deleted and re-created
  before it runs notices it and never reads the new topic's records (DESIGN §6). A
  cluster that reports no ids (the zero UUID: brokers before 2.8)
  gives None: then a re-created topic is noticed only when its offsets went back
  (``planning``: data loss).

The consumers are assigned nothing and join no group: they only ask for metadata and offsets.
confluent-kafka insists on a ``group.id``; a fresh one per view is given and never used.
One instance per planning process; not picklable (it holds clients).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection
from confluent_kafka import IsolationLevel as AdminIsolationLevel
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from datasource_options.location import KafkaCluster
from offsets.offset_range import OffsetRange
from txn_log.consumer.read_committed import IsolationLevel
from txn_log.errors import ConfigError, RetriableError, UnknownTopicOrPartitionError
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_config import INTERNAL_TOPICS
from txn_log.topic_partition import TopicPartition
from txn_source.options import Assign, Subscribe, Subscription

DRIVER_TIMEOUT_S = 60.0
"""How long one metadata or ListOffsets call may take (the Java consumer's
``default.api.timeout.ms``)."""

NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
"""The zero UUID in Kafka's printed form: what a cluster that does not know topic ids
reports."""

T = TypeVar("T")
UNKNOWN_PARTITION_CODES = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
)
"""The broker's and librdkafka's own ways of saying a partition does not exist."""


class KafkaClientError(RetriableError):
    """A Kafka client call failed; the message names the call, the partition and librdkafka's
    error."""


def consumer_config(
    cluster: KafkaCluster, isolation_level: IsolationLevel, role: str
) -> dict[str, Any]:
    """The config of a source consumer: the user's ``kafka.*`` settings, then what the source
    decides (no commits, no offset reset: a position out of range is data loss)."""
    return cluster.client_config(
        group_id=f"txnlog-source-{role}-{uuid.uuid4()}",
        isolation_level=isolation_level.name.lower(),
        enable_auto_commit=False,
        enable_auto_offset_store=False,
        auto_offset_reset="error",
    )


def admin_client(cluster: KafkaCluster) -> AdminClient:
    """An AdminClient of the user's ``kafka.*`` settings that never creates a topic."""
    return AdminClient(cluster.client_config(allow_auto_create_topics=False))


def topic_id_of(
    admin: AdminClient, cluster: KafkaCluster, topic: str, timeout_s: float
) -> str | None:
    """The id of ``topic`` now, in Kafka's printed form (URL-safe base64, as the embedded log
    prints its ids); None when the cluster reports none; UnknownTopicOrPartitionError when the
    topic does not exist."""
    return topic_id_from(ask_topic_id(admin, cluster, topic, timeout_s), cluster, topic, timeout_s)


def ask_topic_id(admin: AdminClient, cluster: KafkaCluster, topic: str, timeout_s: float) -> Any:
    """``topic_id_of``'s request, sent now; ``topic_id_from`` reads its answer (so that a
    caller can ask something else meanwhile)."""
    what = f"describe_topics of {topic!r} in {cluster.describe()}"
    return call(
        what,
        lambda: admin.describe_topics(TopicCollection([topic]), request_timeout=timeout_s)[topic],
    )


def topic_id_from(asked: Any, cluster: KafkaCluster, topic: str, timeout_s: float) -> str | None:
    """The answer to ``ask_topic_id``'s request (see ``topic_id_of``)."""
    what = f"describe_topics of {topic!r} in {cluster.describe()}"
    description = call(what, lambda: asked.result(timeout_s))
    printed = str(description.topic_id) if description.topic_id is not None else NO_TOPIC_ID
    return None if printed == NO_TOPIC_ID else printed


def call(what: str, fn: Callable[[], T]) -> T:
    """``fn()``, its KafkaException turned into the matching typed error naming ``what``."""
    try:
        return fn()
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() in UNKNOWN_PARTITION_CODES:
            raise UnknownTopicOrPartitionError(f"{what}: {error.str()}") from None
        raise KafkaClientError(f"{what} failed: {exc}") from None


class KafkaView:
    """Partitions and offsets of one Kafka cluster, read at one isolation level."""

    def __init__(self, cluster: KafkaCluster, isolation_level: IsolationLevel) -> None:
        self.cluster = cluster
        self.isolation_level = isolation_level
        self._admin: AdminClient | None = None
        self._consumer = Consumer(consumer_config(cluster, isolation_level, "driver"))
        if isolation_level is IsolationLevel.READ_UNCOMMITTED:
            self._uncommitted = self._consumer
        else:
            self._uncommitted = Consumer(
                consumer_config(cluster, IsolationLevel.READ_UNCOMMITTED, "driver")
            )

    # --- partitions ------------------------------------------------------------------------------

    def _topics(self) -> dict[str, int]:
        """Topic -> partition count, from the cluster's metadata now."""
        metadata = call(
            f"metadata of {self.cluster.describe()}",
            lambda: self._consumer.list_topics(timeout=DRIVER_TIMEOUT_S),
        )
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None and topic.partitions
        }

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions ``subscription`` reads now, sorted. Subscribed topics that do not
        exist yet have none (they are read from their start once created, as Kafka does)."""
        topics = self._topics()
        if isinstance(subscription, Assign):
            for tp in subscription.partitions:
                self._check_assigned(tp, topics)
            return list(subscription.partitions)
        if isinstance(subscription, Subscribe):
            names = [t for t in subscription.topics if t in topics]
        else:
            names = [t for t in topics if t not in INTERNAL_TOPICS and subscription.matches(t)]
        return sorted(TopicPartition(t, p) for t in names for p in range(topics[t]))

    def _check_assigned(self, tp: TopicPartition, topics: dict[str, int]) -> None:
        count = topics.get(tp.topic)
        if count is None:
            raise ConfigError(
                f"option 'assign': topic {tp.topic!r} does not exist in {self.cluster.describe()}"
            )
        if tp.partition >= count:
            raise ConfigError(
                f"option 'assign': partition {tp} does not exist; topic {tp.topic!r} has "
                f"partitions 0..{count - 1}"
            )

    def exists(self, tp: TopicPartition) -> bool:
        return tp.partition < self._topics().get(tp.topic, 0)

    # --- offsets (OffsetLookup) ------------------------------------------------------------------

    def _watermarks(self, consumer: Any, tp: TopicPartition) -> tuple[int, int]:
        low, high = call(
            f"ListOffsets of {tp} in {self.cluster.describe()}",
            lambda: consumer.get_watermark_offsets(
                KafkaTopicPartition(tp.topic, tp.partition), timeout=DRIVER_TIMEOUT_S
            ),
        )
        return int(low), int(high)

    def earliest(self, topic_partition: TopicPartition) -> int:
        return self._watermarks(self._consumer, topic_partition)[0]

    def latest(self, topic_partition: TopicPartition) -> int:
        """The LSO under read_committed, the high watermark under read_uncommitted."""
        return self._watermarks(self._consumer, topic_partition)[1]

    def log_end(self, topic_partition: TopicPartition) -> int:
        return self._watermarks(self._uncommitted, topic_partition)[1]

    def log_bounds(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """One metadata request, then the log start and the high watermark of every existing
        partition in two ListOffsets requests sent together (planning asked three round trips
        per partition before)."""
        topics = self._topics()
        bounds: dict[TopicPartition, tuple[int, int] | None] = {tp: None for tp in partitions}
        present = [tp for tp in partitions if tp.partition < topics.get(tp.topic, 0)]
        if not present:
            return bounds
        asked = {KafkaTopicPartition(tp.topic, tp.partition): tp for tp in present}
        what = f"ListOffsets of {len(present)} partitions in {self.cluster.describe()}"

        def ask(spec: OffsetSpec) -> dict[Any, Any]:
            return call(
                what,
                lambda: self.admin().list_offsets(
                    dict.fromkeys(asked, spec),
                    isolation_level=AdminIsolationLevel.READ_UNCOMMITTED,
                    request_timeout=DRIVER_TIMEOUT_S,
                ),
            )

        starts, ends = ask(OffsetSpec.earliest()), ask(OffsetSpec.latest())
        for kafka_tp, tp in asked.items():
            try:
                start = call(what, lambda f=starts[kafka_tp]: f.result(DRIVER_TIMEOUT_S))
                end = call(what, lambda f=ends[kafka_tp]: f.result(DRIVER_TIMEOUT_S))
            except UnknownTopicOrPartitionError:  # gone since the metadata answered
                continue
            bounds[tp] = (int(start.offset), int(end.offset))
        return bounds

    def for_timestamp(self, topic_partition: TopicPartition, timestamp_ms: int) -> int | None:
        """First offset with a timestamp ≥ ``timestamp_ms``, capped at the readable end (T-17,
        as the embedded consumer): a broker answers "none" under read_committed when the
        first such record lies at or past the LSO, so that case is asked again at
        read_uncommitted and answered with the LSO. None when every record is older."""
        found = self._offset_for_times(self._consumer, topic_partition, timestamp_ms)
        if found is not None or self._uncommitted is self._consumer:
            return found
        past_lso = self._offset_for_times(self._uncommitted, topic_partition, timestamp_ms)
        return None if past_lso is None else self.latest(topic_partition)

    def _offset_for_times(self, consumer: Any, tp: TopicPartition, timestamp_ms: int) -> int | None:
        found = call(
            f"offsets_for_times of {tp} at {timestamp_ms} in {self.cluster.describe()}",
            lambda: consumer.offsets_for_times(
                [KafkaTopicPartition(tp.topic, tp.partition, timestamp_ms)],
                timeout=DRIVER_TIMEOUT_S,
            ),
        )[0]
        if found.error is not None:
            raise KafkaClientError(f"offsets_for_times of {tp} failed: {found.error}")
        return None if found.offset < 0 else int(found.offset)

    def latest_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.latest(tp) for tp in partitions}

    def topic_id(self, topic_partition: TopicPartition) -> str | None:
        """The id of the partition's topic now (None: the cluster reports no ids)."""
        return topic_id_of(self.admin(), self.cluster, topic_partition.topic, DRIVER_TIMEOUT_S)

    def admin(self) -> AdminClient:
        """The view's AdminClient, built on first use."""
        if self._admin is None:
            self._admin = admin_client(self.cluster)
        return self._admin

    # --- transactions ----------------------------------------------------------------------------

    def aborted_txns(self, offset_range: OffsetRange) -> tuple[AbortedTxn, ...]:
        """None to plan: the executors' read_committed consumers filter aborted records."""
        return ()

    def close(self) -> None:
        self._consumer.close()
        if self._uncommitted is not self._consumer:
            self._uncommitted.close()

    def __enter__(self) -> KafkaView:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
