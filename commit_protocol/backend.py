"""The seam between the Spark sink and a log backend (STYLE item 9).

Two protocols. ``TaskTransaction`` is what one write task holds on an executor: one producer
instance with a transactional id, fenced the moment it is created, into which the task writes
Arrow record batches (columns ``value`` and optionally ``key``, ``timestamp`` in ms or an
Arrow timestamp, ``headers``) per partition. ``LogBackend`` is the rest: topics, the ledger,
the commits and aborts. ``LogBackend.tasks_commit`` says who commits a task's transaction:

- ``embedded`` (``commit_protocol.embedded``, a txnlog directory; ``tasks_commit`` False):
  tasks leave their transaction prepared (durable, open); the driver commits every task
  transaction of the micro-batch, the ledger entry and the group offsets as ONE atomic commit
  of the coordinator, whose single PREPARE record is the commit point. A batch is atomic
  across tasks, and output and consumed offsets commit together.
- ``kafka`` (``commit_protocol.kafka_backend``, any Kafka cluster through confluent-kafka;
  ``tasks_commit`` True): EACH TASK COMMITS ITS OWN TRANSACTION, with a ``(sink id, batch id,
  task partition id)`` ledger record inside it, after fencing its id and checking that ledger
  (read_committed) to skip a task that committed already; the driver then records the batch
  and commits the consumed offsets to the group. Each task's output exactly once; a batch may
  become visible task by task; output must be deterministic per (batch, task).

Why Kafka mode cannot do what the embedded backend does: a driver cannot commit a transaction
another process opened. That needs KIP-939 (two-phase commit: ``prepareTransaction``,
``completeTransaction``, ``initTransactions(keepPreparedTxn)``), which exists in the Java
client only, with its broker side not in a stable Kafka release (as of 4.2); librdkafka and so
confluent-kafka have no prepare/resume API. Recorded here: confluent-kafka 2.16.1, librdkafka
2.16.0 (``confluent_kafka.version()``, ``libversion()``). Once clients support KIP-939, tasks
would prepare, and the driver would complete every prepared transaction with the decision in
the checkpoint, making a Kafka batch atomic too.

The same contract tests (``tests/commit_protocol/test_backend_contract.py``) run against both;
what differs by design is asserted per backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from commit_protocol.messages import LedgerEntry, PartitionWrite, TxnRef
from txn_log.topic_partition import TopicPartition


class TaskTransaction(Protocol):
    """One write task's open transaction. Used by one thread; it commits only through
    ``LogBackend.commit_task`` (backends whose ``tasks_commit`` is True)."""

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
    """Topics, the batch ledger and the driver side of the batch commit. Thread-safe; any
    number of processes may use the same log at once."""

    tasks_commit: bool
    """True: each task commits its own transaction (``commit_task``) and the driver only
    records the batch; False: the driver commits every task transaction atomically."""

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

    def task_committed(self, sink_id: str, batch_id: int, task_id: int, *, since: int = 0) -> bool:
        """Whether task ``task_id``'s output for ``batch_id`` (or a later batch) of the sink
        committed; where ``tasks_commit``, call it after fencing the task's id. ``since``: a
        ledger position before which the sink cannot have written (``ledger_end`` when a
        fresh sink began), so that the lookup of a fresh sink reads only what followed."""

    def ledger_end(self) -> int:
        """The ledger's current end position (0 where ``since`` means nothing)."""

    def commit_task(self, transaction: Any, sink_id: str, batch_id: int, task_id: int) -> None:
        """Where ``tasks_commit``: make the task's writes durable, add its ledger record to the
        transaction and commit both; elsewhere InvalidTxnStateError."""

    def is_batch_committed(self, sink_id: str, batch_id: int) -> bool:
        """The ledger: whether ``batch_id`` (or a later batch) of ``sink_id`` committed."""

    def last_committed_batch(self, sink_id: str) -> int | None: ...

    def ledgers(self) -> tuple[LedgerEntry, ...]:
        """The last committed batch of every sink the ledger knows, sorted by sink id."""

    def commit_batch(
        self,
        sink_id: str,
        batch_id: int,
        transactions: Sequence[TxnRef],
        group_id: str | None,
        offsets: Sequence[tuple[str, int, int]],
        *,
        driver_transactional_id: str | None = None,
    ) -> bool:
        """Commit every listed transaction, the ledger entry and the group offsets
        ``(topic, partition, next offset)`` atomically; False (a no-op) if the batch already
        committed. Raises a ``FencedError`` or ``InvalidTxnStateError`` naming the transaction
        if any was fenced or timed out: then nothing is committed. Where ``tasks_commit`` the
        listed transactions committed already: the ledger entry and the offsets commit
        together in a transaction of ``driver_transactional_id``."""

    def open_transactions(self, prefix: str) -> list[str]:
        """Ids of open transactions whose id starts with ``prefix`` (sorted); always empty
        where the cluster cannot list them (Kafka mode: see ``kafka_backend``)."""

    def abort_transaction(self, transactional_id: str) -> bool:
        """Fence and abort the id's open transaction; False if none was open (Kafka mode
        cannot tell, and says True)."""

    def committed_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The group's committed next offsets (None where it has none)."""
