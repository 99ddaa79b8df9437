"""Crash-safe replacement of a segment by its cleaned copy (Kafka's ``.cleaned`` → ``.swap``).

A cleaned segment replaces the segment with the same base offset, one for one (no merging):

1. ``write_cleaned`` (no lock): ``<base>.log.cleaned`` and its ``.index``, ``.timeindex`` and
   ``.txnindex`` ``.cleaned`` files are written and fsynced. A crash here leaves only
   ``.cleaned`` files, which ``recover_cleaner_files`` deletes: the segment is untouched.
2. ``commit_swap`` (partition lock): the index files are renamed to ``.swap``, then the log
   (``<base>.log.swap`` is the commit point), then the directory is fsynced.
3. ``finish_swap`` (partition lock, or ``recover_cleaner_files`` after a crash): each ``.swap``
   is renamed over its final name (``rename(2)`` replaces it atomically), the log last, and
   the directory fsynced.

Recovery (``recover_cleaner_files``, under the partition lock: the loader, the cleaner before
it starts): a segment whose ``.log.swap`` exists is finished (step 3), unless its ``.log`` was
deleted meanwhile (retention), when its swap files are deleted instead; then every remaining
``.cleaned`` and index ``.swap`` file (a swap that never reached its commit point) is deleted.
So a SIGKILL at any step leaves either the old segment or the cleaned one, never a mix that
loses or duplicates a committed record: both hold every offset's newest record per key.

Lock-free readers (DESIGN §3) may open ``<base>.log`` and its indexes at any moment, so they can
pair the log of one version with an index of the other. That is harmless by construction:
offset-index entries are checked against the batch header they point at before use
(``LogSegment``), a time-index entry of either version only bounds where a search starts
(offsets are preserved, T-05), and the ``.txnindex`` is copied unchanged (an aborted
transaction's entry outlives its data and marker, and names only offsets of that producer's
aborted transaction, which are never reused). A reader holding the old file's descriptor keeps
reading it (a superset of the new one) until it re-lists; ``reopen_replaced_segments`` swaps
in the new file at the reader's next read.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from txn_log.errors import StorageError
from txn_log.fault_points import crash_point
from txn_log.file_lock import FileLock
from txn_log.record.batch_header import BatchHeader
from txn_log.storage import offset_index, time_index
from txn_log.storage.durable_file import fsync_directory, rename_into_place, write_synced
from txn_log.storage.file_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
)

CLEANER_LOCK_FILE = ".cleaner.lock"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
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
            write_synced(
                _path(directory, base_offset, TXN_INDEX_SUFFIX, CLEANED_SUFFIX), txn_index
            )
    except OSError as error:
        raise StorageError(f"cannot write the cleaned segment {base_offset} in {directory}: "
                           f"{error}") from error  # fmt: skip
    crash_point("cleaner.after_cleaned")
    return position


def commit_swap(directory: Path, base_offset: int) -> None:
    """Step 2 (partition lock): ``.cleaned`` → ``.swap``, the log last (the commit point)."""
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
    """Step 3 (partition lock): every ``.swap`` renamed over its final name, the log last."""
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


def recover_cleaner_files(directory: Path, *, cleaner_lock_held: bool = False) -> list[str]:
    """Finish committed swaps and delete uncommitted cleaner files (partition lock held);
    one line per segment changed.

    A live cleaner writes its ``.cleaned`` files without the partition lock, holding only
    ``.cleaner.lock``: they are deleted only when that lock is free (its holder died: the
    kernel released it) or held by the caller (``cleaner_lock_held``, the cleaner itself).
    A ``.swap`` file always belongs to a dead cleaner: a live one commits and finishes its swap
    within one hold of the partition lock, which the caller holds now.
    """
    done: list[str] = []
    try:
        names = sorted(p.name for p in directory.iterdir())
    except FileNotFoundError:
        return done
    log_swap = LOG_SUFFIX + SWAP_SUFFIX
    for name in names:
        if not name.endswith(log_swap) or not name[: -len(log_swap)].isdigit():
            continue
        base = int(name[: -len(log_swap)])
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
            if path.name.endswith(SWAP_SUFFIX) or (
                cleaned_too and path.name.endswith(CLEANED_SUFFIX)
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
    """Delete any ``.cleaned``/``.swap`` file of ``base_offset`` (its segment is being deleted)."""
    for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
        for state in (CLEANED_SUFFIX, SWAP_SUFFIX):
            _path(directory, base_offset, suffix, state).unlink(missing_ok=True)
