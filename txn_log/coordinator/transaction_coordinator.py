"""The transaction coordinator of an embedded log (KIP-98 §3, DESIGN §3-4).

There is no server: every process that opens the log is a peer coordinator. Each operation
takes the coordinator lock, catches up on the state log (``__transaction_state-0``) by
replaying what other processes appended, finishes whatever a crashed peer left past its commit
point (C-22, T11), validates the request with the pure rules of ``transaction_metadata``,
appends the new state (one batch, fsynced: the batch append is atomic, F-08), then applies it.

Commit and abort follow C-19 synchronously (the seed order, C-18): PREPARE_* is written and
fsynced (the commit point, C-08), then ``transaction_markers`` writes a marker to every
partition of the transaction, then COMPLETE_*. A crash anywhere after PREPARE is finished by
the next process that touches the coordinator; markers written twice are harmless (C-20).

Timeouts (C-25) are enforced without a daemon: ``maybe_abort_timed_out`` runs on every
coordinator operation and whenever a read_committed reader plans past an open transaction.

Start-up from a snapshot (C-22, DESIGN §2): the first catch-up of a process loads the newest
valid coordinator snapshot (``coordinator_snapshot``, ``state_snapshot``) and replays only the
state log after it; a corrupt, stale or mismatching snapshot falls back to an older one or to a
full replay. Whoever holds the coordinator lock after an operation writes a new snapshot when
the state log has ``snapshot_interval_records`` records past the newest one, after an fsync of
the state log, so the snapshot's offset is durable; the newest two are kept.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from txn_log.coordinator import atomic_commit, coordinator_snapshot
from txn_log.coordinator.atomic_commit import TxnIdentity
from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.coordinator_snapshot import DEFAULT_SNAPSHOT_INTERVAL_RECORDS
from txn_log.coordinator.coordinator_state import CoordinatorState
from txn_log.coordinator.hanging_transactions import HangingAbort, abort_hanging
from txn_log.coordinator.state_log_format import (
    StateLogEntry,
    TransactionLogEntry,
    decode_record,
    encode_key,
    encode_value,
)
from txn_log.coordinator.transaction_markers import TransactionMarkerWriter
from txn_log.coordinator.transaction_metadata import (
    DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
    DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
    InitProducerIdResult,
    TransactionMetadata,
    prepare_init_producer_id,
)
from txn_log.coordinator.transaction_state import TransactionState
from txn_log.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    LogLockedError,
    ProducerFencedError,
    TxnLogError,
)
from txn_log.fault_points import crash_point
from txn_log.file_lock import FileLock
from txn_log.group.group_offsets import OFFSETS_PARTITION, GroupOffsetStore
from txn_log.group.group_offsets_format import normalize_offsets, validate_group_id
from txn_log.log_dir.log_manager import LogManager
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.partition_reader import PartitionReader
from txn_log.storage.producer_append_info import AppendOrigin
from txn_log.storage.state_snapshot import SnapshotKind, StateSnapshotDir
from txn_log.topic_config import TRANSACTION_STATE_TOPIC, check_client_append
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

STATE_PARTITION = TopicPartition(TRANSACTION_STATE_TOPIC, 0)
EXPIRATION_CHECK_INTERVAL_MS = 50


class TransactionCoordinator:
    """Coordinator operations on one log. Thread-safe; any number of processes at once.

    It reads and writes partitions through ``log_manager`` and completes transactions through
    its ``TransactionMarkerWriter``, which commits an atomic commit's group offsets through
    ``group_offsets`` (DESIGN §1: it knows neither ``Log`` nor the clients).
    """

    def __init__(
        self,
        log_manager: LogManager,
        group_offsets: GroupOffsetStore,
        *,
        max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
        transactional_id_expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
        snapshot_interval_records: int = DEFAULT_SNAPSHOT_INTERVAL_RECORDS,
    ) -> None:
        self._log = log_manager
        self._markers = TransactionMarkerWriter(log_manager, group_offsets, self._write)
        self._clock = log_manager.clock
        self.max_timeout_ms = max_timeout_ms
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        self._lock = FileLock(log_manager.path / "coordinator.lock", count_holds=True)
        self._mutex = threading.RLock()
        self._in_doubt = True  # a hold since the last catch-up may have left the state behind
        self._state = CoordinatorState()
        self._applied = 0  # state-log offset applied so far (exclusive)
        self.snapshot_interval_records = snapshot_interval_records
        self._snapshots: StateSnapshotDir | None = None  # set by the first catch-up
        self.started_from_snapshot: int | None = None
        """The offset of the snapshot the first catch-up loaded; None: it replayed from 0."""
        self._snapshot_offset = 0  # the newest snapshot this process knows of (exclusive)
        self._last_expiration_check = -EXPIRATION_CHECK_INTERVAL_MS
        self._state_log: PartitionReader | None = None  # ``_state_partition``

    def close(self) -> None:
        """Release the lock file's descriptor."""
        self._lock.close()

    # --- locking, catching up, writing ---------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[CoordinatorState]:
        """Hold the coordinator; on entry catch up and finish what peers left (C-22).

        The catch-up is skipped when no one else wrote the state log since this object's
        previous hold (the lock counts the holds that write it, ``_write``:
        ``FileLock.others_held``) and every hold of this object since its last catch-up ended
        without an error: the state log's end moves only under this lock (the cleaner compacts
        it without moving offsets), so the state is the one this object left. A reader's
        timeout pass, an error, or another holder's write leave it in doubt until a catch-up.

        On a read-only log (inspection tools) it only catches up: no lock, nothing completed.
        """
        if self._log.read_only:
            with self._mutex:
                self._catch_up()
                yield self._state
            return
        with self._mutex:
            self._lock.acquire(count=False)  # counted by ``_write``, before it appends
            try:
                if self._lock.others_held or self._in_doubt:
                    self._catch_up()
                self._in_doubt = True  # until this hold ends well
                self._markers.complete_pending(self._state)
                self._abort_timed_out()
                yield self._state
                self._maybe_snapshot()
                self._in_doubt = False
            except BaseException:
                self._in_doubt = True
                raise
            finally:
                self._lock.release()

    def _state_partition(self) -> PartitionReader:
        """The state log's partition (a writer, on a writable log), looked up once: an internal
        topic is never deleted, so the log keeps this object for its lifetime (and a write
        still checks the partition's identity under its lock)."""
        if self._state_log is None:
            self._state_log = self._log.partition_reader(STATE_PARTITION)
        return self._state_log

    def _catch_up(self) -> None:
        from txn_log.record.codec import iter_records

        plog = self._state_partition()
        if self._snapshots is None:
            self._snapshots = StateSnapshotDir(plog.directory, SnapshotKind.COORDINATOR)
            self._load_snapshot(self._snapshots, plog)
        if plog.log_end_offset == self._applied:
            return  # nothing appended since (the common case: one look at the active segment)
        for header, batch in plog.read(max(self._applied, plog.log_start_offset)):
            for record in iter_records(batch):
                if record.offset >= self._applied:
                    self._state.apply(decode_record(record.key or b"", record.value))
                    self._applied = record.offset + 1
            self._applied = max(self._applied, header.next_offset)

    def _load_snapshot(self, snapshots: StateSnapshotDir, plog: PartitionReader) -> None:
        """Start from the newest valid snapshot (first catch-up of this object only)."""
        loaded = snapshots.load_restored(plog, coordinator_snapshot.restore)
        if loaded is not None:
            self._state, self._applied = loaded
            self._snapshot_offset = self.started_from_snapshot = self._applied

    def _maybe_snapshot(self) -> None:
        """Snapshot the state (held under the lock, caught up to ``_applied``) when the state
        log has grown ``snapshot_interval_records`` past the newest snapshot. A failure to
        write one is logged, never raised: the operation it follows has succeeded."""
        if self._snapshots is None or self._state.corruption is not None:
            return
        if self._applied - self._snapshot_offset < self.snapshot_interval_records:
            return
        known = self._snapshots.usable_offsets()  # another process may have written a newer one
        if known and self._applied - known[-1] < self.snapshot_interval_records:
            self._snapshot_offset = max(self._snapshot_offset, known[-1])
            return
        try:
            self._log.partition_log(STATE_PARTITION).flush()  # the offset must be durable
            self._snapshots.write(
                self._log.partition_reader(STATE_PARTITION),
                self._applied,
                coordinator_snapshot.snapshot_records(self._state),
                fault_name="coordinator_snapshot",
            )
        except (TxnLogError, OSError, ValueError) as problem:  # StorageError, a log truncated
            logger.warning("coordinator snapshot at %d not written: %s", self._applied, problem)
            return
        self._snapshot_offset = self._applied

    def _write(self, entries: Sequence[StateLogEntry], *, sync: bool = True) -> None:
        """Append ``entries`` as one atomic batch (fsynced unless ``sync`` is False), then apply
        them."""
        from txn_log.record.codec import encode_records

        now = self._clock.time_ms()
        batch = encode_records(
            [(encode_key(e), encode_value(e), now, ()) for e in entries], now_ms=now
        )
        plog = self._state_partition()
        if not isinstance(plog, PartitionLog):  # a read-only log: ConfigError
            plog = self._log.partition_log(STATE_PARTITION)
        self._lock.note_change()  # peers catch up at their next hold (``_locked``)
        result = plog.append(batch, sync=sync, origin=AppendOrigin.COORDINATOR)
        for entry in entries:
            self._state.apply(entry)
        self._applied = result.last_offset + 1

    def _write_metadata(self, *metadata: TransactionMetadata, sync: bool = True) -> None:
        self._write([TransactionLogEntry(md.transactional_id, md) for md in metadata], sync=sync)

    # --- timeouts (C-25, C-27) ------------------------------------------------------------------

    def _abort_timed_out(self, *, wait: bool = True) -> None:
        now = self._clock.time_ms()
        if now - self._last_expiration_check < EXPIRATION_CHECK_INTERVAL_MS:
            return
        self._last_expiration_check = now
        expired = self._state.expired(now, self.transactional_id_expiration_ms)
        for metadata in expired.timed_out:  # C-25: bump the epoch, abort with it (P-18)
            fenced = metadata.prepare_fence_and_abort(now)
            self._write_metadata(fenced)
            self._markers.complete(fenced, wait=wait)
        for transactional_id in expired.expirable_ids:  # C-27: a tombstone
            self._write([TransactionLogEntry(transactional_id, None)])

    def maybe_abort_timed_out(self) -> None:
        """Abort transactions past their timeout (rate-limited; cheap when nothing is due).

        Called by readers (planning a read_committed read, ``Log.committed``), so it never
        waits (DESIGN §3: readers never wait on writers): when another thread or process holds
        the coordinator, or a partition an abort must mark is being written, it does nothing
        now. The holder, or the next caller, does it: whatever this pass began (a
        PREPARE_ABORT) is finished by whoever next holds the coordinator (C-22). A writer
        frozen while holding the coordinator is the transaction timeout's concern for the
        writers that come after it, not a reason to block readers.
        """
        if self._log.read_only:
            return
        if self._clock.time_ms() - self._last_expiration_check < EXPIRATION_CHECK_INTERVAL_MS:
            return
        if not self._mutex.acquire(blocking=False):
            return
        try:
            if not self._lock.try_acquire(count=False):  # counted by ``_write``
                return
            try:
                self._in_doubt = True  # left so (errors are caught below)
                self._catch_up()
                self._markers.complete_pending(self._state, wait=False)
                self._abort_timed_out(wait=False)
            except LogLockedError as busy:
                logger.debug("timed-out transactions left for later: %s", busy)
            finally:
                self._lock.release()
        finally:
            self._mutex.release()

    # --- the producer-facing requests (C-14..C-18) -------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        *,
        expected: tuple[int, int] | None = None,
    ) -> tuple[int, int]:
        """(producer id, epoch) for a new producer instance; fences older ones (C-14, C-24).

        Without a transactional id: a fresh producer id with epoch 0 (C-15). With one: the
        epoch is bumped; an open transaction of the previous instance is aborted first (T9),
        one past its commit point is rolled forward (T10, by ``_locked``). ``expected``
        (KIP-360, R-05): the producer id and epoch the caller holds, which must be the id's
        current ones (checked under the lock, before anything changes), else
        ProducerFencedError.
        """
        if transactional_id is None:
            return self._log.producer_ids.generate_producer_id(), 0
        with self._locked() as state:
            result = self._prepare_init(state, transactional_id, transaction_timeout_ms, expected)
            if result.fenced_abort:
                self._write_metadata(result.metadata)
                self._markers.complete(result.metadata)
                result = self._prepare_init(state, transactional_id, transaction_timeout_ms)
            self._write_metadata(result.metadata)
            return result.metadata.producer_id, result.metadata.producer_epoch

    def _prepare_init(
        self,
        state: CoordinatorState,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None = None,
    ) -> InitProducerIdResult:
        return prepare_init_producer_id(
            state.metadata(transactional_id),
            transactional_id,
            timeout_ms,
            self._clock.time_ms(),
            self._log.producer_ids.generate_producer_id,
            self.max_timeout_ms,
            expected,
        )

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        """Register partitions before the first write to them (C-16, C-38).

        A partition that does not exist raises UnknownTopicOrPartitionError and registers
        nothing: a transaction listing it could never get its marker, and rolling it forward
        would fail in every process that touches the coordinator. Nor can a client register
        an internal topic (InvalidTopicError, C-03): its abort would write a marker into the
        state log, which every process must decode.
        """
        partitions = self._addable(partitions)
        with self._locked() as state:
            current = self._metadata(state, transactional_id, producer_id)
            self._add_partitions(current, producer_id, producer_epoch, partitions)

    def _addable(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """``partitions``, each checked to exist and to take client appends (``add_partitions``);
        outside the coordinator lock."""
        partitions = list(partitions)
        for tp in partitions:
            check_client_append(tp.topic)
            self._log.partition_log(tp)  # raises UnknownTopicOrPartitionError
        return partitions

    def _add_partitions(
        self,
        current: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> TransactionMetadata:
        """AddPartitionsToTxn under the lock: the new state written and fsynced (before any
        batch of the transaction can reach those partitions: KIP-890), and returned."""
        updated = current.prepare_add_partitions(
            producer_id,
            producer_epoch,
            [(tp.topic, tp.partition) for tp in partitions],
            self._clock.time_ms(),
        )
        if updated is not current:
            self._write_metadata(updated)
        return updated

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> None:
        """Register the group's offsets partition in the transaction (C-17, O-02)."""
        with self._locked() as state:
            current = self._metadata(state, transactional_id, producer_id)
            updated = current.prepare_add_offsets(
                producer_id,
                producer_epoch,
                group_id,
                self._clock.time_ms(),
                OFFSETS_PARTITION.partition,
            )
            if updated is not current:
                self._write_metadata(updated)

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> None:
        """Commit or abort (C-18): PREPARE_* (commit point), markers, COMPLETE_*.

        A retry after completion with the same command is OK; a mismatch is
        InvalidTxnStateError (T13, X-06).
        """
        with self._locked() as state:
            current = self._metadata(state, transactional_id, producer_id)
            prepared = current.prepare_end_txn(
                producer_id, producer_epoch, commit, self._clock.time_ms()
            )
            if prepared is current:
                return
            self._write_metadata(prepared)
            self._markers.complete(prepared)

    def check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> TransactionMetadata:
        """The current metadata, raising ProducerFenced if another instance took over."""
        with self._locked() as state:
            metadata = self._metadata(state, transactional_id, producer_id)
            if metadata.producer_epoch != producer_epoch:
                raise ProducerFencedError(
                    f"transactional id {transactional_id!r}: producer {producer_id} epoch "
                    f"{producer_epoch} was fenced by epoch {metadata.producer_epoch}"
                )
            return metadata

    @contextmanager
    def verified_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        add: Iterable[TopicPartition] = (),
    ) -> Iterator[TransactionMetadata]:
        """Hold the coordinator while the caller writes into the producer's ongoing
        transaction, having verified that it includes ``partitions`` (KIP-890 part 1, C-16;
        ``TransactionMetadata.check_verified``). No marker can end the transaction meanwhile
        (markers are written under this lock), so what the caller appends belongs to it:
        ``transactional_append`` appends the first batch of a transaction to a partition, and
        a transactional offset commit, this way. Lock order: coordinator, then partition.

        ``add``: partitions to register first, in the same hold (``add_partitions``: checked,
        then the new state fsynced before anything is yielded), so that a producer's flush
        registers and starts its transaction in several partitions under one lock."""
        add = self._addable(add)
        with self._locked() as state:
            metadata = self._metadata(state, transactional_id, producer_id)
            if add:
                metadata = self._add_partitions(metadata, producer_id, producer_epoch, add)
            metadata.check_verified(
                producer_id, producer_epoch, [(tp.topic, tp.partition) for tp in partitions]
            )
            yield metadata

    @staticmethod
    def _metadata(
        state: CoordinatorState, transactional_id: str, producer_id: int
    ) -> TransactionMetadata:
        metadata = state.metadata(transactional_id)
        if metadata is None:
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id!r} has no producer id mapping (it expired "
                "or was never initialised); call init_transactions()"
            )
        if metadata.producer_id != producer_id:
            raise ProducerFencedError(
                f"transactional id {transactional_id!r} is now mapped to producer "
                f"{metadata.producer_id}, not {producer_id}: this instance was fenced"
            )
        return metadata

    # --- atomic commit of many transactions (DESIGN §4 "Atomic commit") ----------------------

    def commit_transactions(
        self,
        ledger_key: str,
        sequence: int,
        transactions: Iterable[TxnIdentity],
        *,
        group_id: str | None = None,
        offsets: Sequence[tuple[str, int, int]] = (),
    ) -> bool:
        """Commit every listed transaction, the ledger entry and the group offsets as one.

        Returns False (a no-op) when ``sequence`` of ``ledger_key`` already committed (at or
        below the ledger's last sequence). Every listed transaction must still belong to the
        listed producer id and epoch and be open (or empty: it wrote nothing); otherwise nothing
        is committed and the error names the transaction. The single PREPARE_COMMIT record is
        the commit point (``atomic_commit``). The group id and offsets ``(topic, partition,
        next offset)`` are validated before it (a bad one written there would make every
        roll-forward fail).
        """
        if group_id is not None:
            validate_group_id(group_id)
            normalize_offsets({TopicPartition(t, p): o for t, p, o in offsets})
        refs = atomic_commit.refs_of(transactions)
        with self._locked() as state:
            if state.ledger_has(ledger_key, sequence):
                return False
            entries = atomic_commit.prepare_commit(
                ledger_key, sequence, refs, state.metadata, group_id, offsets, self._clock.time_ms()
            )
            self._write(entries)
            crash_point("batch.after_prepare")
            self._markers.complete_pending(self._state)
            return True

    def ledger_has(self, ledger_key: str, sequence: int) -> bool:
        """Whether ``sequence`` of ``ledger_key`` committed (its commit point passed)."""
        with self._locked() as state:
            return state.ledger_has(ledger_key, sequence)

    def ledgers(self) -> tuple[AtomicCommitEntry, ...]:
        """The newest atomic commit of every ledger, sorted by ledger key."""
        with self._locked() as state:
            return state.ledger_entries()

    def ledger_entry(self, ledger_key: str) -> AtomicCommitEntry | None:
        """The newest atomic commit of ``ledger_key``; None if it never committed."""
        with self._locked() as state:
            return state.ledger_entry(ledger_key)

    # --- listing and aborting ------------------------------------------------------------------

    @contextmanager
    def topic_deletion_guard(self, topic: str) -> Iterator[None]:
        """Hold the coordinator while ``topic`` is deleted, so that no transaction can join it
        meanwhile; ConcurrentTransactionsError (retriable) if an open transaction has written
        to it: its markers would have nowhere to go."""
        with self._locked() as state:
            busy = [
                md.transactional_id
                for tid in state.open_transactions("")
                if (md := state.metadata(tid)) is not None
                and any(t == topic for t, _ in md.topic_partitions)
            ]
            if busy:
                raise ConcurrentTransactionsError(
                    f"topic {topic!r} has open transactions writing to it: "
                    f"{', '.join(map(repr, busy))}; let them finish, or end them with `txnlog "
                    f"transactions abort {self._log.path} <transactional id>`, then delete it"
                )
            yield

    def open_transactions(self, prefix: str = "") -> list[TransactionMetadata]:
        """Open (ONGOING or PREPARE_*) transactions whose id starts with ``prefix``."""
        with self._locked() as state:
            return [
                md
                for tid in state.open_transactions(prefix)
                if (md := state.metadata(tid)) is not None
            ]

    def transactions(self) -> list[TransactionMetadata]:
        """Every known transactional id's metadata, sorted by id."""
        with self._locked() as state:
            return [
                md for tid in state.transactional_ids() if (md := state.metadata(tid)) is not None
            ]

    def observe_transactions(self) -> list[TransactionMetadata] | None:
        """``transactions()`` for monitoring (MET-03): read as a reader reads, never waiting.
        It catches up on the state log without the coordinator's file lock and completes
        nothing (a process frozen holding that lock must not hide the stuck transaction it
        causes). None when another thread of this process holds the coordinator (it may be
        waiting for such a process): the caller reports the figure as unavailable."""
        if not self._mutex.acquire(blocking=False):
            return None
        try:
            self._catch_up()
            state = self._state
            return [
                md for tid in state.transactional_ids() if (md := state.metadata(tid)) is not None
            ]
        finally:
            self._mutex.release()

    def abort_transaction(self, transactional_id: str) -> bool:
        """Fence and abort an open transaction (as a timeout would, C-25); False if none."""
        with self._locked() as state:
            metadata = state.metadata(transactional_id)
            if metadata is None or metadata.state is not TransactionState.ONGOING:
                return False
            fenced = metadata.prepare_fence_and_abort(self._clock.time_ms())
            self._write_metadata(fenced)
            self._markers.complete(fenced)
            return True

    def abort_hanging_transaction(
        self,
        topic_partition: TopicPartition,
        start_offset: int,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
    ) -> HangingAbort:
        """Write an ABORT marker for the transaction open in ``topic_partition`` from
        ``start_offset`` (inclusive) that no coordinator transaction will end (KIP-664's
        ``kafka-transactions abort``; checks in ``hanging_transactions``)."""
        with self._locked() as state:
            plog = self._log.partition_log(topic_partition)
            return abort_hanging(state, plog, start_offset, producer_id, producer_epoch)
