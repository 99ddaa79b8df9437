"""Exclusive locks shared by processes and threads (DESIGN §3).

An ``fcntl.flock`` on a lock file serialises processes; a ``threading.RLock`` in front of it
serialises the threads of one process and makes the lock re-entrant for the holder. The kernel
drops a flock when its process dies (SIGKILL included), so a crashed writer never leaves a
partition locked. Lock order, to rule out deadlock: log lock → coordinator lock → partition
lock; never the reverse.

A lock made with ``count_holds`` (the partition and coordinator locks) also counts the holds
that change what it guards, so that a holder can tell whether anyone else changed it since its
own previous hold (``others_held``): if not, those files are as this holder left them, and the
catch-up with other processes' changes that each hold begins with can be skipped. The count is
the lock file's first 8 bytes (unsigned, little-endian), shared through a ``mmap`` of them (no
system call to read or bump it). A hold is counted before its holder changes anything: at once
(``acquire``), or, for a holder that may find nothing to change (a refused append writes
nothing, not even the count), by ``note_change`` just before its first change; a counted hold
that changed nothing other holders read after all may take its count back
(``take_back_count``: a repair that found nothing, a housekeeping pass with nothing to do),
since the count is read only under the lock. The count need
not be durable: after a machine crash every process starts again, and a first hold always
counts as shared. Every holder that may change what the lock guards must count its holds
(each ``FileLock`` of the file, in any process, keeps its own view); one that only reads under
it (``txnlog verify``'s second look) need not.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from txn_log.errors import StorageError
from txn_log.owned_fd import owned_fd

_COUNT = struct.Struct("<Q")  # the hold count: the lock file's bytes 0..7, little-endian


class HoldCounter:
    """The hold count of one lock file (module docstring), mapped at the first look that finds
    it (or the first count, which makes it); every method is called by the lock's holder only
    (the count changes only under the ``flock``)."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd = fd
        self._path = path  # for messages
        self._map: mmap.mmap | None = None
        self._last: int | None = None  # the count this object last saw or left
        self._counted = False  # the current hold was counted
        self._before: int | None = None  # the count the current hold found

    def begin_hold(self) -> bool:
        """At the start of a hold: True when another holder counted a hold since this object
        last looked (or this is its first look, or no hold was ever counted)."""
        self._counted = False
        counts = self._map if self._map is not None else self._mapped(create=False)
        count = None if counts is None else _COUNT.unpack_from(counts, 0)[0]
        others, self._last, self._before = count is None or count != self._last, count, count
        return others

    def count_hold(self) -> None:
        """Count the current hold (once)."""
        if self._counted:
            return
        counts = self._map if self._map is not None else self._mapped(create=True)
        if counts is None:
            return  # not reached: ``create`` makes the count
        count = (_COUNT.unpack_from(counts, 0)[0] + 1) & 0xFFFF_FFFF_FFFF_FFFF
        _COUNT.pack_into(counts, 0, count)
        self._last, self._counted = count, True

    def uncount_hold(self) -> None:
        """Take back the current hold's count: it changed nothing after all. No one can have
        seen the count in between (it is read only under the flock)."""
        if self._counted and self._map is not None and self._before is not None:
            _COUNT.pack_into(self._map, 0, self._before)
            self._last, self._counted = self._before, False

    def _mapped(self, *, create: bool) -> mmap.mmap | None:
        """Map the count; a file shorter than it (a new lock file, or one an older build made)
        is grown to hold it only when ``create`` (under the flock; it never shrinks). A file
        system that cannot do either fails the hold (StorageError): a holder that could not
        count its changes would let the others trust what it changed."""
        try:
            if os.fstat(self._fd).st_size < _COUNT.size:
                if not create:
                    return None
                os.ftruncate(self._fd, _COUNT.size)
            self._map = mmap.mmap(self._fd, _COUNT.size)
        except (OSError, ValueError) as error:
            raise StorageError(f"cannot map the hold count of {self._path}: {error}") from error
        return self._map

    def close(self) -> None:
        if self._map is not None:
            self._map.close()


class FileLock:
    """A re-entrant, process-wide exclusive lock on ``path`` (created if missing); with
    ``count_holds``, a counted one (module docstring)."""

    def __init__(self, path: Path, *, count_holds: bool = False) -> None:
        self.path = path
        self._thread_lock = threading.RLock()
        self._fd: int | None = None
        self._close_fd: Callable[[], object] | None = None
        self._depth = 0
        self._count_holds = count_holds
        self._counter: HoldCounter | None = None
        self.others_held = True
        """While held, with ``count_holds``: whether another holder (another process, or
        another ``FileLock`` of this file in this one) counted a hold since this object's
        previous hold began. True at the first hold, and always without ``count_holds``."""

    def acquire(self, *, count: bool = True) -> None:
        """Wait for the lock; ``count`` False leaves counting the hold to ``note_change``."""
        self._thread_lock.acquire()
        try:
            if self._depth == 0:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                    self._close_fd = owned_fd(self, self._fd)
                fcntl.flock(self._fd, fcntl.LOCK_EX)
                self._begin_hold(count)
            self._depth += 1
        except BaseException:
            self._thread_lock.release()
            raise

    def try_acquire(self, *, count: bool = True) -> bool:
        """Acquire without waiting: False, holding nothing, when another thread of this process
        or another process holds the lock (housekeeping skips such a partition for a round).
        ``count`` as for ``acquire``."""
        if not self._thread_lock.acquire(blocking=False):
            return False
        try:
            if self._depth == 0:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                    self._close_fd = owned_fd(self, self._fd)
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._begin_hold(count)
            self._depth += 1
            return True
        except BlockingIOError:
            self._thread_lock.release()
            return False
        except BaseException:
            self._thread_lock.release()
            raise

    def _begin_hold(self, count: bool) -> None:
        """Right after the flock was taken (depth 0): look at the hold count, and count this
        hold if ``count``. A failure releases the flock again (the caller releases the
        thread lock)."""
        if not self._count_holds or self._fd is None:
            return
        try:
            if self._counter is None:
                self._counter = HoldCounter(self._fd, self.path)
            self.others_held = self._counter.begin_hold()
            if count:
                self._counter.count_hold()
        except BaseException:
            self.others_held = True
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            raise

    def note_change(self) -> None:
        """The holder is about to change what the lock guards: count this hold, if it was not
        counted yet (module docstring). Nothing without ``count_holds``."""
        if self._counter is not None and self._depth > 0:
            self._counter.count_hold()

    def take_back_count(self) -> None:
        """The current hold, counted, changed nothing other holders read after all (a repair
        that found nothing to repair): take its count back, so that they keep trusting what
        they know. Nothing without ``count_holds``."""
        if self._counter is not None and self._depth > 0:
            self._counter.uncount_hold()

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._thread_lock.release()

    @property
    def held(self) -> bool:
        """Whether some thread of this process holds the lock now."""
        return self._depth > 0

    def close(self) -> None:
        with self._thread_lock:
            if self._close_fd is not None and self._depth == 0:
                if self._counter is not None:
                    self._counter.close()
                    self._counter = None
                self._close_fd()
                self._close_fd = None
                self._fd = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
