"""The aborted-transaction index of one segment (``<base_offset>.txnindex``, B-09..B-12).

An append-only file, created lazily at the first abort (B-09) and deleted with its segment, of
34-byte entries, big-endian, no header (B-10, Kafka's layout)::

    offset  width  field
    ------  -----  ----------------------------------------------------------------------
         0      2  version             int16  = 0
         2      8  producer_id         int64
        10      8  first_offset        int64  first offset of the transaction (inclusive)
        18      8  last_offset         int64  offset of its ABORT marker (inclusive)
        26      8  last_stable_offset  int64  the partition's LSO when the entry was written

Entries are in the order their ABORT markers were written, so ``last_offset`` increases strictly.
``first_offset`` may lie below the segment's base offset (a transaction spanning segments).

Process safety: see ``entry_file``; searches pick up entries appended by other processes and
ignore a torn last entry. Appends and truncation hold the partition lock.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from txn_log.errors import CorruptIndexError, InvalidOffsetError
from txn_log.storage.entry_file import SegmentIndexFile

ENTRY = struct.Struct(
    ">"
    "h"  # version: 0
    "q"  # producer_id
    "q"  # first_offset: inclusive
    "q"  # last_offset: the ABORT marker, inclusive
    "q"  # last_stable_offset: LSO when written
)
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0

if ENTRY_SIZE != 34:  # pragma: no cover - layout guard (B-10)
    raise ImportError("aborted transaction entry layout drifted from Kafka's 34 bytes")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: offsets ``[first_offset, last_offset]``, both inclusive."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """Aborted transactions found in one segment; ``is_complete``: later segments can't add any."""

    aborted_txns: list[AbortedTxn]
    is_complete: bool


class TransactionIndex(SegmentIndexFile[AbortedTxn]):
    """The aborted transactions whose ABORT marker lies in one segment (B-09)."""

    DESCRIPTION = "aborted transaction index"
    LAYOUT = ENTRY
    CREATE = False  # the file appears with the segment's first aborted transaction

    def _decode(self, fields: tuple[Any, ...]) -> AbortedTxn:
        version, producer_id, first_offset, last_offset, last_stable_offset = fields
        if version != CURRENT_VERSION:
            raise CorruptIndexError(
                f"aborted transaction index {self.path} holds an entry of version {version} "
                f"(producer id {producer_id}, last offset {last_offset}); only version "
                f"{CURRENT_VERSION} is known"
            )
        return AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset)

    # --- reading ---------------------------------------------------------------------------

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """Aborted transactions that intersect ``[fetch_offset, upper_bound_offset)`` (B-12 4).

        ``fetch_offset`` is inclusive, ``upper_bound_offset`` exclusive. The search is complete
        (no later segment can hold an overlapping abort) once an entry with
        ``last_stable_offset ≥ upper_bound_offset`` is seen: that abort was written when every
        transaction below the upper bound had already finished.
        """
        found: list[AbortedTxn] = []
        for txn in self._file.refresh():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    # --- writing (under the partition lock) ------------------------------------------------

    def append(self, aborted_txn: AbortedTxn) -> None:
        """Append one entry; creates the file at the first call (B-09).

        Raises InvalidOffsetError unless ``first_offset ≤ last_offset`` and ``last_offset`` is
        greater than the last entry's (every ABORT marker has its own, later, offset).
        """
        entries = self._file.refresh()
        txn = aborted_txn
        if txn.first_offset > txn.last_offset or txn.last_offset < self.base_offset:
            raise InvalidOffsetError(
                f"aborted transaction of producer id {txn.producer_id} has offsets "
                f"[{txn.first_offset}, {txn.last_offset}]: the last offset must be ≥ the first "
                f"and ≥ the segment base offset {self.base_offset} of {self.path}"
            )
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise InvalidOffsetError(
                f"aborted transaction of producer id {txn.producer_id} ends at offset "
                f"{txn.last_offset}, not after the last entry's {entries[-1].last_offset} "
                f"in {self.path}"
            )
        self._file.append(
            (
                CURRENT_VERSION,
                txn.producer_id,
                txn.first_offset,
                txn.last_offset,
                txn.last_stable_offset,
            )
        )

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with ``last_offset ≥ offset`` (its ABORT marker is gone)."""
        entries = self._file.refresh()
        keep = next((n for n, txn in enumerate(entries) if txn.last_offset >= offset), len(entries))
        self._file.truncate_entries(keep)

    # --- checks and lifecycle --------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise CorruptIndexError naming the file and entry if the file is not a valid index.

        Checks: whole entries only (call under the partition lock), version 0,
        ``first_offset ≤ last_offset``, ``last_offset ≥ base_offset`` and strictly increasing.
        """
        previous_last = self.base_offset - 1
        for number, fields in self._raw_entries():
            txn = self._decode(fields)
            if txn.first_offset > txn.last_offset or txn.last_offset <= previous_last:
                raise self._corrupt(
                    number,
                    f"({txn}) has first offset > last offset, or a last offset not after "
                    f"{previous_last} (base offset {self.base_offset})",
                )
            previous_last = txn.last_offset
