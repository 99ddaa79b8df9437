"""Walking the record batches of a segment file without a lock (DESIGN §3).

A reader sees a file some writer may be appending to. The readable end is the end of the last
*complete, valid* batch: length field in range, magic 2, CRC-32C over attributes..end correct
(F-25, F-26). Whatever follows (a batch still being written, or torn by a crash) is "not there
yet", and ``BatchScan`` stops before it, recording the position and why.

Offsets are not covered by the CRC (F-11: the base offset is outside it), so the scan also checks
that offsets move forward and fit the segment (``base_offset ≤ offsets ≤ base_offset + 2^31 - 1``).
A CRC-valid batch whose offsets do not is corruption wherever it sits: ``CorruptRecordError``.

``find_valid_batch_after`` tells a torn tail (nothing of the log after the first invalid batch)
from corruption in the middle (a batch of the log still follows). A value may itself hold a
serialized record batch (mirrored or archived Kafka data) that passes every check a batch of the
log passes, so the judgment follows the framing from the last good batch, never the bytes alone
(DESIGN §3). At the invalid batch at position P, declaring S bytes in all:

- S ≥ the 61-byte header (the frame is plausible): [P, P+S) is that batch's own bytes. When
  P+S runs past the end of the file, everything from P is one torn batch (a writer died inside
  it), whatever it contains; when it fits, the batch is damaged and a following batch is looked
  for from P+S on (at exactly P+S first, then at every byte after it). A valid batch at Q inside
  [P, P+S) is taken as following only if the bytes [P, Q) pass the CRC stored at P: then P was a
  whole batch and its length prefix, which the CRC does not cover (F-26), is what is damaged.
- S below the header size (the frame is lost): the search starts right after P.

The search confirms a candidate (a byte position whose magic byte is 2) by its length, offsets
and CRC-32C (F-25).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from txn_log.errors import CorruptRecordError
from txn_log.record.batch_header import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    BatchHeader,
    compute_crc,
    parse_header,
)
from txn_log.storage.file_io import pread_fully

CHUNK_BYTES = 1 << 20  # read-ahead per pread: ~0.2 µs of CRC per KiB makes reads the cost
INT32_MAX = (1 << 31) - 1
_MAGIC_BYTE = bytes([MAGIC])


class BatchScan:
    """Iterate ``(position, header, batch bytes)`` over complete valid batches in [start, end).

    ``end`` is exclusive and at most ``file_size`` (a size the caller read once: bytes appended
    later are not looked at). ``start`` must be a batch boundary. After the iteration,
    ``position`` is where it stopped and ``invalid`` says why the bytes there are not a batch,
    or is None when the scan reached ``end`` or the next batch only crosses ``end`` (not the
    file's end). The yielded memoryview is valid until the next step.
    """

    def __init__(
        self,
        fd: int,
        path: Path,
        *,
        base_offset: int,
        start: int,
        end: int,
        file_size: int,
        max_batch_bytes: int | None = None,
    ) -> None:
        self._fd = fd
        self._path = path
        self._base_offset = base_offset
        self._end = min(end, file_size)
        self._file_size = file_size
        self._max_batch_bytes = max_batch_bytes
        self._buffer = b""
        self._buffer_start = start
        self.position = start
        self.invalid: str | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        min_base_offset = self._base_offset
        while self.position < self._end:
            size = self._batch_size()
            if size is None:
                return
            batch = self._read(self.position, size)
            try:
                header = parse_header(batch)
            except CorruptRecordError as exc:
                self.invalid = str(exc)
                return
            if compute_crc(batch) != header.crc:
                self.invalid = (
                    f"CRC-32C mismatch: stored {header.crc:#010x}, "
                    f"computed {compute_crc(batch):#010x}"
                )
                return
            check_offsets(self._path, self.position, header, self._base_offset, min_base_offset)
            yield self.position, header, batch
            min_base_offset = header.next_offset
            self.position += size

    def _batch_size(self) -> int | None:
        """The declared size of the batch at ``position``, or None (and ``invalid``) if unusable."""
        available = self._file_size - self.position
        if available < LOG_OVERHEAD:
            self.invalid = f"only {available} bytes, less than a batch's length prefix"
            return None
        prefix = self._read(self.position, LOG_OVERHEAD)
        size = int.from_bytes(prefix[BATCH_LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True)
        size += LOG_OVERHEAD
        if size < HEADER_SIZE:
            self.invalid = f"declared size {size} is smaller than a {HEADER_SIZE}-byte header"
        elif self._max_batch_bytes is not None and size > self._max_batch_bytes:
            self.invalid = f"declared size {size} exceeds the {self._max_batch_bytes}-byte maximum"
        elif size > available:
            self.invalid = f"incomplete: declares {size} bytes, {available} are in the file"
        elif self.position + size > self._end:
            return None  # a whole batch, but past the caller's end: not invalid
        else:
            return size
        return None

    def _read(self, position: int, length: int) -> memoryview:
        offset = position - self._buffer_start
        if offset < 0 or offset + length > len(self._buffer):
            self._buffer = pread_fully(self._fd, max(length, CHUNK_BYTES), position)
            self._buffer_start = position
            offset = 0
        return memoryview(self._buffer)[offset : offset + length]


def check_offsets(
    path: Path, position: int, header: BatchHeader, base_offset: int, min_base_offset: int
) -> None:
    """Raise CorruptRecordError unless the batch's offsets move forward and fit the segment."""
    if (
        header.base_offset < min_base_offset
        or header.last_offset_delta < 0
        or header.last_offset - base_offset > INT32_MAX
    ):
        raise CorruptRecordError(
            f"{path}: batch at position {position} has offsets [{header.base_offset}, "
            f"{header.last_offset}], expected a base offset ≥ {min_base_offset} and a last "
            f"offset within {base_offset}..{base_offset + INT32_MAX} (corrupt offsets are not "
            "covered by the CRC)"
        )


def find_valid_batch_after(
    fd: int, position: int, file_size: int, *, base_offset: int, min_base_offset: int
) -> int | None:
    """Where the first batch of the log after the invalid batch at ``position`` starts, else
    None (a torn tail): judged by the framing of the module docstring.

    A candidate must have magic 2, a length that fits the file, offsets ≥ ``min_base_offset``
    that fit the segment, and a correct CRC. Cost: one pass over the bytes after ``position``,
    plus a CRC per candidate; it only runs once an invalid batch was found.
    """
    prefix = pread_fully(fd, LOG_OVERHEAD, position)
    declared = -1  # no length prefix at all
    if len(prefix) == LOG_OVERHEAD:
        declared = int.from_bytes(prefix[BATCH_LENGTH_OFFSET:], "big", signed=True) + LOG_OVERHEAD
    if declared < HEADER_SIZE:  # no frame: search right after
        return _search(fd, position + 1, file_size, file_size, base_offset, min_base_offset)
    own_end = position + declared
    inside = _search(
        fd,
        position + 1,
        min(own_end, file_size),
        file_size,
        base_offset,
        min_base_offset,
        accept=lambda candidate: _is_whole_batch(fd, position, candidate),
    )
    if inside is not None or own_end >= file_size:
        return inside
    return _search(fd, own_end, file_size, file_size, base_offset, min_base_offset)


def _search(
    fd: int,
    start: int,
    limit: int,
    file_size: int,
    base_offset: int,
    min_base_offset: int,
    accept: Callable[[int], bool] | None = None,
) -> int | None:
    """The first position in [start, limit) where a complete valid batch starts (and that
    ``accept``, if given, accepts), else None."""
    chunk_start = start
    while chunk_start < limit and chunk_start + HEADER_SIZE <= file_size:
        chunk = pread_fully(fd, CHUNK_BYTES + HEADER_SIZE, chunk_start)
        index = chunk.find(_MAGIC_BYTE, MAGIC_OFFSET)
        while index != -1 and index - MAGIC_OFFSET < CHUNK_BYTES:
            candidate = chunk_start + index - MAGIC_OFFSET
            if candidate >= limit:
                return None
            if _is_valid_batch_at(fd, candidate, file_size, base_offset, min_base_offset) and (
                accept is None or accept(candidate)
            ):
                return candidate
            index = chunk.find(_MAGIC_BYTE, index + 1)
        chunk_start += CHUNK_BYTES
    return None


def _is_whole_batch(fd: int, position: int, end: int) -> bool:
    """Whether [position, end) is one batch whose stored CRC matches, whatever its length
    prefix says (the prefix is not covered by the CRC)."""
    if end - position < HEADER_SIZE:
        return False
    batch = pread_fully(fd, end - position, position)
    stored = int.from_bytes(batch[CRC_OFFSET:ATTRIBUTES_OFFSET], "big")
    return compute_crc(batch) == stored


def ensure_torn_tail(
    fd: int,
    path: Path,
    position: int,
    reason: str,
    file_size: int,
    *,
    base_offset: int,
    next_offset: int,
    allow_torn_tail: bool = True,
) -> None:
    """Raise CorruptRecordError unless the invalid bytes at ``position`` are a torn tail.

    They are a torn tail when no batch of the log follows them (``find_valid_batch_after``:
    judged by the framing, so a torn value holding a record batch is still a torn tail), and
    the segment may have one (``allow_torn_tail``: only the last segment of a partition may).
    """
    if not allow_torn_tail:
        raise CorruptRecordError(
            f"{path}: invalid batch at position {position} (next offset {next_offset}) in a "
            f"segment that is not the last: {reason}"
        )
    follower = find_valid_batch_after(
        fd, position, file_size, base_offset=base_offset, min_base_offset=next_offset
    )
    if follower is not None:
        raise CorruptRecordError(
            f"{path}: invalid batch at position {position} (next offset {next_offset}): "
            f"{reason}; a valid batch follows at position {follower}, so this is corruption "
            "before the tail, not a torn write"
        )


def _is_valid_batch_at(
    fd: int, position: int, file_size: int, base_offset: int, min_base_offset: int
) -> bool:
    try:
        header = parse_header(pread_fully(fd, HEADER_SIZE, position))
    except CorruptRecordError:
        return False
    if position + header.size_in_bytes > file_size:
        return False
    try:
        check_offsets(Path(), position, header, base_offset, min_base_offset)
    except CorruptRecordError:
        return False
    batch = pread_fully(fd, header.size_in_bytes, position)
    return compute_crc(batch) == header.crc
