"""One log segment: ``<base>.log`` and its offset, time and aborted-transaction indexes.

The ``.log`` file is a plain sequence of record batches (magic 2, see ``batch_header``), starting
at position 0, with offsets increasing from ``base_offset`` (inclusive; offsets of earlier
segments are all smaller). Positions are int32, so a segment stays below 2 GiB.

Index rule, shared by ``append`` and ``recover`` so that both build the same files from the same
log (Kafka's LogSegment.append): a batch starting at ``position`` gets an offset-index entry
``(last offset, position)`` when ``position - p ≥ index_interval_bytes``, where ``p`` is the
position of the last entry (0 when there is none). With each such entry the time index gets
``(max timestamp, its batch's last offset)`` over the data batches so far, if that timestamp grew
(T-12). Control batches are never time-indexed (F-30, T-13), but do get offset-index entries.
``append`` writes the time entry first, so even after a crash between the two writes the time
index covers every batch up to the last offset-index entry (which ``open`` relies on).

Many processes (DESIGN §3). Appends, ``recover`` and ``truncate_to`` must hold the partition's
exclusive lock; reads take none. ``size`` is the end of the last complete valid batch this process
has seen; ``refresh`` (and any scan reaching the end) extends it over batches others appended.
Opening a segment trusts the log up to the last offset-index entry (checked against the header
it points at) and validates from there, so it reads about ``index_interval_bytes`` plus the
unindexed tail; validating the prefix is ``recover``'s job.

Threads: lock-free scans (``batches``, ``refresh``, lookups) may run in any number of threads
at once, beside one appender holding the partition lock. ``size``, ``next_offset`` and the max
timestamp change together under a small lock, only forward while the file only grows (a scan
moves them over the batch that starts exactly at ``size``); they are rebuilt from the files
when the file shrank (truncated by another process), and then only if no other thread rebuilt
them since that scan began. A scan calls the bytes at a position corrupt only below the valid
end this object knew when *that* scan began, read before the scan's file size (so those bytes
were complete when the size was read), and only after reading them again at the file's current
size (a mark that other scans advanced meanwhile proves nothing about this scan's snapshot).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from txn_log.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    LogSegmentOffsetOverflowError,
    StorageError,
)
from txn_log.owned_fd import owned_fd
from txn_log.record.batch_header import (
    HEADER_SIZE,
    BatchHeader,
    TimestampType,
    is_crc_valid,
    parse_header,
    validate_batch,
)
from txn_log.storage.batch_scan import INT32_MAX, BatchScan, ensure_torn_tail
from txn_log.storage.file_io import pread_fully, write_all
from txn_log.storage.file_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
)
from txn_log.storage.offset_index import OffsetIndex, OffsetPosition
from txn_log.storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from txn_log.storage.txn_index import TransactionIndex

logger = logging.getLogger(__name__)

RecordTimestamps = Callable[[memoryview], list[tuple[int, int]]]
"""Decode one whole batch into ``(offset, timestamp)`` per record (the codec's job)."""

_UNKNOWN = TimestampOffset(NO_TIMESTAMP, -1)


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What ``recover`` found: the valid prefix kept and the torn tail dropped (STYLE 6)."""

    valid_bytes: int  # size of the .log afterwards; the tail began here if one was dropped
    truncated_bytes: int  # bytes dropped from the tail (0 when the segment was clean)
    batch_count: int  # valid batches kept
    next_offset: int  # exclusive: last kept offset + 1, or the base offset when empty
    reason: str | None = None  # why the bytes at valid_bytes were not a batch

    @property
    def truncated_at(self) -> int | None:
        """Position where the dropped tail began, or None when nothing was dropped."""
        return self.valid_bytes if self.truncated_bytes else None


def _index_due(position: int, last_entry_position: int, interval: int) -> bool:
    """The offset-index rule of the module docstring, shared by append and recover."""
    return position - last_entry_position >= interval


class _IndexBuilder:
    """The indexes ``append`` would have built, rebuilt batch by batch in file order."""

    def __init__(self, interval: int) -> None:
        self.interval = interval
        self.max_ts = _UNKNOWN
        self.offset_entries: list[OffsetPosition] = []
        self.time_entries: list[TimestampOffset] = []

    def add(self, position: int, header: BatchHeader) -> None:
        if not header.is_control and header.max_timestamp > self.max_ts.timestamp:
            self.max_ts = TimestampOffset(header.max_timestamp, header.last_offset)
        last_position = self.offset_entries[-1].position if self.offset_entries else 0
        if not _index_due(position, last_position, self.interval):
            return
        self.offset_entries.append(OffsetPosition(header.last_offset, position))
        last_ts = self.time_entries[-1].timestamp if self.time_entries else NO_TIMESTAMP
        if self.max_ts.timestamp > last_ts:
            self.time_entries.append(self.max_ts)


class LogSegment:
    """A segment of one partition; build it with ``LogSegment.open``."""

    def __init__(
        self, directory: Path, base_offset: int, fd: int, index_interval_bytes: int
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = directory / offset_file_name(base_offset, LOG_SUFFIX)
        self.offset_index = OffsetIndex(
            directory / offset_file_name(base_offset, INDEX_SUFFIX), base_offset
        )
        self.time_index = TimeIndex(
            directory / offset_file_name(base_offset, TIME_INDEX_SUFFIX), base_offset
        )
        self.txn_index = TransactionIndex(
            directory / offset_file_name(base_offset, TXN_INDEX_SUFFIX), base_offset
        )
        self._fd = fd
        self._close_fd = owned_fd(self, fd)
        self._fd_identity: tuple[int, int] | None = None  # (inode, device) of ``fd``, once read
        self._state_lock = threading.Lock()  # guards the four fields below and the generation
        self._generation = 0  # bumped each time the state is rebuilt from the files
        self._size = 0
        self._next_offset = base_offset
        self._max_ts = _UNKNOWN
        self._first_ts: int | None = None
        self._load_state()

    @classmethod
    def open(
        cls, directory: Path | str, base_offset: int, *, index_interval_bytes: int = 4096
    ) -> LogSegment:
        """Open the segment with ``base_offset`` in ``directory``, creating missing files."""
        directory = Path(directory)
        path = directory / offset_file_name(base_offset, LOG_SUFFIX)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot open segment {path}: {exc}") from exc
        return cls(directory, base_offset, fd, index_interval_bytes)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self._size}, next_offset={self._next_offset})"

    # --- what this process knows -----------------------------------------------------------

    @property
    def size(self) -> int:
        """End of the last complete valid batch seen by this process (bytes; exclusive)."""
        return self._size

    @property
    def next_offset(self) -> int:
        """Last offset of the last batch seen + 1 (exclusive), or ``base_offset`` when empty."""
        return self._next_offset

    @property
    def first_batch_timestamp(self) -> int | None:
        """Max timestamp of the first batch: what time-based rolling uses (T-10); None if empty."""
        if self._size == 0:
            return None
        if self._first_ts is None:
            self._first_ts = parse_header(pread_fully(self._fd, HEADER_SIZE, 0)).max_timestamp
        return self._first_ts

    @property
    def max_timestamp(self) -> int | None:
        """Largest data-batch timestamp: what time-based retention uses (T-10); None if none."""
        return self._max_ts.timestamp if self._max_ts.timestamp > NO_TIMESTAMP else None

    def is_replaced(self) -> bool:
        """Whether ``<base>.log`` now names another file than the one this object reads: the
        log cleaner swapped in a cleaned copy (``cleaner_swap``). False when it is gone."""
        return self.log_name_status() == "replaced"

    def log_name_status(self) -> Literal["mine", "replaced", "gone"]:
        """What ``<base>.log`` names now (one ``stat``): the file this object reads, another
        one (``is_replaced``), or nothing (deleted by retention, a merge or its topic)."""
        try:
            on_disk = os.stat(self.log_path)
        except FileNotFoundError:
            return "gone"
        if self._fd_identity is None:  # what the descriptor refers to never changes
            mine = os.fstat(self._fd)
            self._fd_identity = (mine.st_ino, mine.st_dev)
        return "mine" if (on_disk.st_ino, on_disk.st_dev) == self._fd_identity else "replaced"

    # --- reading (no lock) -----------------------------------------------------------------

    def refresh(self) -> int:
        """Extend ``size`` over complete valid batches appended since (by any process)."""
        generation, size = self._state()
        if self._file_size() < size:
            self._load_state(generation)  # truncated by another process
            return self._size
        for _ in self.batches(size):
            pass
        return self._size

    def batches(
        self, start_position: int = 0, end_position: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of the complete valid batches in [start, end) positions.

        ``start_position`` must be a batch boundary; ``end_position`` (exclusive) defaults to
        the file's current end. Stops silently at an incomplete or invalid batch at or past
        ``size`` (a writer may be writing it); one below ``size`` raises CorruptRecordError.
        """
        for position, header, _ in self._scan(start_position, end_position):
            yield position, header

    def batches_with_bytes(
        self, start_position: int = 0, end_position: int | None = None
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """``batches`` with each batch's bytes: the very bytes whose length, magic and
        CRC-32C the scan checked (one read, never a second one that could see the file
        changed since). Each view stays valid as long as it is referenced (the scan reads
        into fresh ``bytes`` and never writes into them)."""
        return self._scan(start_position, end_position)

    def read_bytes(self, position: int, length: int) -> bytes:
        """Exactly ``length`` bytes at ``position``; CorruptRecordError if the file is shorter."""
        data = pread_fully(self._fd, length, position)
        if len(data) != length:
            raise CorruptRecordError(
                f"{self.log_path}: wanted {length} bytes at position {position}, the file ends "
                f"after {len(data)}"
            )
        return data

    def find_batch_position(self, offset: int) -> int | None:
        """Position of the first batch whose last offset ≥ ``offset`` (the one holding it).

        Looks up the offset index, then scans headers forward; None past the readable end.
        """
        start = self._indexed_position(offset)
        for position, header in self.batches(start):
            if header.last_offset >= offset:
                return position
        return None

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int, record_timestamps: RecordTimestamps
    ) -> int | None:
        """The first offset ≥ ``starting_offset`` of a data record with timestamp ≥ ``timestamp``.

        KIP-32, T-17: the time-index entry at or below ``timestamp`` bounds where to start;
        batches whose max timestamp is smaller are skipped whole; control batches are never the
        answer (F-30). ``record_timestamps`` decodes a batch (the codec's job); a LogAppendTime
        batch stamps every record with its max timestamp. None if no record here qualifies.
        """
        # Entry (T, O) with T ≤ target: every data record before O's batch is older than T
        # (O's batch was the first to reach T), so the answer is in O's batch or after it.
        entry = self.time_index.lookup(timestamp)
        start = self._indexed_position(max(entry.offset, starting_offset))
        for _, header, batch in self._scan(start, None):
            if header.is_control or header.last_offset < starting_offset:
                continue
            if header.max_timestamp < timestamp:
                continue
            for offset, record_timestamp in record_timestamps(batch):
                if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
                    record_timestamp = header.max_timestamp
                if offset >= starting_offset and record_timestamp >= timestamp:
                    return offset
        return None

    def _indexed_position(self, offset: int) -> int:
        """Where a search for ``offset`` starts: the offset-index entry at or below it, if the
        batch at its position really carries its offset (header and CRC), else position 0.

        The log cleaner replaces a segment's files one by one (``cleaner_swap``), so a
        lock-free reader may pair this log with the other version's index: an entry that does
        not describe this file is never trusted, it only costs a scan from the start.
        """
        entry = self.offset_index.lookup(offset)
        if entry.position == 0:
            return 0
        try:
            header = parse_header(pread_fully(self._fd, HEADER_SIZE, entry.position))
            if header.last_offset != entry.offset:
                return 0
            if not is_crc_valid(self.read_bytes(entry.position, header.size_in_bytes), header):
                return 0
        except CorruptRecordError:
            return 0
        return entry.position

    # --- writing (under the partition lock) ------------------------------------------------

    def append(
        self,
        batch: bytes | bytearray | memoryview,
        header: BatchHeader,
        *,
        verify_crc: bool = True,
        indexes_current: bool = False,
    ) -> int:
        """Write one whole batch at the end and index it; returns its position.

        Catches up with the file first; bytes after the last valid batch (a writer that died
        mid-write) are truncated, unless a valid batch follows them (CorruptRecordError). The
        batch must match ``header`` and its length, and pass its CRC; its base offset must be
        ≥ ``next_offset``. ``verify_crc=False`` skips only the CRC, for a caller that checked
        or computed it over these very bytes (the partition log: once per append, F-26).
        ``indexes_current``: the caller knows that no one else wrote the index files since
        this object last did (a trusted hold, ``PartitionLog._write_locked``), so the offset
        index's last entry is taken from its cache without a look at the file.
        """
        view = memoryview(batch)
        self.drop_torn_tail()
        generation, position = self._state()
        if verify_crc:
            actual = validate_batch(view, position)
        else:
            actual = parse_header(view, 0)
            if actual.size_in_bytes != len(view):
                raise CorruptRecordError(
                    f"batch appended to {self.log_path} at position {position} declares "
                    f"{actual.size_in_bytes} bytes but {len(view)} were given"
                )
        if actual != header:
            raise CorruptRecordError(
                f"the header given for the batch appended to {self.log_path} at position "
                f"{position} does not match its bytes"
            )
        self._check_append(position, header)
        try:
            write_all(self._fd, view, position)
        except OSError as exc:
            raise StorageError(
                f"write of {len(view)} bytes to {self.log_path} at position {position} "
                f"failed: {exc}"
            ) from exc
        self._observe(generation, position, header)
        last = self.offset_index.last_entry(cached=indexes_current)
        if _index_due(position, 0 if last is None else last.position, self.index_interval_bytes):
            if self._max_ts.timestamp > NO_TIMESTAMP:
                self.time_index.maybe_append(self._max_ts.timestamp, self._max_ts.offset)
            self.offset_index.append(header.last_offset, position)
        return position

    def recover(self, max_batch_bytes: int, *, allow_torn_tail: bool = True) -> SegmentRecovery:
        """Validate every batch, truncate a torn tail, rebuild the offset and time indexes.

        A torn or invalid tail (nothing valid after the first invalid batch) is truncated and
        reported; with ``allow_torn_tail=False`` (a segment that is not the last) it raises
        instead. An invalid batch followed by a valid one raises CorruptRecordError naming the
        file and position: data is never dropped silently. Aborted-transaction entries past the
        kept offsets are dropped. Running it twice gives the same files as once.
        """
        file_size = self._file_size()
        scan = BatchScan(
            self._fd,
            self.log_path,
            base_offset=self.base_offset,
            start=0,
            end=file_size,
            file_size=file_size,
            max_batch_bytes=max_batch_bytes,
        )
        builder = _IndexBuilder(self.index_interval_bytes)
        count, next_offset = 0, self.base_offset
        for position, header, _ in scan:
            builder.add(position, header)
            count, next_offset = count + 1, header.next_offset
        if scan.invalid is not None:
            ensure_torn_tail(
                self._fd,
                self.log_path,
                scan.position,
                scan.invalid,
                file_size,
                base_offset=self.base_offset,
                next_offset=next_offset,
                allow_torn_tail=allow_torn_tail,
            )
        self.offset_index.rebuild(builder.offset_entries)
        self.time_index.rebuild(builder.time_entries)
        self.txn_index.truncate_to(next_offset)
        if scan.position < file_size:
            self._truncate_log(scan.position)
        self._load_state()
        return SegmentRecovery(
            scan.position, file_size - scan.position, count, next_offset, scan.invalid
        )

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset ≥ ``offset``; returns the bytes removed.

        Truncation is at a batch boundary (Kafka's LogSegment.truncateTo): a batch that holds
        ``offset`` goes whole. Indexes are truncated first, so a crash leaves no index entry
        pointing past the log.
        """
        position = self.find_batch_position(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if position is None:
            return 0
        removed = self._file_size() - position
        self._truncate_log(position)
        self._load_state()
        return removed

    def flush(self) -> None:
        """fdatasync the .log; a failure is fatal (StorageError).

        The offset and time indexes are not synced: opening a segment checks them against the
        log and rebuilds what does not match. The aborted-transaction index is synced by the
        partition log right after an entry is written, before the ABORT marker (``sync_txn_index``).
        """
        sync = getattr(os, "fdatasync", os.fsync)
        try:
            sync(self._fd)
        except OSError as exc:
            raise StorageError(f"fdatasync of {self.log_path} failed: {exc}") from exc

    def flush_indexes(self) -> None:
        """fsync the three index files (when a segment is rolled away from)."""
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self._close_fd()
        self._fd = -1
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def delete(self) -> None:
        """Close and remove all four files (the .txnindex goes with its segment, B-09)."""
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    # --- helpers ---------------------------------------------------------------------------

    def _file_size(self) -> int:
        return os.fstat(self._fd).st_size

    def _state(self) -> tuple[int, int]:
        """``(generation, size)`` read together."""
        with self._state_lock:
            return self._generation, self._size

    def _scan(self, start: int, end: int | None) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """Batches from ``start`` to ``end`` (the file's end when None); see the module
        docstring for when invalid bytes are corruption (F-25, F-26)."""
        generation, valid_end = self._state()  # before the file size: complete below it
        file_size = self._file_size()
        position, retried_at = start, None
        while True:
            scan = BatchScan(
                self._fd,
                self.log_path,
                base_offset=self.base_offset,
                start=position,
                end=file_size if end is None else end,
                file_size=file_size,
            )
            for batch_position, header, batch in scan:
                self._observe(generation, batch_position, header)
                yield batch_position, header, batch
            if scan.invalid is None or scan.position >= valid_end:
                return  # the end, or a batch a writer may still be writing
            file_size = self._file_size()
            if file_size < valid_end:
                self._load_state(generation)  # truncated by another process: not corruption
                return
            if retried_at == scan.position:
                raise CorruptRecordError(
                    f"{self.log_path}: invalid batch at position {scan.position}, below the "
                    f"valid end {valid_end}: {scan.invalid}"
                )
            position = retried_at = scan.position  # read it again at the file's current size

    def _observe(self, generation: int, position: int, header: BatchHeader) -> None:
        """Account for a valid batch if it starts exactly at ``size`` and the state was not
        rebuilt since ``generation``: ``size`` only moves forward, one whole batch at a time."""
        if position != self._size:  # cheap filter for scans of older batches; checked again
            return
        with self._state_lock:
            if generation != self._generation or position != self._size:
                return
            self._size = position + header.size_in_bytes
            self._next_offset = header.next_offset
            if not header.is_control and header.max_timestamp > self._max_ts.timestamp:
                self._max_ts = TimestampOffset(header.max_timestamp, header.last_offset)

    def _load_state(self, generation: int | None = None) -> None:
        """Rebuild ``size``, ``next_offset`` and the max timestamp from the files.

        With ``generation`` (a lock-free reader that saw the file shrink), the result replaces
        the state only if no other thread rebuilt it since: an appender of this process that
        already rebuilt and wrote must never see ``size`` move back under it.
        """
        size, next_offset, max_ts = self._read_state()
        with self._state_lock:
            if generation is not None and generation != self._generation:
                return
            self._generation += 1
            self._size, self._next_offset, self._max_ts = size, next_offset, max_ts
            self._first_ts = None

    def _read_state(self) -> tuple[int, int, TimestampOffset]:
        """``(size, next_offset, max timestamp)`` as the files show them now; changes nothing."""
        start, max_ts = self._trusted_start()
        attempts = ((start, max_ts), (0, _UNKNOWN)) if start else ((0, _UNKNOWN),)
        for attempt, initial_max in attempts:
            size, next_offset, max_ts = attempt, self.base_offset, initial_max
            file_size = self._file_size()
            scan = BatchScan(
                self._fd,
                self.log_path,
                base_offset=self.base_offset,
                start=attempt,
                end=file_size,
                file_size=file_size,
            )
            for position, header, _ in scan:
                size, next_offset = position + header.size_in_bytes, header.next_offset
                if not header.is_control and header.max_timestamp > max_ts.timestamp:
                    max_ts = TimestampOffset(header.max_timestamp, header.last_offset)
            # Trust the start only if it held a valid batch and the time index did not
            # describe a batch that is no longer there (a tail lost in a machine crash).
            if size > attempt and max_ts.offset < next_offset:
                break
        return size, next_offset, max_ts

    def _trusted_start(self) -> tuple[int, TimestampOffset]:
        """Where to start validating on open, and the max data timestamp of what lies before.

        The last offset-index entry points at a batch whose predecessors the time index covers
        (its last entry is their max, see the module docstring). The start is trusted only if
        the batch there carries the entry's last offset; everything before it is not re-read.
        """
        entry = self.offset_index.last_entry()
        if entry is None or entry.position == 0:
            return 0, _UNKNOWN
        try:
            header = parse_header(pread_fully(self._fd, HEADER_SIZE, entry.position))
        except CorruptRecordError:
            return 0, _UNKNOWN
        if header.last_offset != entry.offset:
            return 0, _UNKNOWN
        return entry.position, self.time_index.last_entry() or _UNKNOWN

    def drop_torn_tail(self) -> int:
        """Under the partition lock: catch up, then cut the bytes past the last valid batch (a
        dead writer's torn batch, X-11); returns how many were cut.

        CorruptRecordError (nothing cut) if a batch of the log follows them: that is corruption,
        not a torn tail (``ensure_torn_tail``). Appends and rolls call it before moving on, so
        a torn tail never ends up inside the log.

        A file exactly as long as the valid batches this object knows has nothing after them
        (one ``fstat``): under the lock no one appends meanwhile, and nothing but a torn tail's
        cut ever shortens the active segment.
        """
        if self._file_size() == self._state()[1]:
            return 0
        self.refresh()
        with self._state_lock:
            size, next_offset = self._size, self._next_offset
        file_size = self._file_size()
        if file_size <= size:
            return 0
        ensure_torn_tail(
            self._fd,
            self.log_path,
            size,
            "bytes after the last valid batch",
            file_size,
            base_offset=self.base_offset,
            next_offset=next_offset,
        )
        self.offset_index.truncate_to(next_offset)
        self.time_index.truncate_to(next_offset)
        self.txn_index.truncate_to(next_offset)
        self._truncate_log(size)
        logger.warning(
            "%s: truncated a torn tail of %d bytes at position %d (next offset %d)",
            self.log_path, file_size - size, size, next_offset,
        )  # fmt: skip
        return file_size - size

    def _check_append(self, position: int, header: BatchHeader) -> None:
        minimum = self._next_offset
        if header.base_offset < minimum:
            raise InvalidOffsetError(
                f"batch with base offset {header.base_offset} appended to {self.log_path} at "
                f"position {position}; the next offset is {minimum}"
            )
        end = position + header.size_in_bytes
        if header.last_offset - self.base_offset > INT32_MAX or end > INT32_MAX:
            raise LogSegmentOffsetOverflowError(
                f"batch [{header.base_offset}, {header.last_offset}] of {header.size_in_bytes} "
                f"bytes does not fit {self.log_path} at position {position}: offsets must stay "
                f"within {self.base_offset}..{self.base_offset + INT32_MAX} and the file below "
                f"{INT32_MAX} bytes; roll a new segment"
            )

    def _truncate_log(self, position: int) -> None:
        try:
            os.ftruncate(self._fd, position)
        except OSError as exc:
            raise StorageError(
                f"cannot truncate {self.log_path} to {position} bytes: {exc}"
            ) from exc
