"""Positional reads and writes that finish: the engine's only calls of ``os.pread`` and
``os.pwrite`` (``tests/test_one_durability_rule.py`` holds it).

A regular file rarely answers a ``pread`` or ``pwrite`` with fewer bytes than asked, but may
(a signal, a full disk, a file shorter than the request); each loop here goes on until the
request is done or, for a read, the end of the file is reached. Neither moves a file offset,
so any number of threads and processes may use one descriptor at once; what they see of each
other's writes is the caller's business (``batch_scan``, ``entry_file``).
"""

from __future__ import annotations

import os


def pread_fully(fd: int, length: int, position: int) -> bytes:
    """Up to ``length`` bytes at ``position``; fewer only at the end of the file."""
    parts: list[bytes] = []
    while length > 0:
        part = os.pread(fd, length, position)
        if not part:
            break
        parts.append(part)
        position += len(part)
        length -= len(part)
    return b"".join(parts)


def write_all(fd: int, data: bytes | memoryview, position: int) -> None:
    """pwrite all of ``data`` at ``position``. Raises OSError (callers wrap it in
    StorageError naming the file)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written
