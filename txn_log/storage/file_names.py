"""Kafka's file naming inside a partition directory (DESIGN §2).

Every file of a segment is named by the segment's base offset, zero-padded to 20 digits (the
width of the largest int64), followed by a suffix::

    00000000000000001234.log        the record batches
    00000000000000001234.index      sparse offset -> position (OffsetIndex)
    00000000000000001234.timeindex  sparse timestamp -> offset (TimeIndex, KIP-32, T-11)
    00000000000000001234.txnindex   aborted transactions (TransactionIndex, B-09)
    00000000000000001234.snapshot   producer state snapshot, named by the offset it covers

Zero padding makes lexicographic order equal numeric order, so a plain directory listing sorts
segments by base offset, as Kafka's tools expect.
"""

from __future__ import annotations

import re
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"

SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
ALL_SUFFIXES = (*SEGMENT_SUFFIXES, SNAPSHOT_SUFFIX)

OFFSET_DIGITS = 20
MAX_OFFSET = (1 << 63) - 1

_NAME = re.compile(r"^([0-9]{20})(\.[a-z]+)$")


def offset_file_name(offset: int, suffix: str) -> str:
    """``offset`` zero-padded to 20 digits plus ``suffix`` (one of ``ALL_SUFFIXES``).

    Raises ValueError for a negative offset, one beyond int64, or an unknown suffix.
    """
    if not 0 <= offset <= MAX_OFFSET:
        raise ValueError(f"offset {offset} is outside 0..{MAX_OFFSET}; cannot name a file by it")
    if suffix not in ALL_SUFFIXES:
        raise ValueError(f"unknown file suffix {suffix!r}; valid suffixes are {ALL_SUFFIXES}")
    return f"{offset:0{OFFSET_DIGITS}d}{suffix}"


def parse_offset_file_name(name: str) -> tuple[int, str] | None:
    """``(offset, suffix)`` for a name made by ``offset_file_name``, else None.

    Names with another width, an unknown suffix, or an offset beyond int64 are not ours (Kafka
    leaves ``.deleted``, ``.cleaned`` and ``.swap`` files around, for instance) and give None.
    """
    match = _NAME.match(name)
    if match is None:
        return None
    offset = int(match.group(1))
    suffix = match.group(2)
    if suffix not in ALL_SUFFIXES or offset > MAX_OFFSET:
        return None
    return offset, suffix


def log_bases(directory: Path) -> list[int]:
    """Base offsets of the ``.log`` files in ``directory``, ascending (FileNotFoundError when
    the directory is gone)."""
    parsed = map(parse_offset_file_name, (p.name for p in directory.iterdir()))
    return sorted(found[0] for found in parsed if found is not None and found[1] == LOG_SUFFIX)
