"""An append-only file of fixed-size entries, shared by many processes and cached in memory.

The three segment indexes (offset, time, aborted transactions) are files of this kind. The file is
the truth; ``EntryFile`` keeps a decoded copy of a prefix of it and catches up on every read
(DESIGN §3: every in-memory structure is a cache of the files).

Invariants and process safety:

- Reads take no lock. ``refresh`` stats the file; when it grew, only the new whole entries are
  read; when it shrank, was replaced (another inode) or the last cached entry changed underneath,
  everything is read again. A file deleted under an open descriptor (its segment's retention, its
  topic's deletion) keeps being read through the descriptor, as the segment's data is: a view
  never pairs a deleted segment's data with an empty index (aborted records would show). A file
  rewritten to exactly its previous size is not noticed until it changes size again.
- An entry is read only when all its bytes are there: a size that is not a multiple of the entry
  size means a torn last entry (a writer died mid-write, or is writing right now), which readers
  ignore.
- Writes (``append``, ``truncate_entries``, ``rewrite``) must hold the partition's exclusive lock.
  ``append`` writes after the last whole entry, over a torn one, so entries stay aligned.
- A file created lazily (``create=False``) does not exist until the first append; until then it
  reads as empty (B-09).
- Thread-safe: one lock per object serialises catching up and writing. Threads that read
  without the partition lock (every read's offset lookup) once cached the same new entries
  twice, and an appender of the same process then wrote its entry at a wrong place.
  The returned entries only grow in place or are replaced, so they may be read outside it.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from txn_log.errors import CorruptIndexError, StorageError
from txn_log.owned_fd import owned_fd
from txn_log.storage.file_io import pread_fully, write_all

E = TypeVar("E")


class EntryFile(Generic[E]):
    """The cached entries of one append-only file; ``decode`` turns an unpacked tuple into E."""

    def __init__(
        self,
        path: Path,
        layout: struct.Struct,
        decode: Callable[[tuple[Any, ...]], E],
        *,
        create: bool,
    ) -> None:
        self.path = path
        self._layout = layout
        self._decode = decode
        self._fd: int | None = None
        self._close_fd: Callable[[], object] | None = None
        self._ino: int | None = None
        self._entries: list[E] = []
        self._last_raw = b""  # bytes of the last cached entry, to notice a rewrite underneath
        self._lock = threading.RLock()  # guards the fields above and the file's end
        if create:
            self._writable_fd()

    @property
    def entry_size(self) -> int:
        return self._layout.size

    # --- reading ---------------------------------------------------------------------------

    def _follow(self) -> os.stat_result | None:
        """Point ``_fd`` at the file now at ``path`` (reopened, cache dropped, if it was
        replaced) and return its ``stat``; None if this view never saw the file (a lazily
        created one). Caller holds ``_lock``."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            if self._fd is None:
                return None  # never there for this view (a lazily created file)
            # deleted with its segment (retention) or its topic: the open file is still what
            # this view reads, and the entries it holds still describe the data it reads
            return os.fstat(self._fd)
        if self._fd is None or stat.st_ino != self._ino:
            try:
                fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                # deleted between the stat and the open (the cleaner's next merge, retention):
                # as when it is gone at the stat, the file open here is still this view's
                return None if self._fd is None else os.fstat(self._fd)
            self._forget()
            self._fd = fd
            self._close_fd = owned_fd(self, fd)
            stat = os.fstat(fd)  # the file opened, which may be newer than the one stat saw
            self._ino = stat.st_ino
        return stat

    def _whole_size(self, stat: os.stat_result | None) -> int:
        """Bytes of the whole entries in a file of ``stat`` (a torn last entry left out)."""
        return 0 if stat is None else stat.st_size - stat.st_size % self.entry_size

    def refresh(self) -> Sequence[E]:
        """Catch up with the file and return the cached entries (do not mutate the result)."""
        with self._lock:
            stat = self._follow()
            if stat is None:
                return self._entries
            size = self.entry_size
            aligned = self._whole_size(stat)
            cached = len(self._entries) * size
            if aligned < cached:
                self._load(0, aligned)
            elif aligned > cached:
                start = max(cached - size, 0)
                chunk = self._pread(start, aligned - start)
                if cached and chunk[:size] != self._last_raw:
                    self._load(0, aligned)  # rewritten underneath (truncated, then grown again)
                else:
                    self._extend(chunk[size:] if cached else chunk)
            return self._entries

    def last(self, *, cached: bool = False) -> E | None:
        """The file's last whole entry now, as ``refresh()[-1]``, but a file this view has not
        read yet is not read whole for it: one ``pread`` of its last entry, nothing cached.
        Opening a segment, and appending to it, need only its indexes' last entries, and a
        100 MiB segment's indexes hold tens of thousands. ``cached``: the caller knows the file
        unchanged since this object last read or wrote it, so a cache that holds it whole
        (every entry once one is cached) answers without a ``stat``."""
        with self._lock:
            if self._entries:
                if cached:
                    return self._entries[-1]
                entries = self.refresh()
                return entries[-1] if entries else None
            end = self._whole_size(self._follow())
            if end == 0 or self._fd is None:
                return None
            raw = pread_fully(self._fd, self.entry_size, end - self.entry_size)
            return self._decode(self._layout.unpack(raw))

    def read_raw(self) -> bytes:
        """The whole file as it is now, torn tail included (b"" if it does not exist)."""
        try:
            with open(self.path, "rb") as file:
                return file.read()
        except FileNotFoundError:
            return b""

    def exists(self) -> bool:
        return self.path.exists()

    # --- writing (under the partition lock) ------------------------------------------------

    def append(self, entry: tuple[Any, ...]) -> E:
        """Append one entry after the last whole one (overwriting a torn last entry)."""
        with self._lock:
            if self._entries:
                self.refresh()
                end = len(self._entries) * self.entry_size
            else:  # nothing cached: append without reading the file whole (see ``last``)
                end = self._whole_size(self._follow())
            raw = self._layout.pack(*entry)
            fd = self._writable_fd()
            try:
                write_all(fd, raw, end)  # over a torn last entry, which is shorter than this one
            except OSError as exc:
                raise StorageError(
                    f"cannot append to {self.path} at position {end}: {exc}"
                ) from exc
            decoded = self._decode(self._layout.unpack(raw))
            if end == len(self._entries) * self.entry_size:  # the cache is whole: keep it so
                self._entries.append(decoded)
                self._last_raw = raw
            return decoded

    def truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries (a no-op when there are not more)."""
        with self._lock:
            entries = self.refresh()
            if count >= len(entries) or self._fd is None:
                return
            try:
                os.ftruncate(self._fd, count * self.entry_size)
            except OSError as exc:
                raise StorageError(
                    f"cannot truncate {self.path} to {count} entries: {exc}"
                ) from exc
            self._load(0, count * self.entry_size)

    def rewrite(self, entries: Sequence[tuple[Any, ...]]) -> None:
        """Replace the whole file by ``entries`` (recovery). Readers meanwhile see a prefix."""
        raw = b"".join(self._layout.pack(*entry) for entry in entries)
        with self._lock:
            self.refresh()
            if not raw and not self.exists():
                return  # a lazily created file stays absent while it has nothing to say
            fd = self._writable_fd()
            try:
                os.ftruncate(fd, 0)
                write_all(fd, raw, 0)
            except OSError as exc:
                raise StorageError(f"cannot rewrite {self.path}: {exc}") from exc
            self._load(0, len(raw))

    def flush(self) -> None:
        """fsync the file if it exists; a failure is fatal (StorageError, never retried)."""
        with self._lock:
            if self._fd is None:
                return
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise StorageError(f"fsync of {self.path} failed: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._forget()

    def delete(self) -> None:
        """Close and remove the file (missing is fine)."""
        with self._lock:
            self._forget()
            self.path.unlink(missing_ok=True)

    # --- helpers ---------------------------------------------------------------------------

    def _writable_fd(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise StorageError(f"cannot create {self.path}: {exc}") from exc
            self._close_fd = owned_fd(self, self._fd)
            self._ino = os.fstat(self._fd).st_ino
        return self._fd

    def _forget(self) -> None:
        if self._close_fd is not None:
            self._close_fd()
        self._close_fd = None
        self._fd = None
        self._ino = None
        self._entries = []
        self._last_raw = b""

    def _pread(self, position: int, length: int) -> bytes:
        if self._fd is None or length <= 0:
            return b""
        return pread_fully(self._fd, length, position)

    def _load(self, start: int, end: int) -> None:
        self._entries = []
        self._last_raw = b""
        self._extend(self._pread(start, end - start))

    def _extend(self, raw: bytes) -> None:
        size = self.entry_size
        raw = raw[: len(raw) - len(raw) % size]
        if not raw:
            return
        self._entries.extend(self._decode(fields) for fields in self._layout.iter_unpack(raw))
        self._last_raw = raw[-size:]


class SegmentIndexFile(Generic[E]):
    """What the three index files of a segment share: the path, the segment's base offset, the
    cached entries, the whole-entry check of ``sanity_check``, and the file's lifecycle.

    Subclasses set ``DESCRIPTION`` (for messages), ``LAYOUT``, ``CREATE`` (False: the file
    appears with its first entry) and decode one unpacked entry in ``_decode``.
    """

    DESCRIPTION: ClassVar[str]
    LAYOUT: ClassVar[struct.Struct]
    CREATE: ClassVar[bool] = True

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._file: EntryFile[E] = EntryFile(
            self.path, self.LAYOUT, self._decode, create=self.CREATE
        )

    def _decode(self, fields: tuple[Any, ...]) -> E:
        raise NotImplementedError

    def entries(self) -> list[E]:
        """Every whole entry in the file now, in order."""
        return list(self._file.refresh())

    def last_entry(self, *, cached: bool = False) -> E | None:
        """The file's last whole entry (``EntryFile.last``); ``cached``: from the cache when
        it holds the file whole, without looking at the file (the caller knows that no one
        else wrote it since this object last did)."""
        return self._file.last(cached=cached)

    def _raw_entries(self) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """``(entry number, unpacked fields)`` of the whole file; a torn last entry is
        corruption here (``sanity_check`` runs under the partition lock)."""
        raw = self._file.read_raw()
        size = self.LAYOUT.size
        if len(raw) % size:
            raise CorruptIndexError(
                f"{self.DESCRIPTION} {self.path} has size {len(raw)}, not a multiple of {size}"
            )
        return enumerate(self.LAYOUT.iter_unpack(raw))

    def _corrupt(self, number: int, detail: str) -> CorruptIndexError:
        return CorruptIndexError(
            f"{self.DESCRIPTION} {self.path} entry {number} at byte "
            f"{number * self.LAYOUT.size} {detail}"
        )

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        """Close and remove the file (missing is fine)."""
        self._file.delete()
