"""Aborting a hanging transaction on one partition (kafka-transactions abort --topic T
--partition P --start-offset N; KIP-664).

A transaction *hangs* when a partition holds it open but no coordinator transaction will ever
end it there (a lost marker, C-42, X-09; a batch that started a transaction the coordinator
never knew): its first offset pins the partition's LSO, and every read_committed reader waits
forever (X-17). Kafka's tool writes an ABORT marker for that producer to that partition
alone (WriteTxnMarkers); so does ``abort_hanging``, through the partition's one marker path
(``PartitionLog.append_marker``: the ``.txnindex`` entry durable before the marker).

What is checked, under the coordinator lock (no coordinator operation interleaves) and the
partition lock (no append does; the check reads the partition caught up under it), before
anything is written (STYLE 3):

- an open transaction starts at ``start_offset`` in the partition (else the open ones there
  are named);
- a producer id given must be that transaction's; a producer epoch given must be at least the
  producer's epoch in the partition (a marker of an older epoch is refused there anyway,
  B-01); without them, the partition's own are used, as Kafka's tool takes them from
  DescribeProducers;
- no open coordinator transaction of that producer includes the partition: that one is not
  hanging, and the coordinator must end it (``txnlog transactions abort PATH TXN_ID``), or its
  later COMMIT would land after our ABORT.

Used by ``TransactionCoordinator.abort_hanging_transaction`` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from txn_log.coordinator.coordinator_state import CoordinatorState
from txn_log.coordinator.transaction_markers import COORDINATOR_EPOCH
from txn_log.errors import InvalidProducerEpochError, InvalidTxnStateError
from txn_log.record.control import ControlType
from txn_log.storage.partition_log import PartitionLog


@dataclass(frozen=True)
class HangingAbort:
    """The ABORT marker written: for ``producer_id`` at ``producer_epoch``, closing the
    transaction that started at ``start_offset`` (inclusive), at ``marker_offset``."""

    producer_id: int
    producer_epoch: int
    start_offset: int
    marker_offset: int


def abort_hanging(
    state: CoordinatorState,
    plog: PartitionLog,
    start_offset: int,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
) -> HangingAbort:
    """Write the ABORT marker (module docstring); the caller holds the coordinator lock."""
    tp = plog.topic_partition
    with plog.maintenance_locked():
        producers = plog.producer_state
        ongoing = producers.ongoing_transactions()
        txn = next((t for t in ongoing if t.first_offset == start_offset), None)
        if txn is None:
            shown = ", ".join(
                f"producer {t.producer_id} from offset {t.first_offset}" for t in ongoing
            )
            raise InvalidTxnStateError(
                f"{tp}: no open transaction starts at offset {start_offset}; open transactions "
                f"there: {shown or '(none)'}"
            )
        if producer_id is not None and producer_id != txn.producer_id:
            raise InvalidTxnStateError(
                f"{tp}: the open transaction at offset {start_offset} is producer "
                f"{txn.producer_id}'s, not producer {producer_id}'s"
            )
        entry = producers.last_entry(txn.producer_id)
        current_epoch = entry.producer_epoch if entry is not None else 0
        epoch = current_epoch if producer_epoch is None else producer_epoch
        if epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"{tp}: producer {txn.producer_id} is at epoch {current_epoch} there; an ABORT "
                f"marker of epoch {epoch} would be stale (give {current_epoch} or more)"
            )
        _refuse_if_coordinated(state, plog, txn.producer_id)
        written = plog.append_marker(
            ControlType.ABORT,
            producer_id=txn.producer_id,
            producer_epoch=epoch,
            coordinator_epoch=COORDINATOR_EPOCH,
        )
    return HangingAbort(txn.producer_id, epoch, start_offset, written.offset)


def _refuse_if_coordinated(state: CoordinatorState, plog: PartitionLog, producer_id: int) -> None:
    tp = plog.topic_partition
    for transactional_id in state.open_transactions(""):
        metadata = state.metadata(transactional_id)
        if (
            metadata is not None
            and metadata.producer_id == producer_id
            and (tp.topic, tp.partition) in metadata.topic_partitions
        ):
            raise InvalidTxnStateError(
                f"{tp}: producer {producer_id}'s transaction is open at the coordinator "
                f"(transactional id {transactional_id!r}), so it is not hanging; end it with "
                f"`txnlog transactions abort PATH {transactional_id}`, which fences its producer"
            )
