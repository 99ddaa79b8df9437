"""Writing one partition, shared by every process that opens the log directory (DESIGN §2-3).

A ``PartitionLog`` is a ``PartitionReader`` (the lock-free cache of the files) that also writes:
appends, COMMIT/ABORT markers, rolls, retention and housekeeping, each under the partition's
exclusive lock (``_write_locked``: the file lock, then the mutex):

- ``append`` validates a client batch once before taking the lock (CRC-32C, size, codec), then
  under it catches up on what other processes appended, checks the producer epoch and sequence
  and the KIP-27 expected offset, assigns offsets by rewriting the batch's base offset (outside
  the CRC, F-11; KIP-31: never decompressed), stamps LogAppendTime if the topic asks for it (the
  one CRC recomputation, T-08), writes, and updates the indexes and the producer state. A failed
  validation writes nothing.
- Opening loads and recovers the partition under its lock (``log_loader``): a torn tail of the
  active segment truncated, producer state rebuilt from the newest valid snapshot plus the log
  after it (P-24, X-11, X-20). When another process holds the lock, it is opened as a reader
  opens it and recovered before this process's first write. ``repair`` recovers every segment
  (``txnlog verify --repair``).
- An append its caller does not sync is synced anyway once the topic's ``flush.messages`` or
  ``flush.ms`` calls for it (``flush_policy``), checked at each append and housekeeping pass.
- Retention (``retention``: T-10, B-09) deletes whole closed segments under the lock
  (``run_housekeeping``, ``delete_old_segments``) and closes no descriptor, so readers in the
  middle of one read on.
- DeleteRecords (``delete_records``, Kafka's ``maybeIncrementLogStartOffset``) moves the log
  start forward under the lock, durably (``log_start_checkpoint``); retention later deletes
  the segments wholly below it.

Thread safety: the mutex guards the cache; the file lock serialises writers across processes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from txn_log.clock import SYSTEM_CLOCK, Clock
from txn_log.errors import (
    LogLockedError,
    TransactionNotVerifiedError,
    TxnLogError,
    UnknownTopicOrPartitionError,
)
from txn_log.fault_points import crash_point
from txn_log.file_lock import FileLock
from txn_log.record.batch_header import BatchHeader, parse_header
from txn_log.record.control import ControlType, encode_control_batch
from txn_log.storage import delete_records as deleting
from txn_log.storage import retention
from txn_log.storage.durable_file import fsync_directory, make_directory
from txn_log.storage.flush_policy import UnflushedAppends
from txn_log.storage.log_loader import LoadedLog, LogLoader
from txn_log.storage.log_segments import open_new_segment
from txn_log.storage.log_start_checkpoint import read_log_start, write_log_start
from txn_log.storage.log_validator import (
    NO_EXPECTED_OFFSET,
    assign_offsets,
    check_expected_offset,
    maybe_recompress,
    validate_client_batch,
)
from txn_log.storage.partition_metadata import FILE_NAME as PARTITION_METADATA_FILE
from txn_log.storage.partition_metadata import (
    PartitionIdentity,
    check_identity,
    new_topic_id,
    read_identity,
    write_partition_metadata,
)
from txn_log.storage.partition_reader import PartitionReader, identity_if_any
from txn_log.storage.producer_append_info import AppendOrigin, CompletedTxn, ProducerAppendInfo
from txn_log.storage.segment import LogSegment
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_config import TopicConfig, check_client_append
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

MAX_RELATIVE_OFFSET = (1 << 31) - 1
LOCK_FILE = ".lock"
PRODUCER_SNAPSHOT_LAG_OFFSETS = 2000
"""Housekeeping and a clean close snapshot the producer state once it is this many offsets
past its newest snapshot, so the next open replays at most about this much (P-24, DESIGN §2)."""


def partition_file_lock(directory: Path) -> FileLock:
    """The partition's writer lock, ``<directory>/.lock``, counting its holds (``FileLock``):
    every holder that may change the partition's files takes it through here, so that a
    holder that sees no other hold since its own last one may trust its caches
    (``PartitionLog._write_locked``)."""
    return FileLock(directory / LOCK_FILE, count_holds=True)


@dataclass(frozen=True)
class AppendResult:
    """Where a batch landed. Offsets inclusive; ``duplicate`` = a retry answered from cache."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int
    duplicate: bool = False


@dataclass(frozen=True)
class PartitionHousekeeping:
    """What one housekeeping round did to a partition: base offsets of the segments retention
    deleted (ascending), ids of the producers that expired, and the log start offset after it
    (inclusive)."""

    deleted_segments: tuple[int, ...]
    expired_producers: tuple[int, ...]
    log_start_offset: int


@dataclass(frozen=True)
class MarkerResult:
    """A COMMIT/ABORT marker written at ``offset``; ``completed_txn`` is None for a duplicate."""

    offset: int
    completed_txn: CompletedTxn | None


class PartitionLog(PartitionReader):
    """The segments, indexes and producer state of one partition directory, for writing."""

    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: TopicConfig,
        loaded: LoadedLog,
        *,
        clock: Clock,
        identity: PartitionIdentity | None,
        lock: FileLock,
        needs_recovery: bool = False,
        verifies_transactions: bool = False,
    ) -> None:
        super().__init__(directory, topic_partition, config, loaded, clock=clock, identity=identity)
        self.verifies_transactions = verifies_transactions
        """Whether a transactional batch may start a transaction here only when the
        coordinator verified it (KIP-890): a partition of a ``Log``, which has a coordinator;
        not a partition opened on its own (tests, benchmarks), which has none."""
        self._lock = lock
        self._writing = False  # inside _write_locked (only the lock holder reads or sets it)
        self._trusted = False  # inside _write_locked: the caches are known current (below)
        self._in_doubt = True  # a hold since the last full catch-up may have left them behind
        self._needs_recovery = needs_recovery  # opened while another process held the lock
        self._unflushed = UnflushedAppends()  # appended here, not synced yet (flush.*)
        self.last_recovery: list[str] = list(loaded.recovery)

    # --- opening and recovery ------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        topic_partition: TopicPartition,
        config: TopicConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        create: bool = True,
        verifies_transactions: bool = False,
    ) -> PartitionLog:
        """Open the partition; recover it under its lock, now or at the first write.

        ``create`` (a partition used on its own, e.g. by tests and benchmarks) makes the
        directory and its ``partition.metadata`` if missing. The ``Log`` passes False: a
        partition must then exist, so that a process that still knows a deleted topic never
        brings its directory back (UnknownTopicIdError).

        Opening never waits on a writer (DESIGN §3): when another process holds the lock
        (appending, or frozen mid-append), the partition is opened as a reader opens it (no
        truncation, producer state replayed from the files) and recovered under the lock
        before this process's first write (``_write_locked``).
        """
        metadata = directory / PARTITION_METADATA_FILE
        if create:
            make_directory(directory)
        elif not metadata.is_file():
            raise UnknownTopicOrPartitionError(
                f"{topic_partition}: no partition at {directory} (deleted with its topic?)"
            )
        lock = partition_file_lock(directory)
        loader = LogLoader(directory, topic_partition, config, clock)
        # The hold is not counted (``FileLock``): recovery changes only what a holder that
        # died or failed left (a torn tail, a stale aborted-index entry, a cleaner's swap),
        # and that holder counted its hold before its first change, so every live holder
        # distrusts its caches already; after a machine crash no holder lives on.
        if create and not metadata.exists():
            lock.acquire(count=False)  # a new standalone partition: nobody else writes it
        elif not lock.try_acquire(count=False):
            identity = identity_if_any(directory, topic_partition)
            loaded = loader.load_as_reader(with_producer_state=True)
            return cls(
                directory, topic_partition, config, loaded, clock=clock, identity=identity,
                lock=lock, needs_recovery=True, verifies_transactions=verifies_transactions,
            )  # fmt: skip
        try:
            if create and not metadata.exists():
                write_partition_metadata(directory, new_topic_id())
            identity = read_identity(directory, str(topic_partition))
            loaded = loader.load()
        finally:
            lock.release()
        return cls(
            directory, topic_partition, config, loaded, clock=clock, identity=identity,
            lock=lock, verifies_transactions=verifies_transactions,
        )  # fmt: skip

    @classmethod
    def open_for_repair(
        cls,
        directory: Path,
        topic_partition: TopicPartition,
        config: TopicConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> tuple[PartitionLog, list[str]]:
        """Open an existing partition by repairing it (``repair``), and what that changed.

        Unlike ``open`` it reads nothing through the indexes before they are rebuilt, so a
        partition whose index entries point at the wrong bytes (which ``open`` fails on) can
        be repaired. A partition deleted with its topic raises UnknownTopicOrPartitionError
        (its directory is never brought back).
        """
        if not (directory / PARTITION_METADATA_FILE).is_file():
            raise UnknownTopicOrPartitionError(
                f"{topic_partition}: no partition at {directory} (deleted with its topic?)"
            )
        identity = read_identity(directory, str(topic_partition))
        lock = partition_file_lock(directory)
        with lock:  # as ``repair`` holds it
            check_identity(directory, identity, str(topic_partition))
            loaded, done = LogLoader(directory, topic_partition, config, clock).repair()
        log = cls(
            directory, topic_partition, config, loaded, clock=clock, identity=identity, lock=lock
        )
        return log, done

    def _loader(self) -> LogLoader:
        return LogLoader(self.directory, self.topic_partition, self.config, self._clock)

    @contextmanager
    def _write_locked(
        self, *, wait: bool = True, refresh: bool = True, keeps_caches: bool = False
    ) -> Iterator[None]:
        """Hold the partition for a write: the file lock first, then this object's mutex.

        The file lock comes first so that a thread waiting for another process's append
        (even one frozen mid-append) holds no mutex a reader of this process needs (readers
        never wait on writers). Under the lock the partition's identity is checked: a write
        into a partition deleted (or re-created) since it was opened is refused before
        anything is written, and the topic's config read again if another process changed
        it (``refresh_config``: retention, rolls, markers and the cleaner's steps apply the
        config in force), once per outermost write: a roll inside an append works with the
        append's config, and ``refresh`` False (an append, which read it before validating)
        keeps the one just read. ``wait=False`` raises LogLockedError instead of waiting.

        Trusted holds (``_trusted``; appends and markers, the writes of a commit): when no one
        else changed the partition since this object's previous hold (the lock counts the
        holds that change it, ``FileLock.others_held``) and every hold since the last full
        catch-up was an append or a marker write (``keeps_caches``: they keep the caches equal
        to the files they write, and count their hold only before their first change, so a
        refused one changes nothing) that raised nothing, the files are exactly as this object
        last left them, and those writes skip what only finds other holders' changes: the
        catch-up, stale aborted-index entries, the offset index's size. Any other hold, a
        change by another holder, and any failure leave the caches in doubt until an append
        or marker write has caught up in full. The identity check and the config refresh are
        never skipped: topic deletion and config changes are not seen through this count.
        """
        count = not keeps_caches  # else ``note_change`` before the first change
        if wait:
            self._lock.acquire(count=count)
        elif not self._lock.try_acquire(count=count):
            raise LogLockedError(
                f"{self.topic_partition}: another process or thread is writing to the partition"
            )
        try:
            with self._mutex:
                if count:
                    self._lock.note_change()  # this hold may be inside a deferred one
                self._check_identity()
                if refresh and not self._writing:
                    self.refresh_config()
                if self._needs_recovery:
                    self._lock.note_change()
                    self._set_identity(read_identity(self.directory, str(self.topic_partition)))
                    loaded = self._loader().load()
                    self._install(loaded)
                    self.last_recovery += loaded.recovery
                    self._needs_recovery = False
                outermost, self._writing = not self._writing, True
                if outermost:
                    self._in_doubt = self._in_doubt or self._lock.others_held
                    self._trusted = not self._in_doubt
                try:
                    yield
                except BaseException:
                    self._trusted, self._in_doubt = False, True
                    raise
                finally:
                    self._writing = not outermost
                    if count:
                        self._trusted, self._in_doubt = False, True
                    if outermost:
                        self._trusted = False
        finally:
            self._lock.release()

    def _catch_up_untrusted(self) -> bool:
        """Under the lock, at the start of an append or marker write: catch up unless the
        hold is trusted (``_write_locked``); returns whether it is."""
        if self._trusted:
            return True
        self._catch_up()
        return False

    def repair(self) -> list[str]:
        """Recover every segment under the partition lock (``LogLoader.repair``); returns one
        line per change made, and reloads this process's caches (log end, producer state).

        Holds the file lock and then the mutex (the order of ``_write_locked``) for the whole
        repair, as a writer holds them for a batch, so no append is in flight, and reads
        nothing through the indexes before rebuilding them. Other processes: writers wait for
        the lock. Lock-free readers keep reading: no complete batch is touched, and index files
        are rewritten in place with the entries appends would have written (one that reads
        meanwhile sees a prefix of them, which only makes its lookups start further back).
        """
        with self._lock, self._mutex:
            self._in_doubt = True  # left so: only an append or a marker write clears it
            self._check_identity()
            loaded, done = self._loader().repair()
            self._install(loaded)
            self._needs_recovery = False
            if not done:  # one line per change: it changed nothing, as peers trust
                self._lock.take_back_count()
            return done

    # --- appending -------------------------------------------------------------------------------

    def append(
        self,
        batch: bytes | bytearray | memoryview,
        *,
        expected_offset: int = NO_EXPECTED_OFFSET,
        sync: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_verified: bool = False,
        config: TopicConfig | None = None,
    ) -> AppendResult:
        """Append one client batch atomically (F-08); validation failures write nothing.

        KIP-890 part 1 (C-16): on a partition that ``verifies_transactions``, a transactional
        batch that would start a transaction here (its producer has none open in this
        partition) raises TransactionNotVerifiedError unless ``transaction_verified``: only
        the coordinator's verified append (``coordinator.transactional_append``), which holds
        the coordinator while it checks that the producer's ongoing transaction includes this
        partition and appends, passes True. Batches continuing an open transaction need no
        verification: its marker, which would end it, is written under the same lock.

        ``expected_offset`` is KIP-27's expected offset of the batch's first record: when the
        topic enables ``check.expected.offsets`` and it is not -1, a mismatch with the log end
        refuses the whole batch (K-04). Checked after the sequence checks, so a retry of a
        written batch is answered as a duplicate, not as a mismatch (K-09). ``origin``
        COORDINATOR (transactional offset commits) checks the epoch but not sequences (O-03).
        Internal topics take COORDINATOR appends only: a CLIENT one raises InvalidTopicError
        (C-03) before anything is written.

        The topic's config is read again first (``refresh_config``), so a config another
        process changed applies from this batch on: its ``max.message.bytes``, and its
        ``compression.type``, in which a CLIENT batch of another codec is stored
        (``log_validator.maybe_recompress``; the result's offsets are the same). A caller
        that has just read it for this batch (a producer sizing its batch) passes it as
        ``config`` instead of having it read again.
        """
        client = origin is AppendOrigin.CLIENT
        if client:
            check_client_append(self.topic_partition.topic)
        if config is None:
            config = self.refresh_config()
        data = bytearray(batch)  # the bytes written: validated here, never the caller's again
        header = validate_client_batch(self.topic_partition, config, data, client=client)
        if client:
            data, header = maybe_recompress(self.topic_partition, config, data, header)
        with self._write_locked(refresh=False, keeps_caches=True):  # validated with this config
            trusted = self._catch_up_untrusted()
            state = self.producer_state
            # Kafka looks for retries of client batches only: coordinator batches (offset
            # commits, O-03) carry no sequences, so each would "duplicate" the previous one
            if client and header.has_producer_id:
                cached = state.find_duplicate_batch(header)
                if cached is not None:
                    return AppendResult(cached.first_offset, cached.last_offset, -1, duplicate=True)
            append_info = self._prepare_data_batch(header, origin, transaction_verified)
            check_expected_offset(
                self.topic_partition, self.config, expected_offset, self._end_offset
            )
            self._lock.note_change()  # validated: from here on this hold changes the files
            if not trusted:
                self._drop_stale_aborted_txns()
            result = self._write(data)
            now_ms = self._clock.time_ms()
            if append_info is not None:
                state.update(append_info)
            state.update_map_end_offset(self._end_offset)
            self._unflushed.note(result.last_offset - result.base_offset + 1, now_ms)
            if sync or self._unflushed.due(config, now_ms):  # flush.messages, flush.ms
                self._sync_active()
            self._in_doubt = False  # caught up in full, or trusted, and written: current
            return result

    def _prepare_data_batch(
        self, header: BatchHeader, origin: AppendOrigin, transaction_verified: bool
    ) -> ProducerAppendInfo | None:
        """The validated change a data batch at the log end makes to producer state (None
        without a producer id); raises on a stale epoch, a sequence gap, a transaction-state
        error (P-10) or an unverified transaction start (KIP-890), changing nothing (STYLE 3)."""
        if not header.has_producer_id:
            return None
        append_info = self.producer_state.prepare_update(header.producer_id, origin)
        append_info.append_data_batch(header, base_offset=self._end_offset)
        before = append_info.current_entry
        joins_under_another_epoch = (
            header.is_transactional
            and before.current_txn_first_offset is not None
            and before.producer_epoch != header.producer_epoch
        )  # a newer epoch's batch would otherwise join the old instance's open transaction
        starts = bool(append_info.started_transactions()) or joins_under_another_epoch
        if starts and self.verifies_transactions and not transaction_verified:
            raise TransactionNotVerifiedError(
                f"{self.topic_partition}: producer {header.producer_id} epoch "
                f"{header.producer_epoch} has no transaction open in this partition, and "
                "the coordinator did not verify that its ongoing transaction includes it "
                "(KIP-890: AddPartitionsToTxn first, then the coordinator's verified "
                "append); nothing was written"
            )
        return append_info

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether this process last saw ``producer_id`` at ``producer_epoch`` with a
        transaction open in this partition (lock-free, maybe stale: a hint for the verified
        append, which the check under the lock in ``append`` makes safe)."""
        entry = self.producer_state.last_entry(producer_id)
        return (
            entry is not None
            and entry.producer_epoch == producer_epoch
            and entry.current_txn_first_offset is not None
        )

    def _write(self, batch: bytearray) -> AppendResult:
        """Assign offsets (and LogAppendTime) to a validated batch and write it; the caller
        holds the lock. Its CRC is not checked again (``log_validator``)."""
        base_offset = self._end_offset
        header, log_append_time = assign_offsets(batch, base_offset, self.config, self._clock)
        crash_point("append.before_write")  # a writer frozen or killed holding the lock
        self._maybe_roll(header)
        self._append_to_active(batch, header)
        return AppendResult(base_offset, header.last_offset, log_append_time)

    def _append_to_active(self, batch: bytearray, header: BatchHeader) -> None:
        """Write a batch whose CRC the caller checked or computed itself."""
        position = self._segments[-1].append(
            batch, header, verify_crc=False, indexes_current=self._trusted
        )
        self._end_offset = header.next_offset
        self._tail_position = position + header.size_in_bytes

    def _maybe_roll(self, header: BatchHeader) -> None:
        active = self._segments[-1]
        if active.size == 0:
            return
        too_big = active.size + header.size_in_bytes > self.config.segment_bytes
        first_ts = active.first_batch_timestamp
        # segment.ms, or max.compaction.lag.ms when compacted (Kafka's LogConfig.maxSegmentMs)
        too_old = (
            first_ts is not None and header.max_timestamp - first_ts > self.config.max_segment_ms
        )
        offset_overflow = header.last_offset - active.base_offset > MAX_RELATIVE_OFFSET
        if too_big or too_old or offset_overflow:
            self.roll()

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end; snapshot producer state there (P-21).

        A torn tail of the active segment (a writer died mid-batch) is cut first, as an append
        would: once rolled away from, the segment is no longer the last one, where a torn tail
        may be repaired, and its bytes would read as corruption before the tail (X-11).
        """
        with self._write_locked():
            self._catch_up()
            active = self._segments[-1]
            active.drop_torn_tail()
            if active.size == 0:
                return active
            self._sync_active()
            active.flush_indexes()
            segment = open_new_segment(self.directory, self._end_offset, self.config)
            self._segments.append(segment)
            self._tail_position = 0
            self.producer_state.update_map_end_offset(self._end_offset)
            if self.producer_state.take_snapshot() is None:  # which fsyncs the directory
                fsync_directory(self.directory)  # the new file, before anything in it is acked
            return segment

    def maybe_roll_by_time(self) -> bool:
        """Roll the active segment when its first batch is older than ``max_segment_ms`` even
        though nothing is being appended (the log cleaner's housekeeping, so a quiet compacted
        partition's data becomes cleanable: KIP-354's max.compaction.lag.ms). Never waits for a
        writer: False when one holds the partition, or when there is nothing to roll."""
        try:
            with self._write_locked(wait=False):
                self._catch_up()
                first_ts = self._segments[-1].first_batch_timestamp
                if (
                    first_ts is None
                    or self._clock.time_ms() - first_ts <= self.config.max_segment_ms
                ):
                    self._lock.take_back_count()  # changed nothing (``FileLock``)
                    return False
                self.roll()
                return True
        except (LogLockedError, UnknownTopicOrPartitionError):
            return False

    def append_marker(
        self,
        control_type: ControlType,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        sync: bool = True,
        wait: bool = True,
    ) -> MarkerResult:
        """Write a COMMIT/ABORT control batch for ``producer_id`` (B-01).

        Stale producer or coordinator epochs raise before anything is written (B-01 step 1,
        C-23). For an abort the ``.txnindex`` entry is written *before* the marker, so a
        lock-free reader that can see the marker can always see the entry; recovery drops
        entries past the log end. ``wait=False`` raises LogLockedError rather than wait for
        another writer. The marker is written as encoded, its CRC computed once.
        """
        with self._write_locked(wait=wait, keeps_caches=True):
            trusted = self._catch_up_untrusted()
            state = self.producer_state
            now = self._clock.time_ms()
            marker_offset = self._end_offset
            append_info = state.prepare_update(producer_id, AppendOrigin.COORDINATOR)
            completed = append_info.append_end_txn_marker(
                control_type is ControlType.COMMIT,
                producer_epoch,
                coordinator_epoch,
                marker_offset,
                now,
            )  # validated (stale epochs raise): from here on this hold changes the files
            self._lock.note_change()
            if not trusted:
                self._drop_stale_aborted_txns()
            batch = bytearray(
                encode_control_batch(
                    control_type,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    coordinator_epoch=coordinator_epoch,
                    timestamp_ms=now,
                    base_offset=marker_offset,
                )
            )
            header = parse_header(batch)
            self._maybe_roll(header)
            # a dead writer's torn tail goes before the entry: cutting it later drops the entry
            self._segments[-1].drop_torn_tail()
            if completed is not None and completed.is_aborted:
                self._append_aborted_txn(
                    AbortedTxn(
                        producer_id,
                        completed.first_offset,
                        marker_offset,
                        state.last_stable_offset_for(completed),
                    )
                )
            self._append_to_active(batch, header)
            state.update(append_info)
            if completed is not None:
                state.complete_txn(completed)
            state.update_map_end_offset(self._end_offset)
            self._unflushed.note(1, self._clock.time_ms())
            if sync:
                self._sync_active()
            self._in_doubt = False  # as in ``append``
            return MarkerResult(marker_offset, completed)

    def _append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Make an abort's ``.txnindex`` entry durable before its marker (B-10): never a marker
        without its entry, nor without the file that holds it (B-09: made at the first abort)."""
        txn_index = self._segments[-1].txn_index
        created = not txn_index.path.exists()
        txn_index.append(entry)
        txn_index.flush()
        if created:
            fsync_directory(self.directory)
        crash_point("marker.after_txn_index")  # an entry whose marker never lands

    def _drop_stale_aborted_txns(self) -> None:
        """Drop ``.txnindex`` entries whose ABORT marker never landed; the caller holds the
        lock and is about to append at the log end.

        ``append_marker`` makes the entry (B-10) durable before the marker, so a writer that
        died or failed in between leaves an entry claiming the log end. Opening the partition
        drops it (``log_loader``), but peers that already have the partition open must too,
        before anything takes that offset: else the marker's retry is refused there, and the
        entry's last stable offset would end index searches (B-12) before later entries.
        Only the active segment can hold one (a marker's entry goes where the marker goes).
        """
        txn_index = self._segments[-1].txn_index
        last = txn_index.last_entry()
        if last is not None and last.last_offset >= self._end_offset:
            txn_index.truncate_to(self._end_offset)
            logger.warning(
                "%s: dropped aborted-transaction index entries from offset %d on (producer id "
                "%d): their ABORT marker was never written",
                self.topic_partition, self._end_offset, last.producer_id,
            )  # fmt: skip

    def flush(self) -> None:
        """fdatasync the active segment and its indexes (durability against power loss)."""
        with self._mutex:
            self._sync_active()

    def _sync_active(self) -> None:
        """fdatasync the active segment; what this process appended without a sync is durable
        now (``flush_policy``). The caller holds the mutex."""
        self._segments[-1].flush()
        self._unflushed.synced()

    # --- DeleteRecords -------------------------------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """Move the log start offset forward to ``offset`` (-1: the high watermark), Kafka's
        DeleteRecords on one partition; returns the low watermark, the log start after it.

        Refusals (``delete_records`` module: an internal topic, a policy without ``delete``, an
        offset outside [0, high watermark]) raise before anything changes; an offset at or
        below the current start changes nothing. Under the partition lock: caught up, the
        active segment synced (every record below the new start durable before the
        checkpoint says it was deleted), then the checkpoint written durably (STYLE 3).
        Readers in every process refuse offsets below it from then on; the segments wholly
        below it go at the next retention pass. Transactions that began below it stay open,
        and hold the LSO at the new start until they end (``last_stable_offset``).
        """
        with self._write_locked():
            # under the lock: the policy is the config the write holds (a peer may alter it)
            deleting.check_topic(self.topic_partition, self.config)
            self._catch_up()
            tp, end = self.topic_partition, self._end_offset
            new_start = deleting.new_log_start_offset(tp, offset, end)
            current = self._log_start_now()
            if new_start <= current:
                self._lock.take_back_count()  # changed nothing (``FileLock``)
                return current
            self._sync_active()
            write_log_start(self.directory, new_start)
            crash_point("delete_records.after_checkpoint")
            logger.info(
                "%s: log start offset moved from %d to %d (DeleteRecords)",
                self.topic_partition, current, new_start,
            )  # fmt: skip
            return new_start

    # --- housekeeping: retention and producer-id expiration -----------------------------------

    def run_housekeeping(self) -> PartitionHousekeeping | None:
        """One round of Kafka's periodic log tasks for this partition: retention (T-10, B-09,
        see ``delete_old_segments``) and producer-id expiration (P-26, P-27).

        Works under the partition's lock, as an append does, but never waits for a writer:
        returns None, having done nothing, when another process or another thread of this one
        holds the partition's lock (an append in progress, or a writer stopped inside one), and
        for a partition deleted since it was opened. After expiring producers it takes a
        snapshot, so a partition opened later agrees.
        """
        try:
            with self._write_locked(wait=False):
                self._catch_up()
                if self._unflushed.due(self.config, self._clock.time_ms()):  # flush.ms
                    self._sync_active()
                deleted = self._delete_old_segments()
                expired = self.producer_state.remove_expired_producers()
                snapshot = expired or self._producer_snapshot_lag() >= PRODUCER_SNAPSHOT_LAG_OFFSETS
                if snapshot:
                    self.producer_state.take_snapshot()
                if not (deleted or snapshot):  # the common pass: peers keep their trust
                    self._lock.take_back_count()  # (``FileLock``; orphan indexes aside)
                return PartitionHousekeeping(tuple(deleted), tuple(expired), self._log_start_now())
        except LogLockedError:
            return None  # being written (or its writer is stopped mid-append): next round
        except UnknownTopicOrPartitionError:
            return None  # deleted with its topic since it was opened: nothing to keep

    @contextmanager
    def maintenance_locked(self, *, wait: bool = True) -> Iterator[list[LogSegment]]:
        """Hold the partition as a writer does (``_write_locked``), caught up, and yield its
        segments (oldest first; the caller must not keep or change the list): the log
        cleaner's short steps (``log_cleaner``), and a check that must hold until the
        caller's marker is written (``hanging_transactions``; the lock is re-entrant).
        LogLockedError when ``wait`` is False and the partition is being written."""
        with self._write_locked(wait=wait):
            self._catch_up()
            self._refresh_start()
            yield self._segments

    def delete_old_segments(self) -> list[int]:
        """Apply retention.ms / retention.bytes now, waiting for the partition lock; returns
        the base offsets of the deleted segments. The periodic pass uses ``run_housekeeping``.
        """
        with self._write_locked():
            self._catch_up()
            return self._delete_old_segments()

    def _delete_old_segments(self) -> list[int]:
        """Delete the oldest segments while retention applies (``retention``); the caller holds
        the lock."""
        self._refresh_start()
        count = retention.delete_old_segments(
            self.topic_partition.topic,
            self.directory,
            self._segments,
            self.config,
            self._clock.time_ms(),
            self.producer_state,
            read_log_start(self.directory),
        )
        deleted = self._segments[:count]
        if count:
            self._segments = self._segments[count:]
        return [segment.base_offset for segment in deleted]

    def _producer_snapshot_lag(self) -> int:
        state = self.producer_state
        return state.map_end_offset - (state.latest_snapshot_offset() or 0)

    def _maybe_snapshot_on_close(self) -> None:
        """As Kafka snapshots producer state at a clean shutdown, so that the next open does
        not replay the whole partition (P-24): only when it lags by
        ``PRODUCER_SNAPSHOT_LAG_OFFSETS`` (small logs keep their files unchanged). Never waits
        for a writer; a failure is logged and leaves the next open to replay."""
        try:
            with self._write_locked(wait=False):
                self._catch_up()
                if self._producer_snapshot_lag() >= PRODUCER_SNAPSHOT_LAG_OFFSETS:
                    self.producer_state.take_snapshot()
                else:
                    self._lock.take_back_count()  # changed nothing (``FileLock``)
        except (LogLockedError, UnknownTopicOrPartitionError):
            return  # being written (its writer snapshots), or deleted with its topic
        except (TxnLogError, OSError) as problem:
            logger.warning("%s: no producer snapshot at close: %s", self.topic_partition, problem)

    def close(self) -> None:
        self._maybe_snapshot_on_close()
        with self._mutex:
            super().close()
            self._lock.close()
