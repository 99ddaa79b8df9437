"""``HeldFile``: a small file read whole and re-read only when it changed, the version last
read held open (a topic's config file; ``txnlog serve``'s users and ACL files).

Whether the file changed is one ``stat`` of its name, compared with the version held: its
device, inode, size and modification time. The held version stays open, so its inode number
cannot be given to a newer version (two replacements of the same size within one tick of the
file system's clock would otherwise look like none); size and time catch an edit made in
place. A missing file is the identity ``None``, so a file that is gone and stays gone is not a
change twice.

Re-reading is two steps, so that a caller can refuse a version it cannot parse without
holding it: ``open_current`` opens the file as it is now (``Version``: its identity, its bytes
on demand, through the descriptor, so identity and bytes are of the same file), ``keep`` makes
it the held version (closing the one before). Not thread-safe: the caller locks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from txn_log.owned_fd import owned_fd
from txn_log.storage.file_io import pread_fully

Identity = tuple[int, int, int, int]


@dataclass(frozen=True)
class Version:
    """One version of the file, open: ``read()`` its bytes, ``close()`` it unless kept."""

    identity: Identity
    fd: int
    close: Callable[[], object]

    def read(self) -> bytes:
        return pread_fully(self.fd, os.fstat(self.fd).st_size, 0)


class HeldFile:
    """The file at ``path`` and the version of it last kept (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._name = os.fspath(self.path)  # asked at every operation: converted once
        self._held: Version | None = None

    def changed(self) -> bool:
        """Whether the name now stands for another file than the one held (or for none)."""
        try:
            stat = os.stat(self._name)
        except FileNotFoundError:
            return self._held is not None
        return self._held is None or self._held.identity != _identity(stat)

    def open_current(self) -> Version | None:
        """The file as it is now, open; None when it is missing."""
        try:
            fd = os.open(self._name, os.O_RDONLY)
        except FileNotFoundError:
            return None
        close = owned_fd(self, fd)
        try:
            return Version(_identity(os.fstat(fd)), fd, close)
        except BaseException:
            close()
            raise

    def keep(self, version: Version | None) -> None:
        """Hold ``version`` (None: nothing) instead of the version held before."""
        if self._held is not None and self._held is not version:
            self._held.close()
        self._held = version

    def release(self) -> None:
        self.keep(None)


def _identity(stat: os.stat_result) -> Identity:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
