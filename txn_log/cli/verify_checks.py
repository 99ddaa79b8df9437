"""The checks behind ``txnlog verify``: one partition's files, read-only, without any lock.

Per segment: every batch (length, magic, CRC-32C, offsets moving forward, F-25/F-26), what
follows the last valid batch (a torn tail only at the end of the last segment, X-11), the
offset-index entries pointing at the batch holding their offset, time-index entries growing
and inside the segment, aborted-transaction entries ending inside it; in user topics, every
data batch's records decoding as the append validator let them in (count, lengths, offset
deltas rising inside the batch, inflation bounded: ``batch_records``). Per partition: segments
following each other without gaps, every producer snapshot readable (P-21), and the log start
offset checkpoint DeleteRecords writes (``log_start_checkpoint``) readable and not past the log
end (read before the segments: the start only moves up to an end the later scan sees). In the
internal topics, every record must decode as the coordinators decode it (C-05/C-06 for
``__transaction_state``, the offset-commit layout for ``__consumer_offsets``, O-01): one
foreign record there breaks every process that reads the topic (``verify_records``).

Nothing here writes or creates a file (indexes are read as plain files, not opened as
indexes). Other processes may append, roll, apply retention or delete the topic meanwhile:

- Indexes are read *before* the log: a writer appends a batch before its index entries, so
  every entry read describes a batch the later scan sees.
- What vanishes (a segment deleted by retention, the whole directory by topic deletion) is
  skipped; ``check_partition`` returns None when the partition directory is gone.
- What a live writer leaves for an instant looks like a problem: a batch half written at the
  end of the last segment, the aborted-transaction entry of an abort whose marker is not
  written yet (B-10). ``txnlog verify`` therefore checks a partition with problems again under
  its partition lock (``reuse``), when no writer is mid-append, before reporting anything.
  A segment the cleaner replaced between the two checks (its ``.log`` is another file now) is
  read again, not reused.
- What a cleaner killed mid-swap leaves (``cleaner_swap``) is not corruption: a segment whose
  swap passed its commit point is checked in its new version (its ``.swap`` files), and
  segments a merged segment covers are skipped in the gap check, as readers skip them. Both
  are reported as repairable, since recovery (``--repair``, or the next writer) finishes the
  swap. A covered segment with no merge hint to explain it is not repairable.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from txn_log.cli.verify_records import Problem, check_records
from txn_log.errors import CorruptRecordError, CorruptSnapshotError
from txn_log.storage import offset_index, time_index, txn_index
from txn_log.storage.batch_scan import BatchScan, ensure_torn_tail
from txn_log.storage.cleaner_swap import SWAP_SUFFIX, merge_hint_bases
from txn_log.storage.file_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    log_bases,
    offset_file_name,
)
from txn_log.storage.log_start_checkpoint import CHECKPOINT_FILE, read_log_start
from txn_log.storage.producer_snapshot import read_snapshot

__all__ = ["PartitionCheck", "Problem", "check_partition", "check_segment"]

# --- one segment ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentIndexes:
    """Every whole entry of a segment's three index files as they are now (torn last entries,
    which readers ignore too, left out; a missing file reads as empty)."""

    offsets: list[tuple[int, int]]  # (offset, position in the .log)
    times: list[tuple[int, int]]  # (timestamp, offset)
    aborted: list[tuple[int, int]]  # (producer id, last offset = its ABORT marker)

    @classmethod
    def read(cls, directory: Path, base: int, *, swapped: bool = False) -> SegmentIndexes:
        """With ``swapped``, each index's ``.swap`` file where it is still there (see
        ``current_paths``)."""

        def entries(suffix: str, layout: struct.Struct) -> list[tuple[int, ...]]:
            raw = b""
            for path in current_paths(directory, base, suffix, swapped=swapped):
                try:
                    raw = path.read_bytes()
                    break
                except FileNotFoundError:
                    continue
            return list(layout.iter_unpack(raw[: len(raw) - len(raw) % layout.size]))

        return cls(
            [(base + rel, pos) for rel, pos in entries(INDEX_SUFFIX, offset_index.ENTRY)],
            [(ts, base + rel) for ts, rel in entries(TIME_INDEX_SUFFIX, time_index.ENTRY)],
            [(e[1], e[3]) for e in entries(TXN_INDEX_SUFFIX, txn_index.ENTRY)],
        )


@dataclass(frozen=True)
class SegmentCheck:
    """What checking one segment found. ``next_offset``: exclusive end of the valid batches;
    ``complete``: no invalid bytes after them; ``size``: bytes of the .log looked at."""

    base: int
    last: bool
    problems: list[Problem]
    next_offset: int
    complete: bool
    size: int
    inode: int = 0  # of the .log checked: a cleaner's swap replaces the file under its name


@dataclass
class _Scan:
    positions: dict[int, int] = field(default_factory=dict)  # batch position -> last offset
    problems: list[Problem] = field(default_factory=list)
    next_offset: int = 0
    complete: bool = True  # no invalid bytes after the valid batches
    torn: bool = False  # the invalid bytes are a torn tail (indexes can still be judged)


def current_paths(directory: Path, base: int, suffix: str, *, swapped: bool) -> list[Path]:
    """Where a segment file's current version is, in the order to try: a cleaner that passed
    its commit point (``<base>.log.swap`` exists) and died before renaming every ``.swap``
    over its final name left the new version under ``.swap`` names, the files it renamed
    already under final ones (``cleaner_swap``); readers read that new version."""
    final = directory / offset_file_name(base, suffix)
    return [final.with_name(final.name + SWAP_SUFFIX), final] if swapped else [final]


def check_segment(directory: Path, base: int, topic: str, *, last: bool) -> SegmentCheck | None:
    """Check one segment and its indexes; None if the segment no longer exists. A segment
    whose swap by the cleaner was interrupted after its commit point is checked in its new
    version, and the unfinished swap is a (repairable) problem."""
    swapped = (directory / (offset_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX)).exists()
    indexes = SegmentIndexes.read(directory, base, swapped=swapped)  # first: module docstring
    for path in current_paths(directory, base, LOG_SUFFIX, swapped=swapped):
        try:
            fd = os.open(path, os.O_RDONLY)
            break
        except FileNotFoundError:
            continue
    else:
        return None
    try:
        stat = os.fstat(fd)
        scan = _scan_log(fd, path, base, stat.st_size, topic, last=last)
    finally:
        os.close(fd)
    if scan.complete or scan.torn:  # else the indexes cannot be judged against half a segment
        scan.problems += _check_indexes(directory, base, indexes, scan)
    if path.name.endswith(SWAP_SUFFIX):
        message = (
            "the cleaner's replacement of this segment stopped after its commit point (readers "
            "read this new version): recovery, by --repair or the next writer, renames it in place"
        )
        scan.problems.append(Problem(str(path), 0, message, True))
    return SegmentCheck(
        base, last, scan.problems, scan.next_offset, scan.complete, stat.st_size, stat.st_ino
    )


def _scan_log(fd: int, path: Path, base: int, size: int, topic: str, *, last: bool) -> _Scan:
    result = _Scan(next_offset=base)
    scan = BatchScan(fd, path, base_offset=base, start=0, end=size, file_size=size)
    try:
        for position, header, batch in scan:
            result.positions[position] = header.last_offset
            result.next_offset = header.next_offset
            result.problems += check_records(topic, path, position, header, batch)
    except CorruptRecordError as error:  # a CRC-valid batch with impossible offsets
        result.problems.append(Problem(str(path), scan.position, str(error), False))
        result.complete = False
        return result
    if scan.invalid is None:
        return result
    result.complete = False
    try:
        ensure_torn_tail(
            fd,
            path,
            scan.position,
            scan.invalid,
            size,
            base_offset=base,
            next_offset=result.next_offset,
            allow_torn_tail=last,
        )
    except CorruptRecordError as error:
        message = f"corrupt batch before the tail: {error}"
        result.problems.append(Problem(str(path), scan.position, message, False))
        return result
    message = f"torn tail ({size - scan.position} bytes): {scan.invalid}"
    result.torn = True
    result.problems.append(Problem(str(path), scan.position, message, True))
    return result


def _check_indexes(
    directory: Path, base: int, indexes: SegmentIndexes, scan: _Scan
) -> list[Problem]:
    """Index entries against the batches the scan found; a problem's position is the byte
    position of the entry in its index file."""
    problems = []
    index_path = str(directory / offset_file_name(base, INDEX_SUFFIX))
    for number, (offset, position) in enumerate(indexes.offsets):
        if scan.positions.get(position) != offset:
            message = (
                f"entry (offset {offset}, position {position}) does not point at the batch "
                "holding that offset"
            )
            problems.append(Problem(index_path, number * offset_index.ENTRY_SIZE, message, True))
    time_path = str(directory / offset_file_name(base, TIME_INDEX_SUFFIX))
    previous = -1
    for number, (timestamp, offset) in enumerate(indexes.times):
        if timestamp < previous or not base <= offset < max(scan.next_offset, base + 1):
            message = f"entry ({timestamp}, {offset}) is out of order or outside the segment"
            problems.append(Problem(time_path, number * time_index.ENTRY_SIZE, message, True))
        previous = timestamp
    txn_path = str(directory / offset_file_name(base, TXN_INDEX_SUFFIX))
    for number, (producer_id, last_offset) in enumerate(indexes.aborted):
        if last_offset >= scan.next_offset:
            message = (
                f"aborted transaction of producer {producer_id} ends at {last_offset}, "
                f"past the segment's end {scan.next_offset}"
            )
            problems.append(Problem(txn_path, number * txn_index.ENTRY_SIZE, message, True))
    return problems


# --- one partition ----------------------------------------------------------------------------


def check_snapshots(directory: Path) -> list[Problem]:
    """Snapshots that fail their checks (one deleted meanwhile is no problem)."""
    problems = []
    for path in sorted(directory.glob(f"*{SNAPSHOT_SUFFIX}")):
        try:
            read_snapshot(path)
        except FileNotFoundError:
            continue
        except CorruptRecordError as error:
            problems.append(Problem(str(path), 0, str(error), True))
    return problems


@dataclass(frozen=True)
class PartitionCheck:
    """The segments checked, in offset order, and the snapshot problems of one partition."""

    directory: Path
    segments: list[SegmentCheck | None]  # None: listed, then gone before it was read
    snapshot_problems: list[Problem]
    merge_hints: frozenset[int] = frozenset()  # bases with a <base>.log.merged hint
    log_start_problems: list[Problem] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        found = [p for segment in self.segments if segment is not None for p in segment.problems]
        previous: SegmentCheck | None = None
        for segment in self.segments:
            if previous is None or segment is None or not previous.complete:
                previous = segment  # retention deleted one, or a torn end: no gap to judge
                continue
            path = str(self.directory / offset_file_name(segment.base, LOG_SUFFIX))
            if segment.base < previous.next_offset and segment.next_offset <= previous.next_offset:
                found.append(self._covered(path, segment, previous))
                continue  # readers skip it (log_segments.drop_covered): the previous goes on
            if previous.next_offset != segment.base:
                message = (
                    f"segment starts at offset {segment.base}, but the previous one ends at "
                    f"{previous.next_offset}"
                )
                found.append(Problem(path, 0, message, False))
            previous = segment
        return found + self.snapshot_problems + self.log_start_problems

    def _covered(self, path: str, segment: SegmentCheck, merged: SegmentCheck) -> Problem:
        """A segment inside its predecessor's offsets: left by a merge the cleaner did not
        finish (its hint names the merged segment; recovery deletes the covered ones), or
        unexplained."""
        where = (
            f"segment {segment.base}..{segment.next_offset} lies inside segment "
            f"{merged.base}..{merged.next_offset}"
        )
        if merged.base in self.merge_hints:
            message = (
                f"{where}, which merged it, but the merge stopped before deleting it (readers "
                "skip it): recovery, by --repair or the next writer, deletes it"
            )
            return Problem(path, 0, message, True)
        return Problem(path, 0, f"{where} and no merge of the cleaner is pending", False)


def list_segments(directory: Path) -> list[int] | None:
    """Base offsets of the segments, ascending; None if the directory is gone."""
    try:
        return log_bases(directory)
    except FileNotFoundError:
        return None


def check_partition(
    directory: Path,
    topic: str,
    *,
    reuse: PartitionCheck | None = None,
    on_segment: Callable[[int], None] = lambda size: None,
) -> PartitionCheck | None:
    """Check every segment and snapshot of a partition; None if the partition is gone.

    With ``reuse`` (an earlier check of the same partition), a segment that was clean and not
    the last one then is not read again: only the last segment changes while writers append.
    Snapshots are read again only if they had problems. ``on_segment`` gets each segment's size.
    """
    log_start, log_start_problems = _read_log_start(directory)  # first: module docstring
    bases = list_segments(directory)
    if bases is None:
        return None
    earlier = {s.base: s for s in (reuse.segments if reuse else []) if s is not None}
    segments: list[SegmentCheck | None] = []
    for base in bases:
        last = base == bases[-1]
        found = earlier.get(base)
        if found is None or found.problems or found.last or last or _replaced(directory, found):
            found = check_segment(directory, base, topic, last=last)
        segments.append(found)
        on_segment(0 if found is None else found.size)
    if reuse is not None and not reuse.snapshot_problems:
        snapshot_problems: list[Problem] = []
    else:
        snapshot_problems = check_snapshots(directory)
    try:
        hints = frozenset(merge_hint_bases(p.name for p in directory.iterdir()))
    except FileNotFoundError:
        return None
    newest = next((s for s in reversed(segments) if s is not None), None)
    if newest is not None and log_start > newest.next_offset:
        message = (
            f"the log start offset {log_start} (DeleteRecords) lies past the log end "
            f"{newest.next_offset}: records were lost after it was written; recovery, by "
            "--repair or the next writer, lowers it to the log end"
        )
        log_start_problems.append(Problem(str(directory / CHECKPOINT_FILE), 0, message, True))
    return PartitionCheck(directory, segments, snapshot_problems, hints, log_start_problems)


def _read_log_start(directory: Path) -> tuple[int, list[Problem]]:
    """The checkpointed log start (0: never moved), or the problem that it does not read."""
    try:
        return read_log_start(directory), []
    except CorruptSnapshotError as error:
        message = (
            f"{error}: where DeleteRecords moved the log start is unknown, and readers refuse "
            "the partition; not repairable (removing the file starts the log at its first "
            "segment again, bringing deleted records back: then delete them again with "
            "txnlog delete-records)"
        )
        return 0, [Problem(str(directory / CHECKPOINT_FILE), 0, message, False)]


def _replaced(directory: Path, checked: SegmentCheck) -> bool:
    """Whether the segment's .log is no longer the file checked (the cleaner swapped it)."""
    path = directory / offset_file_name(checked.base, LOG_SUFFIX)
    try:
        return os.stat(path).st_ino != checked.inode
    except FileNotFoundError:
        return False  # deleted: check_segment finds it gone
