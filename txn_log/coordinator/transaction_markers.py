"""Writing a prepared transaction's markers and completing it (C-19, C-20, C-22, C-23; Kafka's
``TransactionMarkerChannelManager``, without the channel).

Kafka's coordinator hands a transaction past its commit point to the marker channel, which
sends WriteTxnMarkers to every partition's leader and, once all have answered, appends
COMPLETE_* to the state log. Here the partitions are files on this machine, so the coordinator
does it in its own call, synchronously: a marker to every partition of the transaction, one
group fsync of them all, then COMPLETE_*, which need not be durable (C-19: if it is lost,
whoever next holds the coordinator finds the transaction still prepared and writes the already
durable markers again; a marker written twice completes nothing, C-20).

Coordinator epoch (C-23): one logical coordinator owns the state log and every marker is
written under its lock, so no zombie coordinator can interleave; markers carry the constant
``COORDINATOR_EPOCH``. The partition side still enforces the rule (tested there) so that a
Kafka backend keeps it.

An atomic commit past its commit point (DESIGN §4 "Atomic commit") is completed the same way:
each listed transaction still prepared, then the group offsets it names, then its own COMPLETE
record.

Used only by ``TransactionCoordinator``, holding the coordinator lock (file lock and mutex):
not thread-safe by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from txn_log.coordinator import atomic_commit
from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.coordinator_state import CoordinatorState
from txn_log.coordinator.state_log_format import StateLogEntry, TransactionLogEntry
from txn_log.coordinator.transaction_metadata import TransactionMetadata
from txn_log.coordinator.transaction_state import TransactionState
from txn_log.errors import UnknownTopicOrPartitionError
from txn_log.fault_points import crash_point
from txn_log.group.group_offsets import OFFSETS_PARTITION, GroupOffsetStore, OffsetAndMetadata
from txn_log.log_dir.log_manager import LogManager
from txn_log.record.control import ControlType
from txn_log.storage.group_sync import flush_all
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

COORDINATOR_EPOCH = 0


class StateLogWriter(Protocol):
    """The coordinator's one write to its state log: append ``entries`` as one batch (fsynced
    unless ``sync`` is False), then apply them to its state."""

    def __call__(self, entries: Sequence[StateLogEntry], *, sync: bool = True) -> None: ...


class TransactionMarkerWriter:
    """Completes transactions of one log past their commit point: markers into the partitions
    of ``log_manager``, COMPLETE records through ``write``, an atomic commit's offsets through
    ``group_offsets``."""

    def __init__(
        self, log_manager: LogManager, group_offsets: GroupOffsetStore, write: StateLogWriter
    ) -> None:
        self._log = log_manager
        self._group_offsets = group_offsets
        self._write = write
        self._clock = log_manager.clock

    def complete(self, metadata: TransactionMetadata, *, wait: bool = True) -> TransactionMetadata:
        """Markers, then COMPLETE_* (a prepared transaction only). ``wait=False``: a partition
        being written raises LogLockedError, leaving the transaction prepared (C-22)."""
        crash_point("txn.after_prepare")
        self._write_markers(metadata, wait=wait)
        crash_point("txn.before_complete")
        completed = metadata.prepare_complete(self._clock.time_ms())
        # C-19: COMPLETE need not be durable: if it is lost, recovery writes the (already
        # durable) markers again and completes once more. The markers were fsynced first.
        self._write([TransactionLogEntry(completed.transactional_id, completed)], sync=False)
        if (OFFSETS_PARTITION.topic, OFFSETS_PARTITION.partition) in metadata.topic_partitions:
            self._group_offsets.maybe_snapshot()
        return completed

    def complete_pending(self, state: CoordinatorState, *, wait: bool = True) -> None:
        """Roll forward whatever ``state`` (the coordinator's, caught up) holds past its commit
        point: prepared transactions, then prepared atomic commits (C-22, T11)."""
        pending = state.pending_completions()
        for metadata in pending.transactions:
            self.complete(metadata, wait=wait)
        for entry in pending.atomic_commits:
            self.complete_atomic_commit(state, entry, wait=wait)

    def complete_atomic_commit(
        self, state: CoordinatorState, entry: AtomicCommitEntry, *, wait: bool = True
    ) -> None:
        """Roll a prepared atomic commit forward: its transactions, its offsets, then COMPLETE."""
        for ref in entry.transactions:
            metadata = state.metadata(ref.transactional_id)
            if metadata is not None and metadata.state is TransactionState.PREPARE_COMMIT:
                self.complete(metadata, wait=wait)
        if entry.group_id is not None and entry.offsets:
            offsets = {TopicPartition(t, p): OffsetAndMetadata(o) for t, p, o in entry.offsets}
            self._group_offsets.commit(entry.group_id, offsets)
        crash_point("batch.before_complete")
        done = atomic_commit.completed(entry, self._clock.time_ms())
        self._write([done], sync=False)  # as for COMPLETE_*: redone if lost (C-19)

    def _write_markers(self, metadata: TransactionMetadata, *, wait: bool = True) -> None:
        """A marker to every partition of the transaction, then one group fsync of them all:
        COMPLETE_* is written only once every marker is durable (C-19)."""
        control = (
            ControlType.COMMIT
            if metadata.state is TransactionState.PREPARE_COMMIT
            else ControlType.ABORT
        )
        written = []
        for index, (topic, partition) in enumerate(sorted(metadata.topic_partitions)):
            if index:
                crash_point("txn.between_markers")
            try:
                plog = self._log.partition_log(TopicPartition(topic, partition))
            except UnknownTopicOrPartitionError:
                # deleted behind our back (``Log.delete_topic`` refuses while we are open): as
                # Kafka drops markers for deleted partitions, else no completion could finish
                logger.warning(
                    "no %s marker for %s-%d of transactional id %r: the partition is gone",
                    control.name, topic, partition, metadata.transactional_id,
                )  # fmt: skip
                continue
            plog.append_marker(
                control,
                producer_id=metadata.producer_id,
                producer_epoch=metadata.producer_epoch,
                coordinator_epoch=COORDINATOR_EPOCH,
                sync=False,
                wait=wait,
            )
            written.append(plog)
        flush_all(written)
