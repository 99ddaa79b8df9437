"""Crash-safe replacement of segments by their cleaned copy (Kafka's ``.cleaned`` → ``.swap``).

A cleaned segment replaces a group of consecutive segments (Kafka's ``groupSegmentsBySize``):
it takes the base offset of the group's first segment and covers the group's whole offset
range, up to the next segment's base offset (the group's *end*). A group of one replaces its
segment one for one.

1. ``write_cleaned`` (no lock): ``<base>.log.cleaned`` and its ``.index``, ``.timeindex`` and
   ``.txnindex`` ``.cleaned`` files are written and fsynced. A crash here leaves only
   ``.cleaned`` files, which ``recover_cleaner_files`` deletes: the segments are untouched.
2. ``commit_swap`` (partition lock): for a group of more than one, the *merge hint*
   ``<base>.log.merged`` (the group's end, written durably) first; then the index files are
   renamed to ``.swap``, then the log (``<base>.log.swap`` is the commit point), then the
   directory is fsynced.
3. ``finish_swap`` (partition lock, or ``recover_cleaner_files`` after a crash): each ``.swap``
   is renamed over its final name (``rename(2)`` replaces it atomically), the log last, and
   the directory fsynced. Then, for a merge, the group's other segments are deleted (their
   ``.log`` files first, durably, then their indexes), and last the hint.

Recovery (``recover_cleaner_files``, under the partition lock: the loader, the cleaner before
it starts): a segment whose ``.log.swap`` exists is finished (step 3), unless its ``.log`` was
deleted meanwhile (retention), when its swap files are deleted instead. A merge hint left
behind is finished when ``<base>.log`` is the merged file (it ends at the hint's end offset:
the group's first segment alone ends below it), else only deleted (the merge never reached its
commit point, or retention deleted the merged segment). Then every remaining ``.cleaned`` and
index ``.swap`` file (a swap that never reached its commit point) is deleted. So a SIGKILL at
any step leaves the old segments, the cleaned one, or the cleaned one beside old segments it
covers (deleted by the next recovery, skipped by readers meanwhile: ``log_segments``), never a
mix that loses or duplicates a committed record: every version holds every offset's newest
record per key.

Lock-free readers (DESIGN §3) may open ``<base>.log`` and its indexes at any moment, so they can
pair the log of one version with an index of the other. That is harmless by construction:
offset-index entries are checked against the batch header they point at before use
(``LogSegment``), a time-index entry of either version only bounds where a search starts
(offsets are preserved, T-05), and the ``.txnindex`` is the group's indexes concatenated,
unchanged (an aborted transaction's entry outlives its data and marker, and names only offsets
of that producer's aborted transaction, which are never reused). A reader holding an old file's
descriptor keeps reading it (a superset of the new one) until it re-lists;
``reopen_replaced_segments`` swaps in the new file at the reader's next read and forgets the
segments it covers. A reader listing the directory during a merge may see the merged segment
beside old ones it covers: it opens them newest first and drops covered ones
(``log_segments``), and a read that meets both skips what it already passed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from txn_log.errors import StorageError
from txn_log.fault_points import crash_point
from txn_log.file_lock import FileLock
from txn_log.record.batch_header import BatchHeader
from txn_log.storage import offset_index, time_index
from txn_log.storage.durable_file import (
    fsync_directory,
    is_temp_name,
    rename_into_place,
    write_durably,
    write_synced,
)
from txn_log.storage.file_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    log_bases,
    offset_file_name,
)

CLEANER_LOCK_FILE = ".cleaner.lock"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
MERGE_SUFFIX = ".merged"  # <base>.log.merged: the end offset of the group a merge replaces
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_NO_TIMESTAMP = -1


def _path(directory: Path, base_offset: int, suffix: str, state: str = "") -> Path:
    return directory / (offset_file_name(base_offset, suffix) + state)


def build_indexes(
    base_offset: int, batches: Iterable[tuple[int, BatchHeader]], interval: int
) -> tuple[bytes, bytes]:
    """The ``.index`` and ``.timeindex`` bytes appends would have written for ``batches``
    (position, header) in file order: the rule of ``segment``'s module docstring."""
    offsets: list[bytes] = []
    times: list[bytes] = []
    max_ts, max_ts_offset = _NO_TIMESTAMP, -1
    last_position, last_time = 0, _NO_TIMESTAMP
    for position, header in batches:
        if not header.is_control and header.max_timestamp > max_ts:
            max_ts, max_ts_offset = header.max_timestamp, header.last_offset
        if position - last_position < interval:
            continue
        offsets.append(offset_index.ENTRY.pack(header.last_offset - base_offset, position))
        last_position = position
        if max_ts > last_time:
            times.append(time_index.ENTRY.pack(max_ts, max_ts_offset - base_offset))
            last_time = max_ts
    return b"".join(offsets), b"".join(times)


def write_cleaned(
    directory: Path,
    base_offset: int,
    batches: list[bytes],
    headers: list[BatchHeader],
    txn_index: bytes | None,
    index_interval_bytes: int,
) -> int:
    """Step 1: the cleaned segment's four ``.cleaned`` files, fsynced; returns the log's size.
    ``txn_index`` is the old segment's aborted-transaction index, copied as is (None: none)."""
    positions, position = [], 0
    for batch in batches:
        positions.append(position)
        position += len(batch)
    index, times = build_indexes(base_offset, zip(positions, headers, strict=True),
                                 index_interval_bytes)  # fmt: skip
    try:
        write_synced(_path(directory, base_offset, LOG_SUFFIX, CLEANED_SUFFIX), b"".join(batches))
        write_synced(_path(directory, base_offset, INDEX_SUFFIX, CLEANED_SUFFIX), index)
        write_synced(_path(directory, base_offset, TIME_INDEX_SUFFIX, CLEANED_SUFFIX), times)
        if txn_index is not None:
            write_synced(_path(directory, base_offset, TXN_INDEX_SUFFIX, CLEANED_SUFFIX), txn_index)
    except OSError as error:
        raise StorageError(f"cannot write the cleaned segment {base_offset} in {directory}: "
                           f"{error}") from error  # fmt: skip
    crash_point("cleaner.after_cleaned")
    return position


def commit_swap(directory: Path, base_offset: int, merged_end: int | None = None) -> None:
    """Step 2 (partition lock): for a merge (``merged_end``: the group's exclusive end), the
    merge hint first; then ``.cleaned`` → ``.swap``, the log last (the commit point)."""
    if merged_end is not None:
        write_durably(_path(directory, base_offset, LOG_SUFFIX, MERGE_SUFFIX),
                      f"{merged_end}\n".encode())  # fmt: skip
        crash_point("cleaner.after_merge_hint")
    for suffix in INDEX_SUFFIXES:
        cleaned = _path(directory, base_offset, suffix, CLEANED_SUFFIX)
        if cleaned.exists():
            rename_into_place(cleaned, _path(directory, base_offset, suffix, SWAP_SUFFIX))
    crash_point("cleaner.before_log_swap")
    rename_into_place(
        _path(directory, base_offset, LOG_SUFFIX, CLEANED_SUFFIX),
        _path(directory, base_offset, LOG_SUFFIX, SWAP_SUFFIX),
    )
    fsync_directory(directory)
    crash_point("cleaner.after_swap_commit")


def finish_swap(directory: Path, base_offset: int) -> None:
    """Step 3 (partition lock): every ``.swap`` renamed over its final name, the log last;
    then, for a merge, the segments the new one covers are deleted (``_finish_merge``)."""
    for suffix in INDEX_SUFFIXES:
        swap = _path(directory, base_offset, suffix, SWAP_SUFFIX)
        if swap.exists():
            rename_into_place(swap, _path(directory, base_offset, suffix))
            crash_point("cleaner.between_swap_renames")
    rename_into_place(
        _path(directory, base_offset, LOG_SUFFIX, SWAP_SUFFIX),
        _path(directory, base_offset, LOG_SUFFIX),
    )
    fsync_directory(directory)
    crash_point("cleaner.after_swap")
    merged_end = _read_merge_hint(directory, base_offset)
    if merged_end is not None:
        _finish_merge(directory, base_offset, merged_end)


def _read_merge_hint(directory: Path, base_offset: int) -> int | None:
    """The end offset a merge hint names; None without one (written whole: ``durable_file``)."""
    try:
        text = _path(directory, base_offset, LOG_SUFFIX, MERGE_SUFFIX).read_text().strip()
    except FileNotFoundError:
        return None
    if not text.isdigit():
        raise StorageError(f"{_path(directory, base_offset, LOG_SUFFIX, MERGE_SUFFIX)}: "
                           f"not an offset: {text!r}")  # fmt: skip
    return int(text)


def _finish_merge(directory: Path, base_offset: int, merged_end: int) -> None:
    """Delete the segments in (``base_offset``, ``merged_end``), which ``<base>.log`` now
    covers: their logs first and durably (a reader re-listing finds the merged one in their
    place), then their indexes and any cleaner file of theirs; the hint last."""
    covered = [base for base in log_bases(directory) if base_offset < base < merged_end]
    for base in covered:
        _path(directory, base, LOG_SUFFIX).unlink(missing_ok=True)
        crash_point("cleaner.between_merged_deletes")
    fsync_directory(directory)
    for base in covered:
        for suffix in INDEX_SUFFIXES:
            _path(directory, base, suffix).unlink(missing_ok=True)
        remove_cleaner_files(directory, base)
    crash_point("cleaner.before_merge_hint_delete")
    _path(directory, base_offset, LOG_SUFFIX, MERGE_SUFFIX).unlink(missing_ok=True)
    fsync_directory(directory)


def _segment_end(directory: Path, base_offset: int) -> int | None:
    """The exclusive end offset of segment ``base_offset`` on disk (None when it is gone)."""
    from txn_log.storage.segment import LogSegment  # segment builds on this module's indexes

    try:
        fd = os.open(_path(directory, base_offset, LOG_SUFFIX), os.O_RDONLY)
    except FileNotFoundError:
        return None
    segment = LogSegment(directory, base_offset, fd, 4096)
    try:
        return segment.next_offset
    finally:
        segment.close()


def _bases_named(names: Iterable[str], suffix: str) -> list[int]:
    """The base offsets of the files ``<base><suffix>`` among file ``names``."""
    return [
        int(name[: -len(suffix)])
        for name in names
        if name.endswith(suffix) and name[: -len(suffix)].isdigit()
    ]


def merge_hint_bases(names: Iterable[str]) -> list[int]:
    """The base offsets of the merge hints (``<base>.log.merged``) among file ``names``."""
    return _bases_named(names, LOG_SUFFIX + MERGE_SUFFIX)


def _recover_merges(directory: Path, names: list[str]) -> list[str]:
    """Finish or drop the merges a crash interrupted (see the module docstring)."""
    done: list[str] = []
    for base in merge_hint_bases(names):
        merged_end = _read_merge_hint(directory, base)
        if merged_end is None:
            continue
        swapped = _path(directory, base, LOG_SUFFIX, SWAP_SUFFIX).exists()
        if swapped and _path(directory, base, LOG_SUFFIX).exists():
            finish_swap(directory, base)  # deletes the covered segments, then the hint
            done.append(f"finished merging segments {base}..{merged_end} of {directory}")
        elif _segment_end(directory, base) == merged_end:
            _finish_merge(directory, base, merged_end)
            done.append(f"deleted the segments merged into segment {base} of {directory}")
        else:  # never committed, or the merged segment was deleted (retention)
            _path(directory, base, LOG_SUFFIX, MERGE_SUFFIX).unlink(missing_ok=True)
    return done


def recover_cleaner_files(directory: Path, *, cleaner_lock_held: bool = False) -> list[str]:
    """Finish committed swaps and merges, delete uncommitted cleaner files (partition lock
    held); one line per segment changed.

    A live cleaner writes its ``.cleaned`` files without the partition lock, holding only
    ``.cleaner.lock``: they are deleted only when that lock is free (its holder died: the
    kernel released it) or held by the caller (``cleaner_lock_held``, the cleaner itself).
    A ``.swap`` file or a merge hint always belongs to a dead cleaner: a live one writes,
    commits and finishes its swap within one hold of the partition lock, which the caller
    holds now.
    """
    try:
        names = sorted(p.name for p in directory.iterdir())
    except FileNotFoundError:
        return []
    done = _recover_merges(directory, names)
    for base in _bases_named(names, LOG_SUFFIX + SWAP_SUFFIX):
        if not _path(directory, base, LOG_SUFFIX, SWAP_SUFFIX).exists():
            continue  # finished with its merge above
        if _path(directory, base, LOG_SUFFIX).exists():
            finish_swap(directory, base)
            done.append(f"finished replacing segment {base} of {directory} by its cleaned copy")
        else:  # the segment was deleted (retention) after the commit point: nothing to finish
            for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
                _path(directory, base, suffix, SWAP_SUFFIX).unlink(missing_ok=True)
    lock = None if cleaner_lock_held else FileLock(directory / CLEANER_LOCK_FILE)
    cleaned_too = lock is None or lock.try_acquire()
    removed = 0
    try:
        for path in directory.iterdir():
            dead_hint = is_temp_name(path.name) and MERGE_SUFFIX + "." in path.name
            if (
                dead_hint
                or path.name.endswith(SWAP_SUFFIX)
                or (cleaned_too and path.name.endswith(CLEANED_SUFFIX))
            ):
                path.unlink(missing_ok=True)
                removed += 1
    finally:
        if lock is not None:
            if cleaned_too:
                lock.release()
            lock.close()
    if removed:
        fsync_directory(directory)
        done.append(f"deleted {removed} unfinished cleaner file(s) in {directory}")
    return done


def remove_cleaner_files(directory: Path, base_offset: int) -> None:
    """Delete any ``.cleaned``/``.swap`` file or merge hint of ``base_offset`` (its segment is
    being deleted, or its cleaning given up): the hint first, so that no hint outlives the
    cleaned files it vouches for."""
    _path(directory, base_offset, LOG_SUFFIX, MERGE_SUFFIX).unlink(missing_ok=True)
    for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
        for state in (CLEANED_SUFFIX, SWAP_SUFFIX):
            _path(directory, base_offset, suffix, state).unlink(missing_ok=True)
