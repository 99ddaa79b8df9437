"""A file the server reads again when it changes: the users file (SCRAM credentials added with
``txnlog users --alter`` take effect for the next connection, as Kafka applies
``kafka-configs --alter --entity-type users`` without a restart).

``current()`` looks at the file's identity (inode, size, modification time) and re-reads it
only when that changed; the version last read is kept open, so its inode number cannot be
reused by a newer version. The tools that edit such a file replace it whole (a new file renamed
over the old one), so a reader sees the old file or the new one, never half of each. A file
that no longer loads (a hand edit gone wrong, the file removed) keeps the last good contents
and logs one error per change: a typo must not lock every client out, nor let anyone in.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")
_log = logging.getLogger("txn_wire.watched_file")


class WatchedFile(Generic[T]):
    """``load(path)``'s result, re-read when the file changes. Thread-safe."""

    def __init__(self, path: Path, load: Callable[[Path], T], loaded: T) -> None:
        """``loaded``: what ``load(path)`` gave at start (the caller reports its errors)."""
        self.path = Path(path)
        self._load = load
        self._value = loaded
        self._lock = threading.Lock()
        self._held: int | None = None
        self._seen = self._hold()

    def current(self) -> T:
        if self._identity() == self._seen:
            return self._value
        with self._lock:
            if self._identity() != self._seen:
                self._seen = self._hold()
                try:
                    self._value = self._load(self.path)
                    _log.warning("re-read %s: it changed", self.path)
                except (OSError, ValueError) as error:
                    _log.error(
                        "keeping what %s held before: it no longer loads: %s", self.path, error
                    )
        return self._value

    def _hold(self) -> tuple[int, int, int] | None:
        """Open the file as it is now, keep it open and return its identity. The file read
        next is this one or a newer one; holding it keeps its inode number from being given to
        the file that replaces a later version (two replacements within one tick of the file
        system's clock, of the same size, would otherwise look unchanged)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            fd = None
        if self._held is not None:
            os.close(self._held)
        self._held = fd
        return None if fd is None else _key(os.fstat(fd))

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            return _key(os.stat(self.path))
        except OSError:
            return None


def _key(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)
