"""The coordinator's in-memory view of its state log, rebuilt by replay (C-04, C-22, DESIGN §3-4).

Every process that touches the coordinator builds a ``CoordinatorState`` by applying the
state log's records in offset order and catches up by applying what others appended since.
It holds:

* per transactional id, the newest ``TransactionMetadata`` (C-22: the last entry wins;
  a tombstone removes the id, C-11);
* per sink, the newest batch commit record: the ledger of committed ``(sink id, batch id)``
  pairs (DESIGN §4 "Batch commit").

Consistency checks on apply (C-22): an entry whose epoch is *lower* than the one already held
for the same transactional id *and the same producer id* (a producer id rotation restarts at
epoch 0, C-30), a batch id lower than the sink's last one, or a batch going back from
COMPLETE_COMMIT to PREPARE_COMMIT means the log is corrupt. ``apply`` then raises
``CorruptRecordError`` and the state is disabled: every later call raises the same error
(Kafka answers NOT_COORDINATOR for such a partition). Transitions between entries are *not*
checked against the state table: a compacted log legitimately skips states (Kafka does not
check them on load either).

A batch commit record in PREPARE_COMMIT is the commit point of every transaction it lists:
those transactions are rolled forward by recovery and are therefore never reported as timed
out (aborting them would break the commit point).

Not thread-safe: the caller holds the coordinator lock (DESIGN §3). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from txn_log.coordinator.state_log_format import (
    BatchCommitEntry,
    StateLogEntry,
    TransactionLogEntry,
)
from txn_log.coordinator.transaction_metadata import (
    DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
    TransactionMetadata,
)
from txn_log.coordinator.transaction_state import (
    TransactionState,
    is_in_progress,
    is_prepared,
    state_name,
)
from txn_log.errors import CorruptRecordError


@dataclass(frozen=True, slots=True)
class PendingCompletions:
    """What recovery must roll forward (C-22, T11), each sorted by its id.

    ``transactions``: ids in PREPARE_COMMIT / PREPARE_ABORT (write the markers, then complete).
    ``batches``: batch commits in PREPARE_COMMIT without their COMPLETE_COMMIT record.
    """

    transactions: tuple[TransactionMetadata, ...]
    batches: tuple[BatchCommitEntry, ...]

    def __bool__(self) -> bool:
        return bool(self.transactions or self.batches)


@dataclass(frozen=True, slots=True)
class Expired:
    """Result of the periodic scans (C-25, C-27), each sorted by transactional id.

    ``timed_out``: ONGOING transactions past their timeout, to fence and abort (T8).
    ``expirable_ids``: ids with no open transaction idle for the expiration time (T12).
    """

    timed_out: tuple[TransactionMetadata, ...]
    expirable_ids: tuple[str, ...]


class CoordinatorState:
    """The replayed state log; see the module docstring for the invariants it enforces."""

    def __init__(self) -> None:
        self._txns: dict[str, TransactionMetadata] = {}
        self._batches: dict[str, BatchCommitEntry] = {}
        self._corruption: CorruptRecordError | None = None

    @classmethod
    def replay(cls, entries: Iterable[StateLogEntry]) -> CoordinatorState:
        """A state built by applying ``entries`` in order (a load from the start, C-22)."""
        state = cls()
        for entry in entries:
            state.apply(entry)
        return state

    @property
    def corruption(self) -> CorruptRecordError | None:
        """The error that disabled this state, or ``None`` while it is usable."""
        return self._corruption

    def _check_usable(self) -> None:
        if self._corruption is not None:
            raise CorruptRecordError(f"state log corrupt, coordinator disabled: {self._corruption}")

    def _disable(self, problem: str) -> CorruptRecordError:
        self._corruption = CorruptRecordError(f"state log corrupt: {problem} (C-22)")
        return self._corruption

    # --- replay ------------------------------------------------------------------------------

    def apply(self, entry: StateLogEntry) -> None:
        """Apply the next record of the state log (C-22: the last entry per key wins)."""
        self._check_usable()
        if isinstance(entry, BatchCommitEntry):
            self._apply_batch(entry)
        else:
            self._apply_txn(entry)

    def _apply_txn(self, entry: TransactionLogEntry) -> None:
        md = entry.metadata
        if md is None or md.state is TransactionState.DEAD:
            self._txns.pop(entry.transactional_id, None)
            return
        if md.state is TransactionState.PREPARE_EPOCH_FENCE:
            raise self._disable(f"{md.describe()} was persisted; that state is in memory only")
        previous = self._txns.get(entry.transactional_id)
        if (
            previous is not None
            and previous.producer_id == md.producer_id
            and md.producer_epoch < previous.producer_epoch
        ):
            raise self._disable(
                f"transactional id {entry.transactional_id!r}, producer id {md.producer_id}: "
                f"epoch {md.producer_epoch} ({state_name(md.state)}) follows the higher epoch "
                f"{previous.producer_epoch} ({state_name(previous.state)})"
            )
        self._txns[entry.transactional_id] = md

    def _apply_batch(self, entry: BatchCommitEntry) -> None:
        previous = self._batches.get(entry.sink_id)
        if previous is not None and (
            entry.batch_id < previous.batch_id
            or (
                entry.batch_id == previous.batch_id
                and entry.is_prepared
                and not previous.is_prepared
            )
        ):
            raise self._disable(
                f"sink {entry.sink_id!r}: batch {entry.batch_id} "
                f"({state_name(entry.status)}) follows batch {previous.batch_id} "
                f"({state_name(previous.status)}); batch ids only grow"
            )
        self._batches[entry.sink_id] = entry

    # --- transactions ------------------------------------------------------------------------

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The newest metadata of ``transactional_id``; ``None`` if unknown or expired."""
        self._check_usable()
        return self._txns.get(transactional_id)

    def transactional_ids(self) -> tuple[str, ...]:
        """Every known transactional id, sorted."""
        self._check_usable()
        return tuple(sorted(self._txns))

    def open_transactions(self, prefix: str) -> tuple[str, ...]:
        """Ids starting with ``prefix`` whose transaction is ONGOING or PREPARE_* (sorted).

        The sink passes ``"<sink id>-"`` to find lingering zombies of its tasks (DESIGN §5);
        the prefix is matched literally, so include the separator.
        """
        self._check_usable()
        return tuple(
            sorted(
                tid
                for tid, md in self._txns.items()
                if tid.startswith(prefix) and is_in_progress(md.state)
            )
        )

    def pending_completions(self) -> PendingCompletions:
        """Transactions and batch commits past their commit point but not complete (T11)."""
        self._check_usable()
        return PendingCompletions(
            tuple(md for _, md in sorted(self._txns.items()) if is_prepared(md.state)),
            tuple(b for _, b in sorted(self._batches.items()) if b.is_prepared),
        )

    def pending_batch_for(self, transactional_id: str) -> BatchCommitEntry | None:
        """The PREPARE_COMMIT batch that lists this id with its current producer id and epoch."""
        self._check_usable()
        md = self._txns.get(transactional_id)
        if md is None:
            return None
        for batch in self._batches.values():
            if batch.is_prepared and any(
                ref.transactional_id == transactional_id
                and ref.producer_id == md.producer_id
                and ref.producer_epoch == md.producer_epoch
                for ref in batch.transactions
            ):
                return batch
        return None

    def expired(
        self, now_ms: int, expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS
    ) -> Expired:
        """Timed-out transactions (C-25) and expirable ids (C-27) at ``now_ms``.

        Transactions listed by a pending batch commit are never timed out (see the module
        docstring). Raises ``InvalidConfigError`` if ``expiration_ms`` is not above some id's
        transaction timeout (C-28).
        """
        self._check_usable()
        items = sorted(self._txns.items())
        timed_out = tuple(
            md
            for tid, md in items
            if md.is_expired_txn(now_ms) and self.pending_batch_for(tid) is None
        )
        expirable = tuple(
            tid for tid, md in items if md.is_expired_transactional_id(now_ms, expiration_ms)
        )
        return Expired(timed_out, expirable)

    # --- the batch ledger (DESIGN §4) --------------------------------------------------------

    def ledger_entry(self, sink_id: str) -> BatchCommitEntry | None:
        """The newest batch commit record of ``sink_id``."""
        self._check_usable()
        return self._batches.get(sink_id)

    def ledger_entries(self) -> tuple[BatchCommitEntry, ...]:
        """The newest batch commit record of every sink, sorted by sink id."""
        self._check_usable()
        return tuple(entry for _, entry in sorted(self._batches.items()))

    def ledger_last_batch(self, sink_id: str) -> int | None:
        """The highest batch id ``sink_id`` committed, or ``None`` if it never committed."""
        entry = self.ledger_entry(sink_id)
        return None if entry is None else entry.batch_id

    def is_batch_committed(self, sink_id: str, batch_id: int) -> bool:
        """Whether ``batch_id`` of ``sink_id`` committed.

        The PREPARE_COMMIT record is the commit point, so a prepared batch counts. Batch ids of
        a sink only grow, so every id at or below the last recorded one counts as committed:
        re-running it would write its rows twice.
        """
        last = self.ledger_last_batch(sink_id)
        return last is not None and batch_id <= last

    # --- compaction ----------------------------------------------------------------------------

    def snapshot_entries(self) -> list[StateLogEntry]:
        """The fewest entries that replay into an equal state: one per id, one per sink.

        Tombstones are not needed (removed ids are simply absent). Order: transactional ids,
        then sinks, each sorted, so equal states give equal snapshots.
        """
        self._check_usable()
        entries: list[StateLogEntry] = [
            TransactionLogEntry(tid, md) for tid, md in sorted(self._txns.items())
        ]
        entries += [b for _, b in sorted(self._batches.items())]
        return entries
