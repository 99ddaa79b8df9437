"""The ``kafka`` backend: the per-task commit on any Kafka cluster through confluent-kafka
(DESIGN §5).

librdkafka cannot commit a transaction that another process opened (no KIP-939 prepare/resume
API in any released client: see ``commit_protocol.backend``), so here EACH TASK COMMITS ITS OWN
TRANSACTION, exactly once per task (a ``TaskCommitBackend``; its protocol is
``batch_commit.PerTaskCommit``):

    begin_transaction   Producer(transactional.id = <prefix>-<task partition id>, idempotent,
                        acks=all, transaction.timeout.ms, compression.type, batch.size,
                        queue.buffering.max.kbytes = buffer.memory / 1024);
                        init_transactions() fences every earlier attempt (aborting its open
                        transaction: C-24, G-04); begin_transaction()
    task_committed      THEN the ledger, read read_committed (``kafka_ledger``): the task's
                        newest record holds this batch id or a later one -> skip the task
    write               produce() each row of the Arrow batch (value, key, timestamp,
                        headers) to the routed partition
    commit_task         flush, the task's ledger record in the SAME transaction,
                        commit_transaction(): rows and ledger record become visible together
    record_batch        the driver, once every task committed or skipped: its own transactional
                        producer ``<prefix>-driver`` (fenced in once per process, reused)
                        writes the batch's ledger record and
                        commits the consumed source offsets to the group
                        (send_offsets_to_transaction), both atomically; a no-op when the
                        ledger already has the batch
    fence               init_transactions() on a fresh producer of the id: its open
                        transaction is aborted; a task that committed cannot be undone (its
                        rows stay, and a re-run skips it by the ledger). Ids are fenced, never
                        listed: confluent-kafka 2.16 (librdkafka 2.16.0) exposes no
                        ListTransactions, and ``txnlog serve`` does not serve it; a zombie task
                        transaction that nobody fences ends by its transaction.timeout.ms
                        (G-14: a zombie that never starts again is not fenced)

The guarantee: each task's output exactly once (a retried or re-run task is fenced, then
skipped if it committed); a batch is NOT atomic across tasks: it may become visible task by
task, and a batch whose driver dies mid-way is completed by the re-run. Output must be
deterministic per (batch, task) for a re-run to skip correctly. Thread-safe: one backend per
cluster per process (``open``); each task transaction is used by one thread.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from commit_protocol import client_cache
from commit_protocol.backend import TaskCommitBackend, TaskTransaction
from commit_protocol.kafka_cluster import (
    ClusterSettings,
    admin_error,
    client_error,
    fenced_producer,
    producer_config,
)
from commit_protocol.kafka_ledger import (
    LEDGER_CONFIG,
    LEDGER_TOPIC,
    ZOMBIE_AFTER_S,
    LedgerReader,
    LedgerRecord,
)
from commit_protocol.kafka_task import KafkaTaskTransaction
from commit_protocol.messages import LedgerEntry
from txn_log.errors import InvalidTxnStateError, UnknownTopicOrPartitionError
from txn_log.topic_partition import TopicPartition

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # Kafka's default max.message.bytes
_BACKENDS: dict[tuple[ClusterSettings, str], tuple[KafkaBackend, float]] = {}
"""``open``'s backends, each with the ``time.monotonic()`` it was last opened."""
_BACKENDS_LOCK = threading.Lock()


class KafkaBackend(TaskCommitBackend):
    """The ``TaskCommitBackend`` of a Kafka cluster (see the module doc)."""

    def __init__(
        self,
        cluster: ClusterSettings,
        *,
        ledger_topic: str = LEDGER_TOPIC,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        zombie_after_s: float = ZOMBIE_AFTER_S,
    ) -> None:
        self.cluster = cluster
        self.zombie_after_s = zombie_after_s
        self.ledger_topic = ledger_topic
        self.timeout_s = timeout_s
        # a metadata lookup must never create a topic (a producer-type client would, on a
        # cluster with auto.create.topics.enable): createTopic decides that
        self._admin = AdminClient(cluster.client_config(allow_auto_create_topics=False))
        self._ledger: LedgerReader | None = None
        self._ledger_lock = threading.Lock()
        self._max_bytes: dict[str, int] = {}
        self._drivers: dict[str, Producer] = {}
        self._drivers_lock = threading.Lock()
        self._group_metadatas: dict[str, Any] = {}  # used under _drivers_lock

    @classmethod
    def open(cls, cluster: ClusterSettings, *, ledger_topic: str = LEDGER_TOPIC) -> KafkaBackend:
        """The backend of ``cluster`` (cached per process: one admin client and one ledger
        reader however many tasks a reused Python worker runs; forgotten once not opened for
        ``TXNLOG_KAFKA_CLIENT_CACHE_TIMEOUT_S``, ``commit_protocol.client_cache``)."""
        client_cache.register(_forget_unused)
        key = (cluster, ledger_topic)
        with _BACKENDS_LOCK:
            cached = _BACKENDS.get(key)
            backend = cls(cluster, ledger_topic=ledger_topic) if cached is None else cached[0]
            _BACKENDS[key] = (backend, time.monotonic())
            return backend

    @classmethod
    def close_all(cls) -> None:
        """Close and forget every backend ``open`` cached in this process, so that their
        clients stop (librdkafka's threads go with the garbage-collected clients): for a
        process that outlives the clusters it wrote to, such as a test run."""
        with _BACKENDS_LOCK:
            backends = [backend for backend, _ in _BACKENDS.values()]
            _BACKENDS.clear()
        for backend in backends:
            backend.close()

    def describe(self) -> str:
        return self.cluster.describe()

    def close(self) -> None:
        """Close the ledger reader's consumer and drop the driver producers (a backend from
        ``open`` lives with its process)."""
        with self._drivers_lock:
            self._drivers.clear()
        with self._ledger_lock:
            if self._ledger is not None:
                self._ledger.close()
                self._ledger = None

    # --- topics --------------------------------------------------------------------------------

    def _metadata(self, topic: str) -> Any:
        try:
            return self._admin.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
        except KafkaException as error:
            raise admin_error(error, f"reading the metadata of topic {topic!r}") from None

    def partition_count(self, topic: str) -> int:
        metadata = self._metadata(topic)
        if metadata is None or metadata.error is not None:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} does not exist on {self.describe()}"
            )
        return len(metadata.partitions)

    def topic_exists(self, topic: str) -> bool:
        metadata = self._metadata(topic)
        return metadata is not None and metadata.error is None

    def create_topic(
        self, topic: str, partitions: int, config: dict[str, str] | None = None
    ) -> None:
        """CreateTopics through the AdminClient; an existing topic is not an error."""
        future = self._admin.create_topics(
            [NewTopic(topic, partitions, config=config or {})], request_timeout=self.timeout_s
        )[topic]
        try:
            future.result(self.timeout_s)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise admin_error(error, f"creating topic {topic!r}") from None

    def max_batch_bytes(self, topic: str) -> int:
        """The topic's ``max.message.bytes`` (DescribeConfigs; Kafka's default if the cluster
        does not say)."""
        known = self._max_bytes.get(topic)
        if known is not None:
            return known
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            configs = self._admin.describe_configs([resource])[resource].result(self.timeout_s)
            entry = configs.get("max.message.bytes")
            value = int(entry.value) if entry is not None else DEFAULT_MAX_MESSAGE_BYTES
        except KafkaException as error:
            raise admin_error(error, f"describing topic {topic!r}") from None
        self._max_bytes[topic] = value
        return value

    # --- tasks ---------------------------------------------------------------------------------

    def begin_transaction(
        self,
        transactional_id: str,
        timeout_ms: int,
        compression: str,
        *,
        batch_size: int = 1_000_000,
        buffer_memory: int = 32 * 1024 * 1024,
    ) -> KafkaTaskTransaction:
        config = producer_config(
            self.cluster, transactional_id, timeout_ms, compression, batch_size, buffer_memory
        )
        return KafkaTaskTransaction.begin(config, transactional_id, self)

    def task_committed(self, sink_id: str, batch_id: int, task_id: int, *, since: int = 0) -> bool:
        """Whether task ``task_id`` committed ``batch_id`` (or a later batch) of the sink,
        looking at ledger offsets from ``since`` on."""
        key = LedgerRecord(sink_id, 0, task_id, ()).key
        record = self._reader().newest(key, since, at_least=batch_id)
        return record is not None and record.batch_id >= batch_id

    def ledger_end(self) -> int:
        """The ledger partition's high watermark now: every record a sink that starts now
        will write lies at or after it."""
        return self._reader().end()

    def commit_task(
        self, transaction: TaskTransaction, sink_id: str, batch_id: int, task_id: int
    ) -> None:
        """Write the task's ledger record into its transaction and commit both."""
        if not isinstance(transaction, KafkaTaskTransaction):
            raise InvalidTxnStateError(
                f"task {task_id} of batch {batch_id} of sink {sink_id!r}: "
                f"{type(transaction).__name__} is no transaction of a Kafka cluster"
            )
        tid = transaction.transactional_id
        record = LedgerRecord(sink_id, batch_id, task_id, (tid,), None, (), _now_ms(), tid)
        self._reader()  # the ledger topic exists before the record goes to it
        transaction.commit_with(self.ledger_topic, record.key, record.value())

    # --- the ledger and the batch commit -------------------------------------------------------

    def _reader(self) -> LedgerReader:
        with self._ledger_lock:
            if self._ledger is None:
                if not self.topic_exists(self.ledger_topic):
                    self.create_topic(self.ledger_topic, 1, LEDGER_CONFIG)
                self._ledger = LedgerReader(
                    self.cluster,
                    self._admin,
                    self.ledger_topic,
                    self.timeout_s,
                    fence=self.fence,
                    zombie_after_s=self.zombie_after_s,
                )
            return self._ledger

    def _batch_record(self, sink_id: str, at_least: int | None = None) -> LedgerRecord | None:
        return self._reader().newest(LedgerRecord(sink_id, 0, None, ()).key, at_least=at_least)

    def is_batch_committed(self, sink_id: str, batch_id: int) -> bool:
        record = self._batch_record(sink_id, batch_id)
        return record is not None and record.batch_id >= batch_id

    def last_batch(self, sink_id: str) -> LedgerEntry | None:
        record = self._batch_record(sink_id)
        return None if record is None else _ledger_entry(record)

    def ledgers(self) -> tuple[LedgerEntry, ...]:
        batches = [r for r in self._reader().all_newest().values() if r.task_id is None]
        return tuple(_ledger_entry(r) for r in sorted(batches, key=lambda r: r.sink_id))

    def record_batch(
        self,
        sink_id: str,
        batch_id: int,
        transactional_ids: Sequence[str],
        group_id: str | None,
        offsets: Sequence[tuple[str, int, int]],
        *,
        driver_transactional_id: str,
    ) -> bool:
        """Record the batch (its tasks committed already) and commit the group offsets in one
        transaction of ``driver_transactional_id``; False if the ledger has the batch."""
        with self._drivers_lock:  # one batch commit per driver id at a time in this process
            producer = self._driver_producer(driver_transactional_id)
            try:
                if self.is_batch_committed(sink_id, batch_id):
                    return False
                producer.begin_transaction()
                record = LedgerRecord(
                    sink_id,
                    batch_id,
                    None,
                    tuple(transactional_ids),
                    group_id,
                    tuple(offsets),
                    _now_ms(),
                    driver_transactional_id,
                )
                producer.produce(self.ledger_topic, record.value(), record.key, partition=0)
                if group_id is not None and offsets:
                    producer.send_offsets_to_transaction(
                        [KafkaPartition(t, p, o) for t, p, o in offsets],
                        self._group_metadata(group_id),
                        self.timeout_s,
                    )
                producer.commit_transaction(self.timeout_s)
            except KafkaException as error:
                # a fenced or failed driver producer is not reused: the next commit fences anew
                del self._drivers[driver_transactional_id]
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(1)
                raise client_error(
                    error, f"committing batch {batch_id} of sink {sink_id!r} to the ledger"
                ) from None
        return True

    def _driver_producer(self, transactional_id: str) -> Producer:
        """The driver's transactional producer, fenced in once and reused while it owns the
        id: the ledger is read after its ``init_transactions()`` aborted whatever an earlier
        driver left open, and nothing else can commit under the id since."""
        producer = self._drivers.get(transactional_id)
        if producer is None:
            producer = self._fence(transactional_id)
            self._drivers[transactional_id] = producer
        return producer

    def _group_metadata(self, group_id: str) -> Any:
        """The group metadata ``send_offsets_to_transaction`` takes: of a consumer that never
        joins (no member id, no generation), so one per group id serves every batch."""
        metadata = self._group_metadatas.get(group_id)
        if metadata is None:
            config = self.cluster.client_config(group_id=group_id, enable_auto_commit=False)
            consumer = Consumer(config)
            try:
                metadata = self._group_metadatas[group_id] = consumer.consumer_group_metadata()
            finally:
                consumer.close()
        return metadata

    def fence(self, transactional_id: str) -> None:
        """Fence ``transactional_id``: whatever it had open is aborted (Kafka does not say
        whether anything was)."""
        self._fence(transactional_id)

    def _fence(self, transactional_id: str) -> Producer:
        """A fresh producer of ``transactional_id`` that fenced every earlier one."""
        config = producer_config(self.cluster, transactional_id, 60_000, "none", 16384, 1024**2)
        try:
            return fenced_producer(config, self.timeout_s, self.ledger_topic)
        except KafkaException as error:
            raise client_error(error, f"fencing transactional id {transactional_id!r}") from None

    def committed_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        consumer = Consumer(self.cluster.client_config(group_id=group_id, enable_auto_commit=False))
        try:
            answer = consumer.committed(
                [KafkaPartition(tp.topic, tp.partition) for tp in partitions], self.timeout_s
            )
        except KafkaException as error:
            raise admin_error(error, f"reading the offsets of group {group_id!r}") from None
        finally:
            consumer.close()
        return {
            TopicPartition(p.topic, p.partition): (p.offset if p.offset >= 0 else None)
            for p in answer
        }


def _ledger_entry(record: LedgerRecord) -> LedgerEntry:
    """A batch's ledger record as the backends report it."""
    return LedgerEntry(
        record.sink_id,
        record.batch_id,
        record.transactions,
        record.group_id,
        record.offsets,
        record.timestamp_ms,
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


def _forget_unused(cutoff: float) -> bool:
    """Forget the backends last opened before ``cutoff``: not closed, since a running task may
    still hold one; its clients stop when the last holder lets go of it."""
    with _BACKENDS_LOCK:
        return bool(client_cache.forget_unused(_BACKENDS, cutoff))
