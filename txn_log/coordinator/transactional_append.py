"""Writes into a transaction, checked by the coordinator on every path (KIP-890 part 1, C-16,
O-02, O-03; KIP-447; DESIGN §1).

A transactional batch in a partition belongs to its producer's transaction until a COMMIT or
ABORT marker closes it. If the coordinator knows no such transaction, no marker ever comes: the
partition's last stable offset stays at the batch forever, and every read_committed reader
stops there; no timeout ends it (the coordinator has nothing to time out). So the first batch
of a transaction in a partition may be appended only while the coordinator holds its lock and
has checked that the producer's ongoing transaction includes the partition
(``TransactionCoordinator.verified_transaction``): markers are written under that lock too, so
none can close the transaction between the check and the append. Later batches of the same
transaction need no check: the partition itself refuses a transactional batch that would
start a transaction unverified (``PartitionLog.append``, TransactionNotVerifiedError), so
whatever it takes without one continues a transaction the coordinator verified.

- ``append_client_batch``: the one append of a client's batch, for the engine's producers and
  ``txnlog serve``'s Produce alike. A transactional batch needs a transactional id
  (TransactionalIdAuthorizationError, 53, as KafkaApis answers a produce carrying
  transactional records without one); a produce under a transactional id carries
  transactional batches only (InvalidTxnStateError).
- ``verified_transaction_starts``: the coordinator held once for the first batches of a
  transaction in several partitions (a producer's flush at commit writes to each of them for
  the first time): ``append_client_batch`` given the ``VerifiedTransaction`` it yields appends
  a batch of that producer into those partitions as verified, without asking again.
- ``txn_offset_commit``: TxnOffsetCommit (O-02, O-03), the group's offsets appended to
  ``__consumer_offsets`` inside the transaction under the same verification (AddOffsetsToTxn
  must have come first), after the group's membership authority, when there is one, checked
  the committing member's generation (KIP-447: a zombie of an older generation is fenced).

Thread-safe (the coordinator's and the partitions' locks); lock order coordinator, then
partition, as everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from txn_log.coordinator.transaction_coordinator import TransactionCoordinator
from txn_log.errors import (
    InvalidTxnStateError,
    TransactionalIdAuthorizationError,
    TransactionNotVerifiedError,
)
from txn_log.group.group_membership import GroupMember, GroupMembership
from txn_log.group.group_metadata import OffsetAndMetadata
from txn_log.group.group_offsets import OFFSETS_PARTITION, GroupOffsetStore
from txn_log.record.batch_header import parse_header
from txn_log.storage.log_validator import NO_EXPECTED_OFFSET, validate_client_batch
from txn_log.storage.partition_log import AppendResult, PartitionLog
from txn_log.storage.producer_append_info import AppendOrigin
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition


class VerifiedTransaction:
    """While ``verified_transaction_starts`` holds the coordinator: the producer id, epoch and
    partitions it verified (KIP-890), for ``append_client_batch``. Covers nothing once the
    hold ended."""

    def __init__(
        self, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.partitions = frozenset(partitions)
        self.held = True

    def covers(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> bool:
        return (
            self.held
            and tp in self.partitions
            and (producer_id, producer_epoch) == (self.producer_id, self.producer_epoch)
        )


@contextmanager
def verified_transaction_starts(
    coordinator: TransactionCoordinator,
    transaction: tuple[str, int, int],
    partitions: Iterable[TopicPartition],
    *,
    add: Iterable[TopicPartition] = (),
) -> Iterator[VerifiedTransaction]:
    """Hold the coordinator once while the caller appends the first batches of
    ``transaction`` = (transactional id, producer id, epoch), ongoing, to ``partitions``
    (``TransactionCoordinator.verified_transaction``: it registers ``add`` first, durably,
    then checks the transaction includes them all), passing the yielded object to
    ``append_client_batch``; one hold instead of one per partition and one more for the
    registration. Lock order: coordinator, then each partition."""
    transactional_id, producer_id, producer_epoch = transaction
    partitions = list(partitions)
    with coordinator.verified_transaction(
        transactional_id, producer_id, producer_epoch, partitions, add=add
    ):
        verified = VerifiedTransaction(producer_id, producer_epoch, partitions)
        try:
            yield verified
        finally:
            verified.held = False


def append_client_batch(
    coordinator: TransactionCoordinator,
    plog: PartitionLog,
    batch: bytes | bytearray | memoryview,
    *,
    transactional_id: str | None,
    expected_offset: int = NO_EXPECTED_OFFSET,
    sync: bool = False,
    verified: VerifiedTransaction | None = None,
    config: TopicConfig | None = None,
) -> AppendResult:
    """Append a client's batch to ``plog`` (``PartitionLog.append`` validates it whole), a
    transactional one only into a transaction the coordinator knows (module docstring);
    ``sync`` makes it durable before returning. ``verified``: the coordinator is held for
    the producer's transaction in this partition (``verified_transaction_starts``), so the
    batch is appended as verified at once. ``config``: the topic's config the caller read for
    this batch (``PartitionLog.append``)."""
    header = parse_header(batch)  # checked again, with the CRC, by the append
    tp = plog.topic_partition
    if not header.is_transactional:
        if transactional_id is not None:
            raise InvalidTxnStateError(
                f"{tp}: a produce under transactional id {transactional_id!r} carries a batch "
                "that is not transactional"
            )
        return plog.append(batch, expected_offset=expected_offset, sync=sync, config=config)
    if transactional_id is None:
        raise TransactionalIdAuthorizationError(
            f"{tp}: a transactional batch of producer {header.producer_id} without a "
            "transactional id; transactional writes name their transactional id (and need "
            "Write on it)"
        )
    if verified is not None and verified.covers(tp, header.producer_id, header.producer_epoch):
        return plog.append(
            batch,
            expected_offset=expected_offset,
            sync=sync,
            transaction_verified=True,
            config=config,
        )
    if plog.has_ongoing_transaction(header.producer_id, header.producer_epoch):
        try:
            return plog.append(batch, expected_offset=expected_offset, sync=sync, config=config)
        except TransactionNotVerifiedError:
            pass  # the transaction ended since this process last looked: ask the coordinator
    # the batch is checked whole before the coordinator is asked (garbage never holds its
    # lock), and again by the append: twice per transaction and partition, not per batch
    validate_client_batch(tp, plog.config if config is None else config, bytearray(batch))
    with coordinator.verified_transaction(
        transactional_id, header.producer_id, header.producer_epoch, [tp]
    ):
        return plog.append(
            batch,
            expected_offset=expected_offset,
            sync=sync,
            transaction_verified=True,
            config=config,
        )


def txn_offset_commit(
    coordinator: TransactionCoordinator,
    group_offsets: GroupOffsetStore,
    plog: PartitionLog,
    transaction: tuple[str, int, int],
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    *,
    member: GroupMember | None = None,
    membership: GroupMembership | None = None,
) -> None:
    """TxnOffsetCommit of ``transaction`` = (transactional id, producer id, epoch): the
    offsets become the group's only if the transaction commits (O-02..O-04). ``plog`` is
    ``__consumer_offsets``'s partition. With a ``membership`` authority (the wire server's
    group coordinator), ``member`` (the committing consumer's group metadata; None for a
    client that sends none) is checked by it first, under the coordinator lock (KIP-447)."""
    transactional_id, producer_id, producer_epoch = transaction
    batch = group_offsets.encode_batch(
        group_id,
        dict(offsets),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
    )
    with coordinator.verified_transaction(
        transactional_id, producer_id, producer_epoch, [OFFSETS_PARTITION]
    ):
        if membership is not None:
            membership.check_txn_offset_commit(group_id, member)
        plog.append(batch, origin=AppendOrigin.COORDINATOR, transaction_verified=True)
