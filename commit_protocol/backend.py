"""The seam between the Spark sink and a log backend (STYLE item 9).

Two protocols. ``TaskTransaction`` is what one write task holds on an executor: one producer
instance with a transactional id, fenced the moment it is created, into which the task writes
Arrow record batches (columns ``value`` and optionally ``key``, ``timestamp`` in ms or an
Arrow timestamp, ``headers``) per partition, and which it makes durable without committing.
``LogBackend`` is the rest: topics, the batch ledger, the driver's batch commit and aborts.

The ``embedded`` backend (``commit_protocol.embedded``) implements both on a txnlog directory.
A ``kafka`` backend fits the same shape with confluent-kafka's transactional producer:

    begin_transaction   Producer({"transactional.id": tid, "transaction.timeout.ms": t,
                        "compression.type": c}); init_transactions(); begin_transaction()
    write               produce() each record of the Arrow batch to the given partition
    flush               flush(): every record acknowledged (acks=all) before the task returns
    abort               abort_transaction()
    commit_batch        two-phase commit of every task transaction from the driver (KIP-939:
                        tasks prepare_transaction(), the driver resumes each prepared
                        transaction by id and completes it) with the ledger record
                        ``(sink id, batch id)`` and the group offsets written transactionally
                        to a compacted ledger topic inside the same commit
    ledger reads        read_committed reads of that ledger topic
    open_transactions   the Admin API's list_transactions / describe_transactions

so that the same contract tests (``tests/commit_protocol/test_backend_contract.py``) run
against both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from commit_protocol.messages import LedgerEntry, PartitionWrite, TxnRef
from txn_log.topic_partition import TopicPartition


class TaskTransaction(Protocol):
    """One write task's open transaction. Used by one thread; never commits itself."""

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
    ) -> bool:
        """Commit every listed transaction, the ledger entry and the group offsets
        ``(topic, partition, next offset)`` atomically; False (a no-op) if the batch already
        committed. Raises a ``FencedError`` or ``InvalidTxnStateError`` naming the transaction
        if any was fenced or timed out: then nothing is committed."""

    def open_transactions(self, prefix: str) -> list[str]:
        """Ids of open transactions whose id starts with ``prefix`` (sorted)."""

    def abort_transaction(self, transactional_id: str) -> bool:
        """Fence and abort the id's open transaction; False if none was open."""

    def committed_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The group's committed next offsets (None where it has none)."""
