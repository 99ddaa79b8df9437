"""``Log``: the engine's facade: one open log directory and everything that works on it.

``Log`` only wires the engine's parts together (DESIGN §1): the ``LogManager`` (the directory,
its topics and partitions, the clock and producer ids), the group offset store over it, the
transaction coordinator over both, and producers and consumers over all three. None of them
knows ``Log``; they take the parts they use, so imports point one way, from here down.

    Log.open(path) → LogManager.open(path)          storage: topics, partitions, housekeeping
                     GroupOffsetStore(manager)      __consumer_offsets
                     TransactionCoordinator(manager, group offsets)
    log.producer() → Producer(manager, coordinator, group offsets)
    log.consumer() → Consumer(manager, coordinator)

A writable ``Log`` runs housekeeping (retention, producer-id expiration) for the partitions it
has open, periodically and on demand (``housekeeping``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from txn_log.clock import SYSTEM_CLOCK, Clock
from txn_log.consumer.consumer import Consumer
from txn_log.consumer.read_committed import IsolationLevel
from txn_log.coordinator.transaction_coordinator import TransactionCoordinator
from txn_log.group.group_offsets import GroupOffsetStore, OffsetAndMetadata
from txn_log.log_dir.alter_configs import AlterConfigOp, set_ops
from txn_log.log_dir.housekeeping import (
    DEFAULT_CLEANER_IO_MAX_BYTES_PER_SECOND,
    DEFAULT_HOUSEKEEPING_INTERVAL_MS,
    HousekeepingPass,
)
from txn_log.log_dir.log_format import FORMAT_FILE as FORMAT_FILE
from txn_log.log_dir.log_format import FORMAT_VERSION as FORMAT_VERSION
from txn_log.log_dir.log_manager import MAX_PARTITIONS as MAX_PARTITIONS
from txn_log.log_dir.log_manager import TOPICS_DIR as TOPICS_DIR
from txn_log.log_dir.log_manager import LogManager
from txn_log.log_dir.log_manager import write_json_atomically as write_json_atomically
from txn_log.producer.producer import Producer
from txn_log.storage.delete_records import DeleteRecordsResult
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.partition_reader import PartitionReader
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition


class Log:
    """An open log directory. Safe to share between threads; any number of processes may open
    the same directory at once."""

    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager
        self.path = log_manager.path
        self.clock = log_manager.clock
        self.read_only = log_manager.read_only
        self.producer_ids = log_manager.producer_ids
        self.broker_configs = log_manager.broker_configs
        """The log's dynamic broker configs (``log_dir.broker_config``): ``current()`` and
        ``alter(resource, ops, ...)``, Kafka's AlterConfigs / IncrementalAlterConfigs of a
        BROKER resource."""
        self.group_offsets = GroupOffsetStore(log_manager)
        self.coordinator = TransactionCoordinator(log_manager, self.group_offsets)
        """The transaction coordinator (every process is a peer, DESIGN §3)."""

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        clock: Clock = SYSTEM_CLOCK,
        read_only: bool = False,
        housekeeping_interval_ms: int | None = DEFAULT_HOUSEKEEPING_INTERVAL_MS,
        cleaner_io_max_bytes_per_second: float = DEFAULT_CLEANER_IO_MAX_BYTES_PER_SECOND,
    ) -> Log:
        """The log at ``path``, opened (or created) by ``LogManager.open``, which documents the
        arguments and errors, with its coordinator, group offset store and clients wired."""
        return cls(
            LogManager.open(
                path,
                clock=clock,
                read_only=read_only,
                housekeeping_interval_ms=housekeeping_interval_ms,
                cleaner_io_max_bytes_per_second=cleaner_io_max_bytes_per_second,
            )
        )

    # --- topics and partitions (the LogManager's) ------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: Mapping[str, Any] | None = None,
        *,
        internal: bool = False,
    ) -> None:
        """Create a topic; everything is validated before anything is written."""
        self.log_manager.create_topic(name, partitions, config, internal=internal)

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka's CreatePartitions; never shrinks;
        internal topics never grow); ``validate_only`` checks and writes nothing."""
        self.log_manager.create_partitions(name, total, validate_only=validate_only)

    def delete_topic(self, name: str, *, topic_id: str | None = None) -> int:
        """Delete a topic and all its data; returns the number of partitions removed.

        Internal topics cannot be deleted, nor a topic an open transaction has written to
        (ConcurrentTransactionsError): the coordinator is held meanwhile, so none can start
        writing to it either (``LogManager.delete_topic``). With ``topic_id``, only the topic
        of that id (UnknownTopicIdError if the name now belongs to another).
        """
        return self.log_manager.delete_topic(
            name, self.coordinator.topic_deletion_guard, topic_id=topic_id
        )

    def topics(self, *, include_internal: bool = False) -> list[str]:
        """Every topic, sorted by name."""
        return self.log_manager.topics(include_internal=include_internal)

    def partitions(self, topic: str) -> list[TopicPartition]:
        """The topic's partitions, in order (re-read, so partitions added elsewhere appear)."""
        return self.log_manager.partitions(topic)

    def topic_config(self, topic: str) -> TopicConfig:
        """The topic's config as it is now (peers may alter it: ``alter_topic_config``)."""
        return self.log_manager.topic_config(topic)

    def topic_config_overrides(self, topic: str) -> frozenset[str]:
        """The keys of the topic's config set explicitly, at creation or by an alteration."""
        return self.log_manager.topic_config_overrides(topic)

    def alter_topic_config(
        self, name: str, config: Mapping[str, Any], *, validate_only: bool = False
    ) -> TopicConfig:
        """Replace the topic's config (Kafka's AlterConfigs): the keys of ``config`` take its
        values, every other key goes back to its default; returns the new config. Every
        process applies it at its next operation on the topic (``LogManager.
        alter_topic_config``, which documents the errors); ``validate_only`` writes nothing."""
        return self.log_manager.alter_topic_config(
            name, set_ops(config), replace=True, validate_only=validate_only
        )

    def incremental_alter_topic_config(
        self, name: str, ops: Sequence[AlterConfigOp], *, validate_only: bool = False
    ) -> TopicConfig:
        """Change the keys ``ops`` name (Kafka's IncrementalAlterConfigs: SET, DELETE back to
        the default, APPEND to / SUBTRACT from cleanup.policy), the others unchanged; returns
        the new config. As ``alter_topic_config`` otherwise."""
        return self.log_manager.alter_topic_config(name, ops, validate_only=validate_only)

    def topic_id(self, topic: str) -> str | None:
        """The topic's id (Kafka's printed form), read afresh (``LogManager.topic_id``)."""
        return self.log_manager.topic_id(topic)

    def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, DeleteRecordsResult]:
        """Delete every record below each partition's offset (-1: up to the high watermark):
        Kafka's DeleteRecords / ``kafka-delete-records``, as ``LogManager.delete_records``.
        Each result holds the partition's low watermark (its new log start) or the typed error
        that refused it, naming the partition, the offset and the valid range."""
        return self.log_manager.delete_records(offsets)

    def partition_log(self, topic_partition: TopicPartition) -> PartitionLog:
        """The (cached) PartitionLog of an existing partition (``LogManager.partition_log``)."""
        return self.log_manager.partition_log(topic_partition)

    def partition_reader(self, topic_partition: TopicPartition) -> PartitionReader:
        """The (cached) partition, to read it (``LogManager.partition_reader``)."""
        return self.log_manager.partition_reader(topic_partition)

    # --- clients ---------------------------------------------------------------------------------

    def producer(
        self,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        **config: Any,
    ) -> Producer:
        """An idempotent producer, or a transactional one with ``transactional_id``."""
        return Producer(
            self.log_manager,
            self.coordinator,
            self.group_offsets,
            transactional_id,
            transaction_timeout_ms,
            **config,
        )

    def consumer(self, isolation_level: str | IsolationLevel = "read_committed") -> Consumer:
        """A reader at ``isolation_level`` (read_committed by default, as librdkafka)."""
        return Consumer(self.log_manager, self.coordinator, isolation_level)

    def committed(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets, only from committed transactions (O-04)."""
        self.coordinator.maybe_abort_timed_out()
        return self.group_offsets.committed(group_id, partitions)

    def unstable_offsets(self, group_id: str) -> frozenset[TopicPartition]:
        """The partitions whose offset ``group_id`` has committed in a transaction still open
        (O-04: not committed yet; KIP-447: a consumer fetching with require_stable retries
        until it ends). Transactions past their timeout are aborted first, so an abandoned
        one holds nobody past it."""
        self.coordinator.maybe_abort_timed_out()
        return self.group_offsets.unstable(group_id)

    # --- housekeeping and closing ----------------------------------------------------------------

    def run_housekeeping(self) -> HousekeepingPass:
        """Run one housekeeping pass now over the partitions this log has open: retention
        (T-10, B-09) and producer-id expiration (P-26, P-27); see ``housekeeping``.

        Never waits for a writer: skipped (``ran`` False) while another process runs a pass;
        partitions a writer holds are listed in ``busy``. ConfigError on a read-only log.
        """
        return self.log_manager.run_housekeeping()

    def close(self) -> None:
        """Stop housekeeping, close the partitions, then release the coordinator's lock and
        the group offset store's snapshot lock."""
        self.log_manager.close()
        self.coordinator.close()
        self.group_offsets.close()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
