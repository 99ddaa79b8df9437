"""The seam between the Spark sink and a log backend (STYLE item 9).

``TaskTransaction`` is what one write task holds on an executor: one producer instance with a
transactional id, fenced the moment it is created, into which the task writes Arrow record
batches (columns ``value`` and optionally ``key``, ``timestamp`` in ms or an Arrow timestamp,
``headers``) per partition. ``LogBackend`` is what every backend offers: topics, task
transactions, the ledger's reads and a group's committed offsets. Who commits a task's
transaction differs, and a backend says which by its class, as pyspark's writers say what they
can by theirs (``DataSourceStreamWriter``, ``DataSourceArrowWriter``); each kind has its commit
protocol (``commit_protocol.batch_commit``) and only the calls that protocol makes:

- ``AtomicCommitBackend`` (``commit_protocol.embedded``, a txnlog directory): tasks leave their
  transaction prepared (durable, open); the driver commits every task transaction of the
  micro-batch, the ledger entry and the group offsets as ONE atomic commit of the coordinator
  (``commit_batch``), whose single PREPARE record is the commit point, and aborts what a prefix
  left open (``open_transactions``, ``abort_transaction``). A batch is atomic across tasks, and
  output and consumed offsets commit together. Protocol: ``AtomicBatchCommit``.
- ``TaskCommitBackend`` (``commit_protocol.kafka_backend``, any Kafka cluster through
  confluent-kafka): EACH TASK COMMITS ITS OWN TRANSACTION, with a ``(sink id, batch id, task
  partition id)`` ledger record inside it (``commit_task``), after fencing its id and checking
  that ledger (``task_committed``, read_committed) to skip a task that committed already; the
  driver then records the batch and commits the consumed offsets to the group
  (``record_batch``); an id is fenced (``fence``), as the cluster cannot list open
  transactions. Each task's output exactly once; a batch may become visible task by task;
  output must be deterministic per (batch, task). Protocol: ``PerTaskCommit``.

Why Kafka mode cannot do what the embedded backend does: a driver cannot commit a transaction
another process opened. That needs KIP-939 (two-phase commit: ``prepareTransaction``,
``completeTransaction``, ``initTransactions(keepPreparedTxn)``), which exists in the Java
client only, with its broker side not in a stable Kafka release (as of 4.2); librdkafka and so
confluent-kafka have no prepare/resume API. Recorded here: confluent-kafka 2.16.1, librdkafka
2.16.0 (``confluent_kafka.version()``, ``libversion()``). Once clients support KIP-939, tasks
would prepare, and the driver would complete every prepared transaction with the decision in
the checkpoint: the Kafka backend would become an ``AtomicCommitBackend``.

The same contract tests (``tests/commit_protocol/test_backend_contract.py``) run against both;
what differs by design is asserted per backend.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from commit_protocol.messages import LedgerEntry, PartitionWrite
from txn_log.coordinator.txn_ref import TxnRef
from txn_log.topic_partition import TopicPartition


class TaskTransaction(Protocol):
    """One write task's open transaction. Used by one thread; it commits only through its
    backend: ``AtomicCommitBackend.commit_batch`` (with its batch) or
    ``TaskCommitBackend.commit_task``."""

    @property
    def transactional_id(self) -> str: ...

    @property
    def producer_id(self) -> int: ...

    @property
    def producer_epoch(self) -> int: ...

    def register(self, partitions: Iterable[TopicPartition]) -> None:
        """Add ``partitions`` to the transaction ahead of writes, in one request where the
        backend can (a Kafka producer adds partitions on its own: a no-op there)."""

    @property
    def peak_buffered_bytes(self) -> int:
        """The most bytes the transaction's producer held buffered at once."""

    def write(self, topic_partition: TopicPartition, records: Any) -> None:
        """Send the Arrow ``records`` to ``topic_partition`` inside the transaction: buffered
        by the producer and appended as one or more record batches (registering the partition
        first). Raises a ``FencedError`` once a newer attempt took over the transactional
        id, or the transaction timed out."""

    def flush(self) -> None:
        """Append everything sent so far and make it durable (it stays invisible until
        committed), and raise a ``FencedError`` if a newer attempt or a timeout fenced this
        one meanwhile."""

    def written(self) -> tuple[PartitionWrite, ...]:
        """What was written so far, by partition (sorted)."""

    def abort(self) -> None:
        """Abort with this attempt's own epoch; a no-op if it was fenced meanwhile."""


class LogBackend(Protocol):
    """Topics, task transactions and the batch ledger's reads: what every backend offers.
    Thread-safe; any number of processes may use the same log at once."""

    def partition_count(self, topic: str) -> int:
        """The topic's partition count; UnknownTopicOrPartitionError if it does not exist."""

    def topic_exists(self, topic: str) -> bool: ...

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` unless it exists (a concurrent creation is not an error)."""

    def max_batch_bytes(self, topic: str) -> int:
        """The largest record batch the topic accepts (``max.message.bytes``)."""

    def begin_transaction(
        self,
        transactional_id: str,
        timeout_ms: int,
        compression: str,
        *,
        batch_size: int = ...,
        buffer_memory: int = ...,
    ) -> TaskTransaction:
        """Fence every earlier instance of ``transactional_id`` (aborting its open
        transaction) and return a new one ready for writes, batching up to ``batch_size``
        bytes per partition and buffering at most ``buffer_memory`` bytes in all."""

    def ledger_end(self) -> int:
        """The ledger's current end position: a sink that begins now writes nothing before
        it (0 where the ledger is looked up by key, never scanned)."""

    def is_batch_committed(self, sink_id: str, batch_id: int) -> bool:
        """The ledger: whether ``batch_id`` (or a later batch) of ``sink_id`` committed."""

    def last_batch(self, sink_id: str) -> LedgerEntry | None:
        """The ledger's entry of the last committed batch of ``sink_id`` (None: none yet)."""

    def last_committed_batch(self, sink_id: str) -> int | None:
        """The id of ``last_batch`` (None: none yet)."""
        entry = self.last_batch(sink_id)
        return None if entry is None else entry.batch_id

    def ledgers(self) -> tuple[LedgerEntry, ...]:
        """The last committed batch of every sink the ledger knows, sorted by sink id."""

    def committed_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The group's committed next offsets (None where it has none)."""


class AtomicCommitBackend(LogBackend):
    """A backend whose driver commits a micro-batch's task transactions as one (see the
    module doc); a backend is one by subclassing this class."""

    @abstractmethod
    def commit_batch(
        self,
        sink_id: str,
        batch_id: int,
        transactions: Sequence[TxnRef],
        group_id: str | None,
        offsets: Sequence[tuple[str, int, int]],
    ) -> bool:
        """Commit every listed transaction, the ledger entry and the group offsets
        ``(topic, partition, next offset)`` atomically; False (a no-op) if the batch already
        committed. Raises a ``FencedError`` or ``InvalidTxnStateError`` naming the transaction
        if any was fenced or timed out: then nothing is committed."""

    @abstractmethod
    def open_transactions(self, prefix: str) -> list[str]:
        """Ids of open transactions whose id starts with ``prefix`` (sorted)."""

    @abstractmethod
    def abort_transaction(self, transactional_id: str) -> bool:
        """Fence and abort the id's open transaction; False if none was open."""


class TaskCommitBackend(LogBackend):
    """A backend whose tasks each commit their own transaction, the driver only recording the
    batch (see the module doc); a backend is one by subclassing this class."""

    @abstractmethod
    def task_committed(self, sink_id: str, batch_id: int, task_id: int, *, since: int = 0) -> bool:
        """Whether task ``task_id``'s output for ``batch_id`` (or a later batch) of the sink
        committed; call it after fencing the task's id. ``since``: a ledger position before
        which the sink cannot have written (``ledger_end`` when a fresh sink began), so that
        the lookup of a fresh sink reads only what followed."""

    @abstractmethod
    def commit_task(
        self, transaction: TaskTransaction, sink_id: str, batch_id: int, task_id: int
    ) -> None:
        """Make the task's writes durable, add its ledger record to the transaction and
        commit both."""

    @abstractmethod
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
        """Record the batch, whose tasks ``transactional_ids`` committed already, and commit
        the group offsets ``(topic, partition, next offset)`` with it in one transaction of
        ``driver_transactional_id``; False (a no-op) if the ledger has the batch."""

    @abstractmethod
    def fence(self, transactional_id: str) -> None:
        """Fence ``transactional_id``: whatever it had open is aborted (the cluster does not
        say whether anything was)."""
