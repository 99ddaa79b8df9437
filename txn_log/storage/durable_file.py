"""The engine's one rule for replacing a small file durably (DESIGN §2).

    1. write the new bytes to a temporary file in the same directory, fsync it;
    2. rename it over the target (atomic: a reader sees the old file or the whole new one);
    3. fsync the directory, so that the rename itself survives a machine crash.

Without step 3 a power failure can undo a rename the writer already acted on: a producer-id
block handed out twice (P-02), a snapshot or topic file silently back to its old contents.
Every "replace a file" in the engine goes through ``write_durably`` (topic metadata and
``txnlog.json`` in ``log.py``, the dynamic broker configs (``broker_config``), the producer-id
block file, producer snapshots, ``partition.metadata``, DeleteRecords'
``log-start-offset-checkpoint``); nothing else renames, moves or writes a whole file, which
``tests/test_one_durability_rule.py`` checks by reading the code. A directory that must survive
is made with ``make_directory`` (mkdir, then fsync its parent).

Files written in place, without this rule, and why that is safe:

- Segments (``segment.py``): appended to, ``fdatasync``-ed before a batch is acknowledged;
  the partition log fsyncs the directory when it creates a segment, before anything in it is
  acknowledged. A torn tail is cut on recovery (DESIGN §3).
- Index files (``entry_file.py``): appended to in place. The offset and time indexes are
  caches of the log, not synced: opening checks them against the log, and recovery rebuilds
  them in place (``EntryFile.rewrite``) before it cuts the log's torn tail, so a crash in the
  middle of a rewrite leaves that tail for the next open to find, which rebuilds them again.
  A lock-free reader meanwhile sees a shorter index, which only makes its lookup scan further;
  a rename would swap the inode under the readers' cached descriptors for no gain. The
  aborted-transaction index is fsynced (and its directory, when created) before the ABORT
  marker it belongs to (B-09, B-10).
- Lock files (``file_lock.py``): only their ``flock`` matters, never their contents.
- Group lock files (``group_activity.py``): empty files whose shared or exclusive ``flock``
  says which groups have members; their contents never matter.
- The cleaner's segment swap (``cleaner_swap.py``, Kafka's ``.cleaned`` → ``.swap`` protocol)
  replaces a segment and its indexes in several steps, whose order is its crash safety: it
  writes each new file with ``write_synced`` (a name no reader opens, fsynced) and moves them
  with ``rename_into_place``, fsyncing the directory itself at its commit points.
- The housekeeping stamp (``housekeeping.py``): a fixed-width time in the housekeeping lock
  file, advisory (``txnlog topics describe`` shows it); a torn or lost one reads as "no pass
  yet", and the next pass writes it again.

Temporary names are ``.<target name, at most 64 characters>.<pid>.<thread id>.tmp``: unique
per process and thread, so concurrent writers of one target never write into each other's
temporary file, and hidden (a leading dot) so directory listings of topics, segments or
snapshots never mistake one for data. ``is_temp_name`` recognises them for clean-up; only
remove one under the lock that serialises the writers of that directory.

Errors: any failed write, fsync or rename raises ``StorageError`` naming the target, after
removing the temporary file; the target is then untouched. A failed fsync is not retried
(TESTING.md §7: the kernel may have dropped the dirty pages).

Thread and process safety: safe for any number of concurrent writers of one target (the last
rename wins, each version whole); callers that need read-modify-write hold their own lock.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from txn_log.errors import StorageError
from txn_log.fault_points import crash_point
from txn_log.storage.file_io import write_all

TEMP_SUFFIX = ".tmp"
_MAX_NAME_PART = 64  # a 249-character topic name plus the suffixes would pass NAME_MAX (255)


def temp_path_for(path: Path) -> Path:
    """The temporary file this process and thread writes ``path``'s next version to."""
    return path.with_name(
        f".{path.name[:_MAX_NAME_PART]}.{os.getpid()}.{threading.get_ident()}{TEMP_SUFFIX}"
    )


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is a temporary file of ``write_durably`` (a leftover after a crash)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def write_durably(path: Path, data: bytes, *, fault_name: str | None = None) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, directory fsync.

    ``fault_name`` arms the crash points ``<fault_name>.after_temp_fsync`` and
    ``<fault_name>.after_rename`` (``fault_points``) for the crash tests. Raises StorageError.
    """
    temp = temp_path_for(path)
    try:
        write_synced(temp, data)
        if fault_name is not None:
            crash_point(f"{fault_name}.after_temp_fsync")
        rename_into_place(temp, path)
    except OSError as error:
        temp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {error}") from error
    if fault_name is not None:
        crash_point(f"{fault_name}.after_rename")  # renamed, the directory not yet synced
    fsync_directory(path.parent)


def write_synced(path: Path, data: bytes) -> None:
    """Create (or truncate) ``path`` with ``data`` and fsync it, under a name no reader opens;
    a multi-step protocol renames it later and fsyncs the directory at its own commit points
    (the cleaner's ``.cleaned`` files). Raises OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def rename_into_place(source: Path, target: Path) -> None:
    """Rename ``source`` over ``target`` (atomic: a reader opens one or the other, whole); the
    caller fsyncs the directory when its protocol needs the rename durable. Raises OSError."""
    os.replace(source, target)


def fsync_directory(directory: Path) -> None:
    """Make the renames, creations and unlinks already done in ``directory`` durable.

    Raises StorageError (never retried: the directory's metadata may be lost).
    """
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise StorageError(f"cannot fsync directory {directory}: {error}") from error


def make_directory(directory: Path) -> None:
    """Create ``directory`` and its missing parents so that they survive a machine crash:
    each directory created is fsynced into its parent. An existing directory is left alone
    (another process may create it at the same time: both then fsync its parent).

    Raises StorageError (also when ``directory`` or a parent of it is a file).
    """
    missing: list[Path] = []
    while not directory.is_dir():
        missing.append(directory)
        if directory.parent == directory:
            break
        directory = directory.parent
    for created in reversed(missing):
        try:
            created.mkdir(exist_ok=True)
        except OSError as error:
            raise StorageError(f"cannot create directory {created}: {error}") from error
        fsync_directory(created.parent)
