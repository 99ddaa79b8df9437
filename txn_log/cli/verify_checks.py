"""The checks behind ``txnlog verify``: one partition's files, read-only, without any lock.

Per segment: every batch (length, magic, CRC-32C, offsets moving forward, F-25/F-26), what
follows the last valid batch (a torn tail only at the end of the last segment, X-11), the
offset-index entries pointing at the batch holding their offset, time-index entries growing
and inside the segment, aborted-transaction entries ending inside it. Per partition: segments
following each other without gaps, every producer snapshot readable (P-21). In the internal
topics, every record must decode as the coordinators decode it (C-05/C-06 for
``__transaction_state``, the offset-commit layout for ``__consumer_offsets``, O-01): one
foreign record there breaks every process that reads the topic.

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
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from txn_log.coordinator import state_log_format
from txn_log.errors import CorruptRecordError, TxnLogError
from txn_log.group_offsets import decode_record as decode_offset_commit
from txn_log.record.batch_header import BatchHeader
from txn_log.record.codec import Record, iter_records
from txn_log.storage import offset_index, time_index, txn_index
from txn_log.storage.batch_scan import BatchScan, ensure_torn_tail
from txn_log.storage.file_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
    parse_offset_file_name,
)
from txn_log.storage.producer_snapshot import read_snapshot
from txn_log.storage.replay import read_control_record
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC


@dataclass(frozen=True)
class Problem:
    """One problem: the file, the byte position in it, what is wrong, whether repair fixes it."""

    file: str
    position: int
    problem: str
    repairable: bool


# --- records of the internal topics -----------------------------------------------------------

RecordCheck = Callable[[Record], object]
"""Decode one record as its readers do; raises when they would fail on it."""


def _check_state_record(record: Record) -> object:
    # exactly as the coordinator's catch-up decodes it (a null key reads as empty)
    return state_log_format.decode_record(record.key or b"", record.value)


def _check_offset_commit(record: Record) -> object:
    return decode_offset_commit(record.key, record.value)


_RECORD_CHECKS: dict[str, tuple[RecordCheck, str]] = {
    TRANSACTION_STATE_TOPIC: (
        _check_state_record,
        "init_transactions(), commits and read_committed reads fail on it in every process",
    ),
    CONSUMER_OFFSETS_TOPIC: (_check_offset_commit, "committed() fails on it in every process"),
}

DECODE_ERRORS = (TxnLogError, ValueError, struct.error)


def check_records(
    topic: str, path: Path, position: int, header: BatchHeader, batch: memoryview
) -> list[Problem]:
    """Problems of the records of one batch of an internal topic (none elsewhere).

    The coordinator decodes every batch of its state log, so a control batch (a COMMIT or
    ABORT marker) there is a problem too. Markers belong in ``__consumer_offsets``
    (transactional offset commits, O-04); its reader parses each as one control record.
    """
    found = _RECORD_CHECKS.get(topic)
    if found is None:
        return []
    check, consequence = found
    if header.is_control and topic == TRANSACTION_STATE_TOPIC:
        message = (
            f"a transaction marker (control batch) at offset {header.base_offset} of {topic}, "
            f"which holds no transactions; {consequence} (verify never deletes records)"
        )
        return [Problem(str(path), position, message, False)]
    if header.is_control:
        try:
            read_control_record(header, batch)
        except DECODE_ERRORS as error:
            message = f"control batch at offset {header.base_offset} of {topic}: {error}"
            return [Problem(str(path), position, f"{message}; {consequence}", False)]
        return []
    problems = []
    try:
        for record in iter_records(batch):
            try:
                check(record)
            except DECODE_ERRORS as error:
                problems.append(
                    Problem(
                        str(path),
                        position,
                        f"record at offset {record.offset} of {topic} does not decode: {error}; "
                        f"{consequence} (verify never deletes records)",
                        False,
                    )
                )
    except DECODE_ERRORS as error:
        problems.append(
            Problem(str(path), position, f"records of the batch do not decode: {error}", False)
        )
    return problems


# --- one segment ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentIndexes:
    """Every whole entry of a segment's three index files as they are now (torn last entries,
    which readers ignore too, left out; a missing file reads as empty)."""

    offsets: list[tuple[int, int]]  # (offset, position in the .log)
    times: list[tuple[int, int]]  # (timestamp, offset)
    aborted: list[tuple[int, int]]  # (producer id, last offset = its ABORT marker)

    @classmethod
    def read(cls, directory: Path, base: int) -> SegmentIndexes:
        def entries(suffix: str, layout: struct.Struct) -> list[tuple[int, ...]]:
            try:
                raw = (directory / offset_file_name(base, suffix)).read_bytes()
            except FileNotFoundError:
                return []
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


@dataclass
class _Scan:
    positions: dict[int, int] = field(default_factory=dict)  # batch position -> last offset
    problems: list[Problem] = field(default_factory=list)
    next_offset: int = 0
    complete: bool = True  # no invalid bytes after the valid batches
    torn: bool = False  # the invalid bytes are a torn tail (indexes can still be judged)


def check_segment(directory: Path, base: int, topic: str, *, last: bool) -> SegmentCheck | None:
    """Check one segment and its indexes; None if the segment no longer exists."""
    path = directory / offset_file_name(base, LOG_SUFFIX)
    indexes = SegmentIndexes.read(directory, base)  # first: see the module docstring
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        scan = _scan_log(fd, path, base, size, topic, last=last)
    finally:
        os.close(fd)
    if scan.complete or scan.torn:  # else the indexes cannot be judged against half a segment
        scan.problems += _check_indexes(directory, base, indexes, scan)
    return SegmentCheck(base, last, scan.problems, scan.next_offset, scan.complete, size)


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

    @property
    def problems(self) -> list[Problem]:
        found = [p for segment in self.segments if segment is not None for p in segment.problems]
        for previous, segment in pairwise(self.segments):
            if previous is None or segment is None:
                continue  # retention deleted one: no gap to judge
            if previous.complete and previous.next_offset != segment.base:
                path = self.directory / offset_file_name(segment.base, LOG_SUFFIX)
                message = (
                    f"segment starts at offset {segment.base}, but the previous one ends at "
                    f"{previous.next_offset}"
                )
                found.append(Problem(str(path), 0, message, False))
        return found + self.snapshot_problems


def list_segments(directory: Path) -> list[int] | None:
    """Base offsets of the segments, ascending; None if the directory is gone."""
    try:
        names = [p.name for p in directory.iterdir()]
    except FileNotFoundError:
        return None
    parsed = (parse_offset_file_name(name) for name in names)
    return sorted(p[0] for p in parsed if p is not None and p[1] == LOG_SUFFIX)


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
    bases = list_segments(directory)
    if bases is None:
        return None
    earlier = {s.base: s for s in (reuse.segments if reuse else []) if s is not None}
    segments: list[SegmentCheck | None] = []
    for base in bases:
        last = base == bases[-1]
        found = earlier.get(base)
        if found is None or found.problems or found.last or last:
            found = check_segment(directory, base, topic, last=last)
        segments.append(found)
        on_segment(0 if found is None else found.size)
    if reuse is not None and not reuse.snapshot_problems:
        snapshot_problems: list[Problem] = []
    else:
        snapshot_problems = check_snapshots(directory)
    if not directory.is_dir():
        return None
    return PartitionCheck(directory, segments, snapshot_problems)
