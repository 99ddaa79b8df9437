"""Exclusive locks shared by processes and threads (DESIGN §3).

An ``fcntl.flock`` on a lock file serialises processes; a ``threading.RLock`` in front of it
serialises the threads of one process and makes the lock re-entrant for the holder. The kernel
drops a flock when its process dies (SIGKILL included), so a crashed writer never leaves a
partition locked. Lock order, to rule out deadlock: log lock → coordinator lock → partition
lock; never the reverse.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from txn_log.owned_fd import owned_fd


class FileLock:
    """A re-entrant, process-wide exclusive lock on ``path`` (created if missing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread_lock = threading.RLock()
        self._fd: int | None = None
        self._close_fd: Callable[[], object] | None = None
        self._depth = 0

    def acquire(self) -> None:
        self._thread_lock.acquire()
        try:
            if self._depth == 0:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                    self._close_fd = owned_fd(self, self._fd)
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            self._depth += 1
        except BaseException:
            self._thread_lock.release()
            raise

    def try_acquire(self) -> bool:
        """Acquire without waiting: False, holding nothing, when another thread of this process
        or another process holds the lock (housekeeping skips such a partition for a round)."""
        if not self._thread_lock.acquire(blocking=False):
            return False
        try:
            if self._depth == 0:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                    self._close_fd = owned_fd(self, self._fd)
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._depth += 1
            return True
        except BlockingIOError:
            self._thread_lock.release()
            return False
        except BaseException:
            self._thread_lock.release()
            raise

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
