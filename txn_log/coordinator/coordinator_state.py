"""The coordinator's in-memory view of its state log, rebuilt by replay (C-04, C-22, DESIGN §3-4).

Every process that touches the coordinator builds a ``CoordinatorState`` by applying the
state log's records in offset order and catches up by applying what others appended since.
It holds:

* per transactional id, the newest ``TransactionMetadata`` (C-22: the last entry wins;
  a tombstone removes the id, C-11);
* per ledger key, the newest atomic commit record: the ledgers of committed sequences
  (``atomic_commit.Ledgers``, DESIGN §4 "Atomic commit").

Consistency checks on apply (C-22): an entry whose epoch is *lower* than the one already held
for the same transactional id *and the same producer id* (a producer id rotation restarts at
epoch 0, C-30), a sequence lower than its ledger's last one, or a sequence going back from
COMPLETE_COMMIT to PREPARE_COMMIT means the log is corrupt. ``apply`` then raises
``CorruptRecordError`` and the state is disabled: every later call raises the same error
(Kafka answers NOT_COORDINATOR for such a partition). Transitions between entries are *not*
checked against the state table: a compacted log legitimately skips states (Kafka does not
check them on load either).

An atomic commit record in PREPARE_COMMIT is the commit point of every transaction it lists:
those transactions are rolled forward by recovery and are therefore never reported as timed
out (aborting them would break the commit point).

Not thread-safe: the caller holds the coordinator lock (DESIGN §3). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from txn_log.coordinator.atomic_commit import Ledgers
from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.expiration_index import ExpirationIndex
from txn_log.coordinator.state_log_format import StateLogEntry, TransactionLogEntry
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
    ``atomic_commits``: atomic commit records in PREPARE_COMMIT without their COMPLETE_COMMIT.
    """

    transactions: tuple[TransactionMetadata, ...]
    atomic_commits: tuple[AtomicCommitEntry, ...]

    def __bool__(self) -> bool:
        return bool(self.transactions or self.atomic_commits)


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
        self._prepared: set[str] = set()  # ids in PREPARE_*: every coordinator operation asks
        self._expiration = ExpirationIndex()  # what the periodic scans look at (``expired``)
        self._ledgers = Ledgers()
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
        self._corruption = CorruptRecordError(f"state log corrupt: {problem}")
        return self._corruption

    # --- replay ------------------------------------------------------------------------------

    def apply(self, entry: StateLogEntry) -> None:
        """Apply the next record of the state log (C-22: the last entry per key wins)."""
        self._check_usable()
        if isinstance(entry, AtomicCommitEntry):
            problem = self._ledgers.regression(entry)
            if problem is not None:
                raise self._disable(problem)
            self._ledgers.apply(entry)
        else:
            self._apply_txn(entry)

    def _apply_txn(self, entry: TransactionLogEntry) -> None:
        md = entry.metadata
        if md is None or md.state is TransactionState.DEAD:
            removed = self._txns.pop(entry.transactional_id, None)
            self._prepared.discard(entry.transactional_id)
            self._expiration.replaced(entry.transactional_id, removed, None, self._txns)
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
        if is_prepared(md.state):
            self._prepared.add(entry.transactional_id)
        else:
            self._prepared.discard(entry.transactional_id)
        self._expiration.replaced(entry.transactional_id, previous, md, self._txns)

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

        A caller that names its transactions ``<prefix>-<n>`` passes ``"<prefix>-"`` to find its
        lingering zombies (DESIGN §5); the prefix is matched literally, so include the separator.
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
        """Transactions and atomic commits past their commit point but not complete (T11)."""
        self._check_usable()
        return PendingCompletions(
            tuple(self._txns[tid] for tid in sorted(self._prepared)),
            self._ledgers.pending(),
        )

    def pending_commit_for(self, transactional_id: str) -> AtomicCommitEntry | None:
        """The PREPARE_COMMIT atomic commit that lists this id with its current producer id and
        epoch."""
        self._check_usable()
        md = self._txns.get(transactional_id)
        return None if md is None else self._ledgers.pending_for(md)

    def expired(
        self, now_ms: int, expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS
    ) -> Expired:
        """Timed-out transactions (C-25) and expirable ids (C-27) at ``now_ms``.

        Transactions listed by a pending atomic commit are never timed out (see the module
        docstring). Raises ``InvalidConfigError`` if ``expiration_ms`` is not above some id's
        transaction timeout (C-28). Looks only at the candidates ``ExpirationIndex`` keeps:
        the ONGOING ids and the ids idle since ``now_ms - expiration_ms``, each checked as the
        scan of every id (``_scan_expired``) checks it, which it equals.
        """
        self._check_usable()
        longest = self._expiration.longest_timeout_ms()
        if longest is not None and longest >= expiration_ms:
            return self._scan_expired(now_ms, expiration_ms)  # raises, naming a timeout (C-28)
        timed_out = tuple(
            md
            for tid in sorted(self._expiration.ongoing)
            if (md := self._txns[tid]).is_expired_txn(now_ms)
            and self.pending_commit_for(tid) is None
        )
        idle_since = now_ms - expiration_ms
        expirable = sorted(
            {
                tid
                for updated_ms, tid in self._expiration.updated_at_or_before(idle_since)
                if (idle := self._txns.get(tid)) is not None
                and idle.txn_last_update_timestamp_ms == updated_ms  # else a stale entry
                and idle.is_expired_transactional_id(now_ms, expiration_ms)
            }
        )
        return Expired(timed_out, tuple(expirable))

    def _scan_expired(self, now_ms: int, expiration_ms: int) -> Expired:
        """``expired`` by a look at every id (what the index spares)."""
        items = sorted(self._txns.items())
        timed_out = tuple(
            md
            for tid, md in items
            if md.is_expired_txn(now_ms) and self.pending_commit_for(tid) is None
        )
        expirable = tuple(
            tid for tid, md in items if md.is_expired_transactional_id(now_ms, expiration_ms)
        )
        return Expired(timed_out, expirable)

    # --- the ledgers of atomic commits (DESIGN §4) -------------------------------------------

    def ledger_entry(self, ledger_key: str) -> AtomicCommitEntry | None:
        """The newest atomic commit record of ``ledger_key``."""
        self._check_usable()
        return self._ledgers.entry(ledger_key)

    def ledger_entries(self) -> tuple[AtomicCommitEntry, ...]:
        """The newest atomic commit record of every ledger, sorted by key."""
        self._check_usable()
        return self._ledgers.entries()

    def ledger_last_sequence(self, ledger_key: str) -> int | None:
        """The highest sequence ``ledger_key`` committed, or ``None`` if it never committed."""
        self._check_usable()
        return self._ledgers.last_sequence(ledger_key)

    def ledger_has(self, ledger_key: str, sequence: int) -> bool:
        """Whether ``sequence`` of ``ledger_key`` committed (at or below its last sequence:
        ``Ledgers.has``)."""
        self._check_usable()
        return self._ledgers.has(ledger_key, sequence)

    # --- compaction ----------------------------------------------------------------------------

    def snapshot_entries(self) -> list[StateLogEntry]:
        """The fewest entries that replay into an equal state: one per id, one per ledger.

        Tombstones are not needed (removed ids are simply absent). Order: transactional ids,
        then ledger keys, each sorted, so equal states give equal snapshots.
        """
        self._check_usable()
        entries: list[StateLogEntry] = [
            TransactionLogEntry(tid, md) for tid, md in sorted(self._txns.items())
        ]
        entries += self._ledgers.entries()
        return entries
