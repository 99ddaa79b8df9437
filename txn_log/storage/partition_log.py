"""One partition's log, shared by every process that opens the log directory (DESIGN §2-3).

Files are the truth; this object is a per-process cache of them:

- ``append`` holds the partition's exclusive lock for one batch: catch up on what other
  processes appended, validate (CRC, size, producer epoch and sequence, KIP-27 expected offset),
  assign offsets by rewriting the batch's base offset (KIP-31: never decompressed), write,
  update the indexes and the producer state. A failed validation writes nothing.
- Readers take no lock. The readable end is the end of the last complete batch whose length and
  CRC are valid; a batch still being written is simply not there yet.
- Opening after a crash truncates a torn tail of the active segment and rebuilds the producer
  state from the newest valid snapshot plus the log after it (P-24, X-11, X-20).
- Retention (``retention``: T-10, B-09) deletes whole closed segments under the lock
  (``run_housekeeping``, ``delete_old_segments``) and closes no descriptor, so readers in the
  middle of one read on; a read below the new log start raises OffsetOutOfRangeError naming
  the range. Segments of another process are opened without
  ``O_CREAT``, so a reader racing retention never brings a deleted segment back; a process
  whose newest known segment was deleted before it applied what followed jumps to the retained
  segments and reloads producer state from a snapshot (``_skip_deleted_segments``).

Offsets: ``log_end_offset`` is exclusive (the next offset to assign); ``high_watermark`` equals
it (no replication); ``last_stable_offset`` = min(first unstable offset, log end) (B-03, B-04).

Thread safety: one ``threading.RLock`` per object guards the cache; the file lock serialises
writers across processes.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from txn_log.clock import SYSTEM_CLOCK, Clock
from txn_log.errors import (
    ConfigError,
    CorruptRecordError,
    ExpectedOffsetMismatchError,
    InvalidRecordError,
    LogLockedError,
    RecordTooLargeError,
    StorageError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from txn_log.fault_points import crash_point
from txn_log.file_lock import FileLock
from txn_log.record.batch_header import (
    BatchHeader,
    TimestampType,
    set_base_offset,
    set_log_append_time,
    validate_batch,
)
from txn_log.record.control import ControlType, encode_control_batch
from txn_log.storage import replay, retention
from txn_log.storage.durable_file import fsync_directory, make_directory
from txn_log.storage.file_names import (
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    offset_file_name,
    parse_offset_file_name,
)
from txn_log.storage.log_bounds import check_offset_in_log
from txn_log.storage.partition_metadata import (
    FILE_NAME as PARTITION_METADATA_FILE,
)
from txn_log.storage.partition_metadata import (
    PartitionIdentity,
    check_identity,
    new_topic_id,
    read_identity,
    write_partition_metadata,
)
from txn_log.storage.producer_append_info import AppendOrigin, CompletedTxn
from txn_log.storage.producer_snapshot import read_snapshot
from txn_log.storage.producer_state import ProducerStateManager
from txn_log.storage.segment import LogSegment
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_config import TopicConfig, check_client_append
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

NO_EXPECTED_OFFSET = -1
MAX_RELATIVE_OFFSET = (1 << 31) - 1
LOCK_FILE = ".lock"


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


def _indexes_within(segment: LogSegment) -> bool:
    """Whether the offset and time indexes describe only batches still in the segment.

    A power failure can keep index writes yet lose the log bytes they describe, cut at a batch
    boundary (X-20): such a segment looks clean but needs its indexes rebuilt.
    """
    last_index, last_time = segment.offset_index.last_entry(), segment.time_index.last_entry()
    return all(e is None or e.offset < segment.next_offset for e in (last_index, last_time))


def _read_if_exists(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


class PartitionLog:
    """The segments, indexes and producer state of one partition directory."""

    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: TopicConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        read_only: bool = False,
    ) -> None:
        self.directory = directory
        self.topic_partition = topic_partition
        self.config = config
        self.read_only = read_only
        self._clock = clock
        self._mutex = threading.RLock()
        self._lock = FileLock(directory / LOCK_FILE)
        self._segments: list[LogSegment] = []
        self._end_offset = 0
        self._tail_position = 0  # bytes of the active segment applied to the caches
        self._producer_state: ProducerStateManager  # built under the lock, in ``open``
        self._tracks_producer_state = True  # False only for ``open_for_reading``
        self._identity: PartitionIdentity | None = None  # None: opened without one (read-only)
        self._needs_recovery = False  # opened while another process held the lock
        self.last_recovery: list[str] = []

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
        if create:
            make_directory(directory)
        elif not (directory / PARTITION_METADATA_FILE).is_file():
            raise UnknownTopicOrPartitionError(
                f"{topic_partition}: no partition at {directory} (deleted with its topic?)"
            )
        log = cls(directory, topic_partition, config, clock=clock)
        if create and not (directory / PARTITION_METADATA_FILE).exists():
            log._lock.acquire()  # a new standalone partition: nobody else can be writing it
        elif not log._lock.try_acquire():
            with log._mutex:
                log._open_as_reader()
            log._needs_recovery = True
            return log
        try:
            with log._mutex:
                if create and not (directory / PARTITION_METADATA_FILE).exists():
                    write_partition_metadata(directory, new_topic_id())
                log._open_locked()
        finally:
            log._lock.release()
        return log

    def _open_locked(self) -> None:
        """Load and recover under the lock: truncate a torn tail, reload producer state."""
        self._identity = read_identity(self.directory, str(self.topic_partition))
        self._producer_state = ProducerStateManager(
            self.directory, str(self.topic_partition), clock=self._clock
        )
        self._load_segments()
        self._recover()
        self._needs_recovery = False

    def _open_as_reader(self) -> None:
        """Load without the lock (as a reader): nothing truncated, deleted or written."""
        self._identity = self._identity_if_any()
        self._producer_state = ProducerStateManager(
            self.directory, str(self.topic_partition), clock=self._clock, read_only=True
        )
        self._load_segments()
        active = self._segments[-1]
        self._end_offset = active.next_offset
        self._tail_position = active.size
        self._producer_state.truncate_and_reload(self.log_start_offset, self._end_offset)
        self._replay(self._producer_state.map_end_offset, self._end_offset)

    @classmethod
    def open_read_only(
        cls,
        directory: Path,
        topic_partition: TopicPartition,
        config: TopicConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> PartitionLog:
        """Open for inspection: no lock, no truncation, no snapshot clean-up, no writes.

        A torn tail is simply not read (as by any lock-free reader); appends raise.
        """
        if not directory.is_dir():
            raise UnknownTopicOrPartitionError(f"{topic_partition}: no directory {directory}")
        log = cls(directory, topic_partition, config, clock=clock, read_only=True)
        with log._mutex:
            log._open_as_reader()
        return log

    @classmethod
    def open_for_reading(
        cls,
        directory: Path,
        topic_partition: TopicPartition,
        config: TopicConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> PartitionLog:
        """Open only to read batches (a Spark executor reading a planned range, DESIGN §6).

        Like ``open_read_only`` (no lock, no truncation, no writes) but without producer state:
        opening costs O(segments) however many batches follow the last snapshot. ``read``,
        ``batch_locations``, ``collect_aborted_txns`` and the offsets work;
        ``last_stable_offset`` and ``producer_state`` raise ConfigError.
        """
        if not directory.is_dir():
            raise UnknownTopicOrPartitionError(f"{topic_partition}: no directory {directory}")
        log = cls(directory, topic_partition, config, clock=clock, read_only=True)
        log._tracks_producer_state = False
        log._identity = log._identity_if_any()
        with log._mutex:
            log._load_segments()
            active = log._segments[-1]
            log._end_offset = active.next_offset
            log._tail_position = active.size
        return log

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
        log = cls(directory, topic_partition, config, clock=clock)
        log._identity = read_identity(directory, str(topic_partition))
        return log, log.repair()

    def _identity_if_any(self) -> PartitionIdentity | None:
        try:
            return read_identity(self.directory, str(self.topic_partition))
        except UnknownTopicOrPartitionError:
            return None  # a partition written before topic ids (or mid-deletion)

    @property
    def topic_id(self) -> str | None:
        """The id of the topic this partition belongs to (Kafka's topic id, KIP-516)."""
        return None if self._identity is None else self._identity.topic_id

    def is_current(self) -> bool:
        """Whether the directory still belongs to the topic this object was opened for (one
        ``stat``); False once the topic was deleted, or deleted and re-created."""
        if self._identity is None:
            return True
        try:
            check_identity(self.directory, self._identity, str(self.topic_partition))
        except UnknownTopicOrPartitionError:
            return False
        return True

    @contextmanager
    def _write_locked(self, *, wait: bool = True) -> Iterator[None]:
        """Hold the partition for a write: the file lock first, then this object's mutex.

        The file lock comes first so that a thread waiting for another process's append
        (even one frozen mid-append) holds no mutex a reader of this process needs (readers
        never wait on writers). Under the lock the partition's identity is checked: a write
        into a partition deleted (or re-created) since it was opened is refused before
        anything is written. ``wait=False`` raises LogLockedError instead of waiting.
        """
        if wait:
            self._lock.acquire()
        elif not self._lock.try_acquire():
            raise LogLockedError(
                f"{self.topic_partition}: another process or thread is writing to the partition"
            )
        try:
            with self._mutex:
                if self._identity is not None:
                    check_identity(self.directory, self._identity, str(self.topic_partition))
                if self._needs_recovery:
                    self._open_locked()
                yield
        finally:
            self._lock.release()

    def _require_producer_state(self, what: str) -> None:
        if not self._tracks_producer_state:
            raise ConfigError(
                f"{self.topic_partition}: {what} needs producer state, which a log opened "
                "with open_for_reading does not keep"
            )

    def _check_writable(self, operation: str) -> None:
        if self.read_only:
            raise ConfigError(
                f"{self.topic_partition}: {operation} on a log opened read-only (for inspection)"
            )

    def _load_segments(self) -> None:
        opened = (self._open_existing_segment(base) for base in self._segment_bases_on_disk())
        self._segments = [segment for segment in opened if segment is not None]
        if not self._segments:  # a new partition: its directory and first file, durably
            self._segments = [self._open_segment(0)]
            fsync_directory(self.directory)
            fsync_directory(self.directory.parent)

    def _segment_bases_on_disk(self) -> list[int]:
        """Base offsets of the segment files now on disk; UnknownTopicIdError when the
        partition directory itself is gone (its topic was deleted by another process)."""
        try:
            names = [p.name for p in self.directory.iterdir()]
        except FileNotFoundError:
            raise UnknownTopicIdError(
                f"{self.topic_partition}: the partition directory {self.directory} is gone "
                "(its topic was deleted)"
            ) from None
        return sorted(
            parsed[0]
            for parsed in map(parse_offset_file_name, names)
            if parsed is not None and parsed[1] == LOG_SUFFIX
        )

    def _recover(self) -> None:
        """Truncate a torn tail of the active segment, reload producer state.

        Opening a segment already validated it from its last index entry to the end (see
        ``segment``); only when bytes lie past the last valid batch (a writer died mid-append),
        or its indexes point past it (a lost tail, X-20), is the whole active segment
        re-validated and its indexes rebuilt, so a clean open reads little more than the
        unindexed tail.
        """
        active = self._segments[-1]
        if active.log_path.stat().st_size == active.size and _indexes_within(active):
            recovery = None
        else:
            recovery = active.recover(self.config.max_message_bytes, allow_torn_tail=True)
        if recovery is not None and recovery.truncated_bytes:
            message = (
                f"{self.topic_partition}: truncated a torn tail of {recovery.truncated_bytes} "
                f"bytes at position {recovery.truncated_at} of "
                f"{self.directory / offset_file_name(active.base_offset, LOG_SUFFIX)}"
            )
            self.last_recovery.append(message)
            logger.warning(message)
        self._end_offset = active.next_offset
        self._tail_position = active.size
        active.txn_index.truncate_to(self._end_offset)
        self._producer_state.truncate_and_reload(
            self.log_start_offset, self._end_offset, self._clock.time_ms()
        )
        self._replay(self._producer_state.map_end_offset, self._end_offset)

    # --- catching up with other processes -----------------------------------------------------

    def _catch_up(self) -> None:
        """Apply batches other processes appended since this process last looked.

        ``_tail_position`` is how far this process has applied the active segment; a segment
        that another process rolled to is applied from its start.
        """
        while True:
            active = self._segments[-1]
            for position, header in active.batches(start_position=self._tail_position):
                self._apply(active, position, header)
                self._end_offset = header.next_offset
                self._tail_position = position + header.size_in_bytes
            if self._tracks_producer_state:
                self._producer_state.update_map_end_offset(self._end_offset)
            if self._end_offset == active.base_offset:
                return
            segment = self._open_existing_segment(self._end_offset)
            if segment is None:
                if not active.log_path.exists():
                    self._skip_deleted_segments()
                return
            self._segments.append(segment)
            self._tail_position = 0

    def _skip_deleted_segments(self) -> None:
        """Jump over segments another process's retention deleted before this process applied
        the ones after them: the gap can no longer be read, so producer state is reloaded from
        a snapshot at or after the new log start (retention made sure one exists) plus the log.

        Deletes no file, so lock-free readers may come here too.
        """
        try:
            bases = [b for b in self._segment_bases_on_disk() if b >= self._end_offset]
        except UnknownTopicOrPartitionError:
            return  # the topic was deleted: this view keeps what it read (the files it holds)
        retained = [s for s in map(self._open_existing_segment, bases) if s is not None]
        if not retained:
            return  # the partition itself is gone (topic deleted)
        logger.info(
            "%s: segments up to offset %d were deleted by retention before this process read "
            "them; continuing at the log start %d",
            self.topic_partition, self._end_offset, retained[0].base_offset,
        )  # fmt: skip
        self._segments = retained
        active = retained[-1]
        self._end_offset, self._tail_position = active.next_offset, active.size
        if self._tracks_producer_state:
            start = self._producer_state.reload_from_snapshots(
                retained[0].base_offset, self._end_offset
            )
            self._replay(start, self._end_offset)

    def _open_segment(self, base_offset: int) -> LogSegment:
        """Open or create the segment at ``base_offset`` (a new segment, under the lock)."""
        return LogSegment.open(
            self.directory, base_offset, index_interval_bytes=self.config.index_interval_bytes
        )

    def _open_existing_segment(self, base_offset: int) -> LogSegment | None:
        """Open a segment found on disk, or None if it is gone (deleted by retention).

        Never creates the file: a reader racing another process's retention would otherwise
        bring a deleted segment back as an empty file, a false log start.
        """
        path = self.directory / offset_file_name(base_offset, LOG_SUFFIX)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot open segment {path}: {exc}") from exc
        return LogSegment(self.directory, base_offset, fd, self.config.index_interval_bytes)

    def _replay(self, start_offset: int, end_offset: int) -> None:
        """Rebuild producer state from the log in [start_offset, end_offset): headers only,
        plus the bytes of control batches (markers)."""
        for segment, position, header in self._iter_headers(start_offset, end_offset):
            if header.next_offset > start_offset:
                self._apply(segment, position, header)
        self._producer_state.update_map_end_offset(end_offset)

    def _apply(self, segment: LogSegment, position: int, header: BatchHeader) -> None:
        if not self._tracks_producer_state:
            return
        batch = segment.read_bytes(position, header.size_in_bytes) if header.is_control else b""
        replay.apply_batch(self._producer_state, header, batch)

    # --- offsets ---------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """First offset still in the log, inclusive (after forgetting segments that another
        process's retention deleted)."""
        with self._mutex:
            self._refresh_start()
            return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (exclusive end), after catching up."""
        with self._mutex:
            self._catch_up()
            return self._end_offset

    @property
    def high_watermark(self) -> int:
        """Equals the log end: every appended batch is as durable as it will get."""
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """First offset of the earliest open transaction, else the log end (B-03, B-04)."""
        self._require_producer_state("last_stable_offset")
        with self._mutex:
            self._catch_up()
            first_unstable = self._producer_state.first_unstable_offset()
            if first_unstable is None:
                return self._end_offset
            return min(first_unstable, self._end_offset)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first (for inspection tools)."""
        with self._mutex:
            self._catch_up()
            return tuple(self._segments)

    def batch_locations(
        self, start_offset: int, end_offset: int | None = None
    ) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """(segment, file position, header) of the batches overlapping [start, end), lock-free."""
        with self._mutex:
            self._catch_up()
            end = self._end_offset if end_offset is None else end_offset
            segments = list(self._segments)
        return self._iter_headers(start_offset, end, segments)

    @property
    def producer_state(self) -> ProducerStateManager:
        self._require_producer_state("producer_state")
        return self._producer_state

    # --- appending -------------------------------------------------------------------------------

    def append(
        self,
        batch: bytes | bytearray | memoryview,
        *,
        expected_offset: int = NO_EXPECTED_OFFSET,
        sync: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Append one client batch atomically (F-08); validation failures write nothing.

        ``expected_offset`` is KIP-27's expected offset of the batch's first record: when the
        topic enables ``check.expected.offsets`` and it is not -1, a mismatch with the log end
        refuses the whole batch (K-04). Checked after the sequence checks, so a retry of a
        written batch is answered as a duplicate, not as a mismatch (K-09). ``origin``
        COORDINATOR (transactional offset commits) checks the epoch but not sequences (O-03).
        Internal topics take COORDINATOR appends only: a CLIENT one raises InvalidTopicError
        (C-03) before anything is written.
        """
        self._check_writable("append")
        if origin is AppendOrigin.CLIENT:
            check_client_append(self.topic_partition.topic)
        header = self._validate_client_batch(batch)
        with self._write_locked():
            self._catch_up()
            # Kafka looks for retries of client batches only: coordinator batches (offset
            # commits, O-03) carry no sequences, so each would "duplicate" the previous one
            duplicate = (
                replay.find_duplicate(self._producer_state, header)
                if origin is AppendOrigin.CLIENT
                else None
            )
            if duplicate is not None:
                return AppendResult(duplicate[0], duplicate[1], -1, duplicate=True)
            append_info = replay.validate_data_batch(
                self._producer_state, header, self._end_offset, origin
            )
            self._check_expected_offset(expected_offset)
            self._drop_stale_aborted_txns()
            result = self._write(bytearray(batch), header)
            if append_info is not None:
                self._producer_state.update(append_info)
            self._producer_state.update_map_end_offset(self._end_offset)
            if sync:
                self._segments[-1].flush()
            return result

    def _validate_client_batch(self, batch: bytes | bytearray | memoryview) -> BatchHeader:
        header = validate_batch(batch)
        _ = header.compression  # an unknown codec raises UnsupportedCompressionTypeError
        if header.is_control:
            raise InvalidRecordError(
                f"{self.topic_partition}: a client may not append a control batch; COMMIT and "
                "ABORT markers are written by the transaction coordinator only (F-31)"
            )
        if len(batch) > self.config.max_message_bytes:
            raise RecordTooLargeError(
                f"{self.topic_partition}: batch of {len(batch)} bytes exceeds the topic's "
                f"max.message.bytes of {self.config.max_message_bytes} (F-09)"
            )
        if header.records_count < 1:
            raise InvalidRecordError(f"{self.topic_partition}: a data batch must hold records")
        return header

    def _check_expected_offset(self, expected_offset: int) -> None:
        if not self.config.check_expected_offsets or expected_offset == NO_EXPECTED_OFFSET:
            return
        if expected_offset != self._end_offset:
            raise ExpectedOffsetMismatchError(
                f"{self.topic_partition}: expected offset {expected_offset} does not match the "
                f"log end offset {self._end_offset}; the whole batch was refused (KIP-27)"
            )

    def _write(self, batch: bytearray, header: BatchHeader) -> AppendResult:
        """Assign offsets (and LogAppendTime) and write; the caller holds the lock."""
        base_offset = self._end_offset
        set_base_offset(batch, base_offset)
        log_append_time = -1
        if self.config.message_timestamp_type is TimestampType.LOG_APPEND_TIME:
            log_append_time = self._clock.time_ms()
            set_log_append_time(batch, log_append_time)
        header = validate_batch(batch)
        crash_point("append.before_write")  # a writer frozen or killed holding the lock
        self._maybe_roll(header)
        self._append_to_active(batch, header)
        return AppendResult(base_offset, header.last_offset, log_append_time)

    def _append_to_active(self, batch: bytearray, header: BatchHeader) -> None:
        position = self._segments[-1].append(batch, header)
        self._end_offset = header.next_offset
        self._tail_position = position + header.size_in_bytes

    def _maybe_roll(self, header: BatchHeader) -> None:
        active = self._segments[-1]
        if active.size == 0:
            return
        too_big = active.size + header.size_in_bytes > self.config.segment_bytes
        first_ts = active.first_batch_timestamp
        too_old = first_ts is not None and header.max_timestamp - first_ts > self.config.segment_ms
        offset_overflow = header.last_offset - active.base_offset > MAX_RELATIVE_OFFSET
        if too_big or too_old or offset_overflow:
            self.roll()

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end; snapshot producer state there (P-21).

        A torn tail of the active segment (a writer died mid-batch) is cut first, as an append
        would: once rolled away from, the segment is no longer the last one, where a torn tail
        may be repaired, and its bytes would read as corruption before the tail (X-11).
        """
        self._check_writable("roll")
        with self._write_locked():
            self._catch_up()
            active = self._segments[-1]
            active.drop_torn_tail()
            if active.size == 0:
                return active
            active.flush()
            active.flush_indexes()
            segment = self._open_segment(self._end_offset)
            self._segments.append(segment)
            self._tail_position = 0
            self._producer_state.update_map_end_offset(self._end_offset)
            if self._producer_state.take_snapshot() is None:  # which fsyncs the directory
                fsync_directory(self.directory)  # the new file, before anything in it is acked
            return segment

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

        Stale producer or coordinator epochs raise before anything is written. For an abort the
        ``.txnindex`` entry is written *before* the marker, so a lock-free reader that can see
        the marker can always see the entry; recovery drops entries past the log end.
        ``wait=False`` raises LogLockedError rather than wait for another writer.
        """
        self._check_writable("append_marker")
        with self._write_locked(wait=wait):
            self._catch_up()
            self._drop_stale_aborted_txns()
            now = self._clock.time_ms()
            marker_offset = self._end_offset
            append_info, completed = replay.validate_marker(
                self._producer_state,
                control_type,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch,
                marker_offset=marker_offset,
                timestamp_ms=now,
            )
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
            header = validate_batch(batch)
            self._maybe_roll(header)
            # a dead writer's torn tail goes before the entry: cutting it later drops the entry
            self._segments[-1].drop_torn_tail()
            if completed is not None and completed.is_aborted:
                lso = self._producer_state.last_stable_offset_for(completed)
                txn_index = self._segments[-1].txn_index
                created = not txn_index.path.exists()  # B-09: made at the first abort
                txn_index.append(
                    AbortedTxn(producer_id, completed.first_offset, marker_offset, lso)
                )
                txn_index.flush()  # durable before the marker: never a marker without its entry
                if created:
                    fsync_directory(self.directory)  # nor without the file that holds it
                crash_point("marker.after_txn_index")  # an entry whose marker never lands
            self._append_to_active(batch, header)
            self._producer_state.update(append_info)
            if completed is not None:
                self._producer_state.complete_txn(completed)
            self._producer_state.update_map_end_offset(self._end_offset)
            if sync:
                self._segments[-1].flush()
            return MarkerResult(marker_offset, completed)

    def _drop_stale_aborted_txns(self) -> None:
        """Drop ``.txnindex`` entries whose ABORT marker never landed; the caller holds the
        lock and is about to append at the log end.

        ``append_marker`` makes the entry (B-10) durable before the marker, so a writer that
        died or failed in between leaves an entry claiming the log end. Opening the partition
        drops it (``_recover``), but peers that already have the partition open must too,
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
            self._segments[-1].flush()

    # --- repair (``txnlog verify --repair``) ------------------------------------------------------

    def repair(self) -> list[str]:
        """Recover every segment under the partition lock; returns one line per change made.

        Holds the file lock and then the mutex (the order of ``_write_locked``) for the whole
        repair, as a writer holds them for a batch, so no append is in flight: bytes after the
        last valid batch of the last segment are a dead writer's torn tail and are truncated
        (X-11, X-20). An invalid batch in any other segment, or one with a valid batch after
        it, stays where it is and is returned as "could not repair" (data is never dropped).
        Every segment's indexes are rebuilt from its batches (aborted-transaction entries past
        its end dropped), unreadable producer snapshots deleted, and this process's caches
        (log end, producer state) reloaded from the files (P-24).

        Other processes: writers wait for the lock. Lock-free readers keep reading: no
        complete batch is touched, and index files are rewritten in place with the entries
        appends would have written (one that reads meanwhile sees a prefix of them, which only
        makes its lookups start further back).
        """
        self._check_writable("repair")
        with self._lock, self._mutex:  # as _write_locked, without recovering through indexes
            if self._identity is not None:
                check_identity(self.directory, self._identity, str(self.topic_partition))
            # afresh from the files, without trusting the indexes; segment objects in use by
            # lock-free readers stay valid (they notice a truncation themselves)
            self._load_segments()
            done: list[str] = []
            for segment in self._segments:
                done += self._repair_segment(segment, last=segment is self._segments[-1])
            done += self._delete_unreadable_snapshots()
            active = self._segments[-1]
            self._end_offset = active.next_offset
            self._tail_position = active.size
            self._producer_state = ProducerStateManager(
                self.directory, str(self.topic_partition), clock=self._clock
            )
            self._producer_state.truncate_and_reload(
                self.log_start_offset, self._end_offset, self._clock.time_ms()
            )
            self._replay(self._producer_state.map_end_offset, self._end_offset)
            self._needs_recovery = False
            return done

    def _repair_segment(self, segment: LogSegment, *, last: bool) -> list[str]:
        """``recover`` one segment (the caller holds the lock); what it changed, in words."""
        paths = [i.path for i in (segment.offset_index, segment.time_index, segment.txn_index)]
        before = [_read_if_exists(path) for path in paths]  # the files: caches may be stale
        try:
            result = segment.recover(self.config.max_message_bytes, allow_torn_tail=last)
        except CorruptRecordError as error:
            return [f"could not repair {segment.log_path}: {error}"]
        done = []
        if result.truncated_bytes:
            done.append(
                f"{self.topic_partition}: truncated a torn tail of {result.truncated_bytes} "
                f"bytes at position {result.truncated_at} of {segment.log_path}"
            )
        for path, old in zip(paths, before, strict=True):
            if _read_if_exists(path) != old:
                done.append(f"rebuilt {path}")
        return done

    def _delete_unreadable_snapshots(self) -> list[str]:
        """Delete snapshot files that fail their checks (P-24 falls back to older ones)."""
        done = []
        for path in sorted(self.directory.glob(f"*{SNAPSHOT_SUFFIX}")):
            try:
                read_snapshot(path)
            except CorruptRecordError as error:
                path.unlink(missing_ok=True)
                done.append(f"deleted unreadable snapshot {path}: {error}")
        if done:
            fsync_directory(self.directory)
        return done

    # --- reading ---------------------------------------------------------------------------------

    def read(
        self, start_offset: int, end_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Whole batches overlapping [start_offset, end_offset), in offset order, lock-free.

        The first batch may begin before ``start_offset`` (batches are never split); the caller
        drops records outside the range. Raises OffsetOutOfRangeError below the log start or
        past the log end.
        """
        with self._mutex:
            self._catch_up()
            self._refresh_start()
            end = self._end_offset if end_offset is None else min(end_offset, self._end_offset)
            check_offset_in_log(
                self.topic_partition, start_offset, self.log_start_offset, self._end_offset
            )
            segments = list(self._segments)
        return self._iter_batches(segments, start_offset, end)

    def _iter_headers(
        self, start_offset: int, end_offset: int, segments: list[LogSegment] | None = None
    ) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """(segment, position, header) of the batches overlapping [start_offset, end_offset)."""
        segments = list(self._segments) if segments is None else segments
        if start_offset >= end_offset:
            return
        bases = [s.base_offset for s in segments]
        index = max(bisect.bisect_right(bases, start_offset) - 1, 0)
        for segment in segments[index:]:
            if segment.base_offset >= end_offset:
                return
            position = segment.find_batch_position(start_offset)
            if position is None:
                continue
            for batch_position, header in segment.batches(start_position=position):
                if header.base_offset >= end_offset:
                    return
                if header.next_offset > start_offset:
                    yield segment, batch_position, header

    def _iter_batches(
        self, segments: list[LogSegment], start_offset: int, end_offset: int
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        for segment, position, header in self._iter_headers(start_offset, end_offset, segments):
            yield header, memoryview(segment.read_bytes(position, header.size_in_bytes))

    def _refresh_start(self) -> None:
        """Forget segments that another process's retention deleted.

        They are not closed: a reader thread of this process may be iterating one right now;
        its descriptors close when the last reference goes (``owned_fd``).
        """
        while len(self._segments) > 1 and not self._segments[0].log_path.exists():
            self._segments.pop(0)

    def collect_aborted_txns(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Aborted transactions intersecting [start_offset, end_offset) (B-12 step 4)."""
        with self._mutex:
            self._catch_up()
            bases = [s.base_offset for s in self._segments]
            index = max(bisect.bisect_right(bases, start_offset) - 1, 0)
            aborted: list[AbortedTxn] = []
            for segment in self._segments[index:]:
                result = segment.txn_index.collect_aborted_txns(start_offset, end_offset)
                aborted.extend(result.aborted_txns)
                if result.is_complete:
                    break
            return aborted

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """First offset whose record timestamp is ≥ ``timestamp_ms`` (KIP-32, T-17); None if none.

        Control records are never the answer (F-30).
        """
        with self._mutex:
            self._catch_up()
            for segment in self._segments:
                if segment.max_timestamp is not None and segment.max_timestamp < timestamp_ms:
                    continue
                found = segment.find_offset_by_timestamp(
                    timestamp_ms, segment.base_offset, replay.record_timestamps
                )
                if found is not None:
                    return found
            return None

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
        self._check_writable("run_housekeeping")
        try:
            with self._write_locked(wait=False):
                self._catch_up()
                deleted = self._delete_old_segments()
                expired = self._producer_state.remove_expired_producers()
                if expired:
                    self._producer_state.take_snapshot()
                return PartitionHousekeeping(
                    tuple(deleted), tuple(expired), self._segments[0].base_offset
                )
        except LogLockedError:
            return None  # being written (or its writer is stopped mid-append): next round
        except UnknownTopicOrPartitionError:
            return None  # deleted with its topic since it was opened: nothing to keep

    def delete_old_segments(self) -> list[int]:
        """Apply retention.ms / retention.bytes now, waiting for the partition lock; returns
        the base offsets of the deleted segments. The periodic pass uses ``run_housekeeping``.
        """
        self._check_writable("delete_old_segments")
        with self._write_locked():
            self._catch_up()
            return self._delete_old_segments()

    def _delete_old_segments(self) -> list[int]:
        """Delete the oldest segments while retention applies (``retention``); the caller holds
        the lock. Producer state is kept (Kafka since KIP-360): a snapshot at or after the new
        log start makes sure a process that opens the partition later has it too."""
        self._refresh_start()
        count = retention.deletable_segments(
            self.topic_partition.topic,
            self._segments,
            self.config,
            self._clock.time_ms(),
            self._producer_state.first_unstable_offset(),
        )
        log_start = self._segments[count].base_offset
        deleted, retained = self._segments[:count], self._segments[count:]
        if deleted:
            latest = self._producer_state.latest_snapshot_offset()
            if latest is None or latest <= log_start:  # opening drops those at the log start
                self._producer_state.take_snapshot()
            self._segments = retained
            self._producer_state.delete_snapshots_before(log_start)
            retention.unlink_segments(self.directory, deleted)
        retention.remove_orphan_indexes(self.directory, log_start)
        return [segment.base_offset for segment in deleted]

    def close(self) -> None:
        with self._mutex:
            for segment in self._segments:
                segment.close()
            self._lock.close()

    def check_offset(self, offset: int) -> None:
        """Raise OffsetOutOfRangeError naming the valid range unless start ≤ offset ≤ end."""
        end = self.log_end_offset
        check_offset_in_log(self.topic_partition, offset, self.log_start_offset, end)
