"""The sparse offset index of one segment (``<base_offset>.index``), Kafka's layout.

A file of 8-byte entries, big-endian, no header::

    offset  width  field
    ------  -----  ----------------------------------------------------------------
         0      4  relative_offset  int32  entry offset - segment base offset
         4      4  position         int32  byte position of a batch in the .log file

Entry ``(offset, position)`` says: the batch starting at ``position`` has last offset ``offset``
(Kafka keys an entry by the last offset of its batch, LogSegment.append). So the greatest entry
with offset ≤ target points at or before the batch that holds the target, and a forward scan of
batch headers from there finds it. Entries are sparse (about one per ``index_interval_bytes`` of
log) and strictly increasing in both fields; an empty index is valid and sends every lookup to
position 0.

Process safety: see ``entry_file``; lookups pick up entries appended by other processes and
ignore a torn last entry. Appends and truncation hold the partition lock.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from txn_log.errors import InvalidOffsetError, LogSegmentOffsetOverflowError
from txn_log.storage.entry_file import SegmentIndexFile

ENTRY = struct.Struct(
    ">"
    "i"  # relative_offset: offset - base_offset, fits int32
    "i"  # position: byte position of the batch in the segment's .log
)
ENTRY_SIZE = ENTRY.size  # 8
INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    """An absolute offset and the file position of the batch whose last offset it is."""

    offset: int
    position: int


class OffsetIndex(SegmentIndexFile[OffsetPosition]):
    """Offset → position for one segment; ``base_offset`` is the segment's (inclusive) first."""

    DESCRIPTION = "offset index"
    LAYOUT = ENTRY

    def _decode(self, fields: tuple[Any, ...]) -> OffsetPosition:
        return OffsetPosition(self.base_offset + fields[0], fields[1])

    # --- reading ---------------------------------------------------------------------------

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The greatest entry with offset ≤ ``target_offset``, or ``(base_offset, 0)``."""
        entries = self._file.refresh()
        slot = bisect.bisect_right(entries, target_offset, key=_offset_of)
        if slot == 0:
            return OffsetPosition(self.base_offset, 0)
        return entries[slot - 1]

    # --- writing (under the partition lock) ------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; both must be greater than the last entry's.

        Raises InvalidOffsetError when the entry does not move forward, and
        LogSegmentOffsetOverflowError when ``offset - base_offset`` or ``position`` leave int32.
        """
        entry = self._check_entry(self.last_entry(), OffsetPosition(offset, position))
        self._file.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset ≥ ``offset`` (exclusive end of what is kept)."""
        entries = self._file.refresh()
        self._file.truncate_entries(bisect.bisect_left(entries, offset, key=_offset_of))

    def rebuild(self, entries: Sequence[OffsetPosition]) -> None:
        """Replace the whole file (segment recovery); entries must increase strictly."""
        previous: OffsetPosition | None = None
        raw: list[tuple[int, int]] = []
        for entry in entries:
            raw.append(self._check_entry(previous, entry))
            previous = entry
        self._file.rewrite(raw)

    def _check_entry(self, last: OffsetPosition | None, entry: OffsetPosition) -> tuple[int, int]:
        relative = entry.offset - self.base_offset
        if not 0 <= relative <= INT32_MAX or not 0 <= entry.position <= INT32_MAX:
            raise LogSegmentOffsetOverflowError(
                f"index entry (offset {entry.offset}, position {entry.position}) does not fit "
                f"{self.path}: the offset must be within {self.base_offset}.."
                f"{self.base_offset + INT32_MAX} and the position within 0..{INT32_MAX}"
            )
        if last is not None and (entry.offset <= last.offset or entry.position <= last.position):
            raise InvalidOffsetError(
                f"index entry (offset {entry.offset}, position {entry.position}) does not follow "
                f"the last entry (offset {last.offset}, position {last.position}) of {self.path}"
            )
        return relative, entry.position

    # --- checks and lifecycle --------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise CorruptIndexError naming the file and entry if the file is not a valid index.

        Checks: whole entries only (a torn entry counts as corruption here, so call this under
        the partition lock), offsets ≥ base_offset, offsets and positions strictly increasing.
        """
        last: OffsetPosition | None = None
        for number, (relative, position) in self._raw_entries():
            entry = OffsetPosition(self.base_offset + relative, position)
            bad_start = relative < 0 or position < 0
            if bad_start or (
                last is not None and (entry.offset <= last.offset or position <= last.position)
            ):
                raise self._corrupt(
                    number,
                    f"(offset {entry.offset}, position {position}) is below the base offset "
                    f"{self.base_offset} or does not follow the previous entry {last}",
                )
            last = entry


def _offset_of(entry: OffsetPosition) -> int:
    return entry.offset
