"""The sparse time index of one segment (``<base_offset>.timeindex``, KIP-32, T-11..T-13).

A file of 12-byte entries, big-endian, no header (Kafka's layout)::

    offset  width  field
    ------  -----  ----------------------------------------------------------------
         0      8  timestamp        int64  ms; the largest timestamp seen up to the entry
         8      4  relative_offset  int32  offset - segment base offset

Entry ``(timestamp, offset)`` promises: no data record (control records are never indexed, F-30,
T-13) at an offset ≤ ``offset`` has a timestamp > ``timestamp``. Timestamps increase strictly from
entry to entry (``maybe_append`` skips a timestamp that is not larger, so the index only grows
forward) and offsets never decrease. Kafka's NO_TIMESTAMP (-1) and smaller are never indexed.

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
    "q"  # timestamp: ms, the max timestamp of the data batches up to the entry
    "i"  # relative_offset: offset - base_offset, fits int32
)
ENTRY_SIZE = ENTRY.size  # 12
INT32_MAX = (1 << 31) - 1
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """A timestamp (ms) and the absolute offset of the record that carried it."""

    timestamp: int
    offset: int


class TimeIndex(SegmentIndexFile[TimestampOffset]):
    """Timestamp → offset for one segment; ``base_offset`` is the segment's (inclusive) first."""

    DESCRIPTION = "time index"
    LAYOUT = ENTRY

    def _decode(self, fields: tuple[Any, ...]) -> TimestampOffset:
        return TimestampOffset(fields[0], self.base_offset + fields[1])

    # --- reading ---------------------------------------------------------------------------

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The greatest entry with timestamp ≤ ``timestamp``, or ``(-1, base_offset)``."""
        entries = self._file.refresh()
        slot = bisect.bisect_right(entries, timestamp, key=_timestamp_of)
        if slot == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return entries[slot - 1]

    # --- writing (under the partition lock) ------------------------------------------------

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Append ``(timestamp, offset)`` only if ``timestamp`` is larger than the last entry's.

        Returns whether it was appended. An ``offset`` below the last entry's raises
        InvalidOffsetError (Kafka checks it even when the timestamp is skipped); one outside the
        segment's int32 range raises LogSegmentOffsetOverflowError.
        """
        last = self.last_entry()
        entry = self._check_entry(last, TimestampOffset(timestamp, offset))
        if timestamp <= (NO_TIMESTAMP if last is None else last.timestamp):
            return False
        self._file.append(entry)
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset ≥ ``offset`` (exclusive end of what is kept)."""
        entries = self._file.refresh()
        keep = next((n for n, entry in enumerate(entries) if entry.offset >= offset), len(entries))
        self._file.truncate_entries(keep)

    def rebuild(self, entries: Sequence[TimestampOffset]) -> None:
        """Replace the whole file (segment recovery); timestamps must increase strictly."""
        previous: TimestampOffset | None = None
        raw: list[tuple[int, int]] = []
        for entry in entries:
            if entry.timestamp <= (NO_TIMESTAMP if previous is None else previous.timestamp):
                raise InvalidOffsetError(
                    f"time index entry {entry} does not follow {previous} in {self.path}"
                )
            raw.append(self._check_entry(previous, entry))
            previous = entry
        self._file.rewrite(raw)

    def _check_entry(self, last: TimestampOffset | None, entry: TimestampOffset) -> tuple[int, int]:
        relative = entry.offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise LogSegmentOffsetOverflowError(
                f"time index entry offset {entry.offset} does not fit {self.path}: it must be "
                f"within {self.base_offset}..{self.base_offset + INT32_MAX}"
            )
        if last is not None and entry.offset < last.offset:
            raise InvalidOffsetError(
                f"time index entry (timestamp {entry.timestamp}, offset {entry.offset}) goes "
                f"back from the last entry (timestamp {last.timestamp}, offset {last.offset}) "
                f"of {self.path}"
            )
        return entry.timestamp, relative

    # --- checks and lifecycle --------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise CorruptIndexError naming the file and entry if the file is not a valid index.

        Checks: whole entries only (call under the partition lock), offsets ≥ base_offset and
        non-decreasing, timestamps > -1 and strictly increasing.
        """
        last = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        for number, (timestamp, relative) in self._raw_entries():
            entry = TimestampOffset(timestamp, self.base_offset + relative)
            if entry.timestamp <= last.timestamp or entry.offset < last.offset:
                raise self._corrupt(
                    number,
                    f"(timestamp {timestamp}, offset {entry.offset}) does not follow "
                    f"(timestamp {last.timestamp}, offset {last.offset}); base offset "
                    f"{self.base_offset}",
                )
            last = entry


def _timestamp_of(entry: TimestampOffset) -> int:
    return entry.timestamp
