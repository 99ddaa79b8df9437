"""Which groups have live members, across processes: one lock file per group.

A group's members live in the memory of the ``txnlog serve`` process whose group coordinator
they joined (``txn_wire.group_coordinator``); nothing else holds them. The tools that must act
only on an inactive group (``txnlog groups reset-offsets`` and ``delete``, the wire's
DeleteGroups) run in other processes, so the fact "this group has members" is published
through the file system, where every peer of the directory can see it (DESIGN §3):

- ``<log dir>/group-members/<sha256 of the group id>.lock`` (the id may hold any character;
  its hash is a fixed-size file name that never reaches outside the directory);
- a process whose coordinator holds members of the group holds a *shared* ``flock`` on it,
  from the moment the group gets its first member until it has none
  (``GroupActivity.hold`` / ``release``), never waiting: when the lock is not free the join
  is refused as retriable (COORDINATOR_LOAD_IN_PROGRESS) and the client joins again;
- a tool that needs the group inactive takes an *exclusive* ``flock`` without waiting
  (``GroupActivity.inactive``) and keeps it for its whole check-and-write: it fails
  (``GroupNotEmptyError``) while any process holds members, and while it holds the lock no
  member can join, so a reset cannot race a joining consumer: either the join came first
  (the tool refuses) or the tool did (the join is refused until the tool is done);
- tools queue behind each other on a second file, the group's *editor lock*
  (``<sha256>.edit.lock``, exclusive, waited for), taken before the member lock: two tools on
  one group (``txnlog groups delete-offsets`` beside a server deleting offsets for an
  AdminClient) take turns, and a tool's exclusive member lock is never mistaken by another
  for members. A probe (``is_active``) queues on it too when the file exists.

The kernel drops a flock when its process dies (SIGKILL included), so a crashed server never
leaves a group looking active. Lock files are never deleted (deleting a flock's file races
with a process about to lock it); they are empty, one per group that ever had members or a
tool. The member lock is never waited for; the editor lock is, only by tools, which hold it
for one check-and-write and take nothing but the offsets partition's lock under it (lock
order, DESIGN §3: group editor lock → partition lock).

Thread-safe: a mutex guards the held descriptors.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from txn_log.errors import GroupNotEmptyError
from txn_log.storage.durable_file import make_directory

MEMBERS_DIR = "group-members"


def lock_path(log_path: Path, group_id: str, suffix: str = ".lock") -> Path:
    """The lock file of ``group_id`` in the log at ``log_path`` (``EDIT_SUFFIX``: its editor
    lock)."""
    digest = hashlib.sha256(group_id.encode("utf-8", "surrogatepass")).hexdigest()
    return log_path / MEMBERS_DIR / f"{digest}{suffix}"


EDIT_SUFFIX = ".edit.lock"


class GroupActivity:
    """The group lock files of one log directory (see the module docstring)."""

    def __init__(self, log_path: Path) -> None:
        self._path = Path(log_path)
        self._mutex = threading.Lock()
        self._held: dict[str, int] = {}  # group id -> descriptor holding the shared lock

    def hold(self, group_id: str) -> bool:
        """Publish that this process has members of ``group_id`` (a shared lock, kept until
        ``release``). False, holding nothing, while a tool holds the group inactive. Never
        waits; holding it already is True."""
        with self._mutex:
            if group_id in self._held:
                return True
            fd = _open(lock_path(self._path, group_id), create=True)
            if not _try_flock(fd, fcntl.LOCK_SH):
                os.close(fd)
                return False
            self._held[group_id] = fd
            return True

    def release(self, group_id: str) -> None:
        """This process has no members of ``group_id`` any more (no-op if not held)."""
        with self._mutex:
            fd = self._held.pop(group_id, None)
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the open file drops its flock

    def release_all(self) -> None:
        with self._mutex:
            held, self._held = self._held, {}
        for fd in held.values():
            os.close(fd)

    def has_lock_files(self, group_id: str) -> bool:
        """Whether a process ever held members of ``group_id`` or a tool edited it here (its
        lock files exist; they are never deleted). Creates nothing."""
        return (
            lock_path(self._path, group_id).exists()
            or lock_path(self._path, group_id, EDIT_SUFFIX).exists()
        )

    def is_active(self, group_id: str) -> bool:
        """Whether some process holds members of ``group_id`` now (a probe: the answer may
        change at once; use ``inactive`` to act on it). Creates nothing."""
        try:
            with self.inactive(group_id, create=False):
                return False
        except GroupNotEmptyError:
            return True

    @contextlib.contextmanager
    def inactive(self, group_id: str, *, create: bool = True) -> Iterator[None]:
        """Hold ``group_id`` inactive for the ``with`` block: no process has members of it,
        and none can get one until the block ends. Waits for its turn among the tools (the
        editor lock), then GroupNotEmptyError (Kafka's 68) at once, without waiting, if a
        process has members. ``create`` False: a group that never had members or a tool has no
        lock files, and a read-only caller need not make them (nobody can join meanwhile only
        if the file exists; a probe does not need that)."""
        try:
            editing = _open(lock_path(self._path, group_id, EDIT_SUFFIX), create=create)
        except FileNotFoundError:
            editing = None  # no tool ever edited the group
        try:
            if editing is not None:
                fcntl.flock(editing, fcntl.LOCK_EX)  # our turn among the tools
            with self._member_lock_exclusive(group_id, create=create):
                yield
        finally:
            if editing is not None:
                os.close(editing)

    @contextlib.contextmanager
    def _member_lock_exclusive(self, group_id: str, *, create: bool) -> Iterator[None]:
        """The member lock, exclusive and not waited for; GroupNotEmptyError if a process
        holds members."""
        path = lock_path(self._path, group_id)
        try:
            fd = _open(path, create=create)
        except FileNotFoundError:
            yield
            return
        try:
            if not _try_flock(fd, fcntl.LOCK_EX):
                raise GroupNotEmptyError(
                    f"group {group_id!r} has active members (a txnlog serve process holds "
                    "their membership); it must be empty: stop its consumers, or wait for "
                    "their session timeout"
                )
            yield
        finally:
            os.close(fd)


def _open(path: Path, *, create: bool) -> int:
    if not create:
        return os.open(path, os.O_RDONLY)
    make_directory(path.parent)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def _try_flock(fd: int, operation: int) -> bool:
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True
