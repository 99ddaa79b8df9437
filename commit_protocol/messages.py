"""The commit protocol's values: what a write task tells the driver, and what a ledger holds.

A task returns its transaction's identity (transactional id, producer id, epoch) with what it
wrote, in one small, picklable, immutable ``TaskCommit`` (DESIGN §5). Where the driver commits
(``batch_commit.AtomicBatchCommit``) the task left its transaction open and durable, and the
driver commits every task of the micro-batch in one atomic step by the engine's ``TxnRef``s:
the producer id and epoch pin the message to one attempt, so a message of an attempt that was
fenced since can never commit. Where each task commits (``batch_commit.PerTaskCommit``) the
message says so, and the driver records the batch by the tasks' transactional ids.

These types belong to the protocol, not to a backend; ``LedgerEntry`` is what every backend's
ledger knows of a committed batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from txn_log.coordinator.txn_ref import TxnRef
from txn_log.topic_partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass(frozen=True)
class LedgerEntry:
    """The last committed micro-batch of one sink, as the backend's ledger holds it.

    ``transactions`` are the transactional ids of the task transactions committed with it,
    and ``offsets`` ``(topic, partition, next offset)`` were committed under ``group_id``
    (None when it committed none); ``timestamp_ms`` is when the ledger last recorded it.
    """

    sink_id: str
    batch_id: int
    transactions: tuple[str, ...]
    group_id: str | None
    offsets: tuple[tuple[str, int, int], ...]
    timestamp_ms: int


@dataclass(frozen=True)
class PartitionWrite:
    """Records and record batches one task appended to one partition (inside its transaction)."""

    topic: str
    partition: int
    record_count: int
    batch_count: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class TaskCommit:
    """One write task's outcome: an open transaction to commit, or a skip.

    ``skipped`` is True when the task found its batch already in the ledger and wrote nothing
    (Spark re-running a committed batch); it then carries no producer id. ``committed`` is True
    when the task committed its own transaction (a backend whose tasks commit themselves, the
    Kafka one): the driver then only records the batch.
    """

    sink_id: str
    batch_id: int
    task_id: int
    attempt: int
    transactional_id: str
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[PartitionWrite, ...] = ()
    skipped: bool = False
    committed: bool = False

    @property
    def record_count(self) -> int:
        return sum(p.record_count for p in self.partitions)

    @property
    def txn_ref(self) -> TxnRef:
        """The reference by which the driver commits this attempt's transaction (ValueError
        for a message without a producer id: a skip, or a task that committed itself)."""
        return TxnRef(self.transactional_id, self.producer_id, self.producer_epoch)

    def describe(self) -> str:
        return (
            f"task {self.task_id} attempt {self.attempt} of batch {self.batch_id} "
            f"(transactional id {self.transactional_id!r}, producer {self.producer_id} "
            f"epoch {self.producer_epoch})"
        )
