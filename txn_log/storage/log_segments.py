"""The segment files of one partition directory, oldest first (Kafka's ``LogSegments``).

A partition is a list of ``LogSegment`` ordered by base offset: every segment but the last is
closed, the last is the active one. These helpers find the segments on disk, open them, and walk
batch headers across them; they keep no state of their own (the partition reader and writer
hold the list).

Many processes: a segment another process's retention deleted may vanish between listing the
directory and opening it, so a segment found on disk is opened without ``O_CREAT`` and skipped
when gone; only a writer, under the partition lock, creates one (``open_new_segment``). Every
function is safe to call without the lock unless it says otherwise.

The log cleaner may merge consecutive segments into one (``cleaner_swap``): it renames the
merged file over the group's first segment, then deletes the others. So segments found on disk
are opened newest first: one found gone was deleted by a merge that had already put its merged
file in place, which the older segment opened after it then is. A list may then hold old
segments the merged one covers (listed before they were deleted, or left by a crash): they are
dropped (``drop_covered``: a segment that starts below its predecessor's end), and a scan that
meets both versions anyway (an iterator over an older list) skips what it already passed
(``iter_headers``). The list stays gap-free: a segment is only ever dropped for one that holds
its offsets.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from txn_log.errors import StorageError, UnknownTopicIdError
from txn_log.record.batch_header import BatchHeader
from txn_log.storage.durable_file import fsync_directory
from txn_log.storage.file_names import LOG_SUFFIX, log_bases, offset_file_name
from txn_log.storage.segment import LogSegment
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition


def segment_bases_on_disk(directory: Path, topic_partition: TopicPartition) -> list[int]:
    """Base offsets of the ``.log`` files in ``directory``, ascending; UnknownTopicIdError
    when the partition directory itself is gone (its topic was deleted by another process)."""
    try:
        return log_bases(directory)
    except FileNotFoundError:
        raise UnknownTopicIdError(
            f"{topic_partition}: the partition directory {directory} is gone "
            "(its topic was deleted)"
        ) from None


def open_new_segment(directory: Path, base_offset: int, config: TopicConfig) -> LogSegment:
    """Open or create the segment at ``base_offset`` (a new segment: under the lock)."""
    return LogSegment.open(directory, base_offset, index_interval_bytes=config.index_interval_bytes)


def open_existing_segment(
    directory: Path, base_offset: int, config: TopicConfig
) -> LogSegment | None:
    """Open a segment found on disk, or None if it is gone (deleted by retention).

    Never creates the file: a reader racing another process's retention would otherwise
    bring a deleted segment back as an empty file, a false log start.
    """
    path = directory / offset_file_name(base_offset, LOG_SUFFIX)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot open segment {path}: {exc}") from exc
    return LogSegment(directory, base_offset, fd, config.index_interval_bytes)


def load_segments(
    directory: Path, topic_partition: TopicPartition, config: TopicConfig
) -> list[LogSegment]:
    """Every segment on disk, oldest first; a partition with none gets its first one, durably
    (its file, then the directory in its parent). UnknownTopicIdError if the directory is
    gone."""
    bases = segment_bases_on_disk(directory, topic_partition)
    segments = open_newest_first(directory, bases, config)
    if not segments:  # a new partition: its directory and first file, durably
        segments = [open_new_segment(directory, 0, config)]
        fsync_directory(directory)
        fsync_directory(directory.parent)
    return segments


def open_newest_first(
    directory: Path, bases: Sequence[int], config: TopicConfig
) -> list[LogSegment]:
    """The segments at ``bases`` that still exist, oldest first, opened newest first and
    without the ones a merged segment covers (see the module docstring)."""
    opened = (open_existing_segment(directory, base, config) for base in reversed(bases))
    segments = [segment for segment in opened if segment is not None]
    segments.reverse()
    drop_covered(segments)
    return segments


def drop_covered(segments: list[LogSegment]) -> bool:
    """Drop segments that start below their predecessor's end: the log cleaner merged them into
    it (``cleaner_swap``). Never the last (active) one. Not closed (a reader thread may be in
    one). Whether any went."""
    kept = segments[:1]
    for segment in segments[1:-1]:
        if segment.base_offset >= kept[-1].next_offset:
            kept.append(segment)
    kept += segments[-1:] if len(segments) > 1 else []
    dropped = len(kept) != len(segments)
    segments[:] = kept
    return dropped


def drop_deleted_head(segments: list[LogSegment]) -> None:
    """Forget leading segments that another process's retention deleted (never the last).

    They are not closed: a reader thread of this process may be iterating one right now; its
    descriptors close when the last reference goes (``owned_fd``).
    """
    while len(segments) > 1 and not segments[0].log_path.exists():
        segments.pop(0)


def directory_stamp(directory: Path) -> int | None:
    """The directory's modification time (ns), None if it is gone: it changes whenever a file
    in it is created, renamed or deleted, e.g. when the cleaner swaps a segment in."""
    try:
        return os.stat(directory).st_mtime_ns
    except FileNotFoundError:
        return None


def reopen_replaced_segments(
    directory: Path, segments: list[LogSegment], config: TopicConfig
) -> None:
    """Replace, in ``segments``, the closed segments whose ``.log`` the log cleaner replaced
    by a cleaned copy with that copy (``cleaner_swap``), and drop those a merged copy covers,
    so a long-lived view frees the old files and reads the smaller one. The old objects are not
    closed: an iterator of this process may be reading one, and reads on through it (the old
    file holds a superset of the new one's records at the same offsets)."""
    replaced = False
    for index, segment in enumerate(segments[:-1]):
        if segment.is_replaced():
            fresh = open_existing_segment(directory, segment.base_offset, config)
            if fresh is not None:
                segments[index] = fresh
                replaced = True
    if replaced:
        drop_covered(segments)


def floor_index(segments: Sequence[LogSegment], offset: int) -> int:
    """Index of the segment that would hold ``offset``: the last one whose base is ≤ it (0
    when ``offset`` is below every base)."""
    bases = [s.base_offset for s in segments]
    return max(bisect.bisect_right(bases, offset) - 1, 0)


def iter_headers(
    segments: Sequence[LogSegment], start_offset: int, end_offset: int
) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
    """(segment, position, header) of the batches overlapping [start_offset, end_offset), in
    offset order, lock-free. The first may begin before ``start_offset`` (batches are whole).
    A segment that a merged one before it covers (an older list, module docstring) yields only
    what lies past the merged one's end: nothing is yielded twice."""
    for segment, position, header, _ in _iter_located(segments, start_offset, end_offset):
        yield segment, position, header


def iter_batches(
    segments: Sequence[LogSegment], start_offset: int, end_offset: int
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """``iter_headers``' batches with their bytes, as the scan read and checked them
    (``LogSegment.batches_with_bytes``): each batch is read once."""
    for _, _, header, batch in _iter_located(segments, start_offset, end_offset):
        yield header, batch


def _iter_located(
    segments: Sequence[LogSegment], start_offset: int, end_offset: int
) -> Iterator[tuple[LogSegment, int, BatchHeader, memoryview]]:
    if start_offset >= end_offset:
        return
    passed = start_offset  # everything below was yielded (or lies below the start)
    for segment in segments[floor_index(segments, start_offset) :]:
        if segment.base_offset >= end_offset:
            return
        position = segment.find_batch_position(passed)
        if position is None:
            continue
        for batch_position, header, batch in segment.batches_with_bytes(position):
            if header.base_offset >= end_offset:
                return
            if header.next_offset > passed:
                yield segment, batch_position, header, batch
                passed = header.next_offset
