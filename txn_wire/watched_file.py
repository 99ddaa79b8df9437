"""A file the server reads again when it changes: the users file (SCRAM credentials added with
``txnlog users --alter`` or AlterUserScramCredentials, by this server or another, take effect
for the next connection, as Kafka applies ``kafka-configs --alter --entity-type users``
without a restart) and the ACL file.

``current()`` re-reads it only when it changed (``txn_log.storage.held_file``, as a topic's
config file: one ``stat``, the version last read held open). The tools that edit such a file
replace it whole (a new file renamed over the old one), so a reader sees the old file or the
new one, never half of each. A file that no longer loads (a hand edit gone wrong, the file
removed) keeps the last good contents and logs one error per change: a typo must not lock
every client out, nor let anyone in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from txn_log.file_lock import FileLock
from txn_log.storage.held_file import HeldFile

T = TypeVar("T")
_log = logging.getLogger("txn_wire.watched_file")


def editor_lock(path: Path) -> FileLock:
    """The lock the tools that change a watched file (``txnlog users``, ``txnlog acls``) hold
    for their whole read-change-replace, so that two of them never lose each other's change:
    an flock on ``<file>.lock`` beside it (the server itself only reads)."""
    return FileLock(path.with_name(path.name + ".lock"))


class WatchedFile(Generic[T]):
    """``load(path)``'s result, re-read when the file changes. Thread-safe."""

    def __init__(self, path: Path, load: Callable[[Path], T], loaded: T) -> None:
        """``loaded``: what ``load(path)`` gave at start (the caller reports its errors)."""
        self.path = Path(path)
        self._load = load
        self._value = loaded
        self._lock = threading.Lock()
        self._file = HeldFile(self.path)
        self._file.keep(self._file.open_current())

    def current(self) -> T:
        if not self._file.changed():
            return self._value
        with self._lock:
            if self._file.changed():
                # held before loading, so the file read next is this one or a newer one; a
                # version that does not load is held too: one error per change
                self._file.keep(self._file.open_current())
                try:
                    self._value = self._load(self.path)
                    _log.warning("re-read %s: it changed", self.path)
                except (OSError, ValueError) as error:
                    _log.error(
                        "keeping what %s held before: it no longer loads: %s", self.path, error
                    )
        return self._value
