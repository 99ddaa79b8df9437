"""A file the server reads again when it changes: the users file (SCRAM credentials added with
``txnlog users --alter`` take effect for the next connection, as Kafka applies
``kafka-configs --alter --entity-type users`` without a restart).

``current()`` looks at the file's identity (inode, size, modification time) and re-reads it
only when that changed. The tools that edit such a file replace it whole (a new file renamed
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
        self._seen = self._identity()
        self._lock = threading.Lock()

    def current(self) -> T:
        identity = self._identity()
        if identity == self._seen:
            return self._value
        with self._lock:
            if identity != self._seen:
                self._seen = identity
                try:
                    self._value = self._load(self.path)
                    _log.warning("re-read %s: it changed", self.path)
                except (OSError, ValueError) as error:
                    _log.error(
                        "keeping what %s held before: it no longer loads: %s", self.path, error
                    )
        return self._value

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return (stat.st_ino, stat.st_size, stat.st_mtime_ns)
