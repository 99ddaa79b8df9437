"""Which batches a reader may deliver: isolation levels and the aborted-transaction filter.

read_committed (B-05, B-13, G-05, G-07): never read at or past the last stable offset; drop
the batches of aborted transactions; never return control records (F-32) at either level.

Kafka's consumer walks the fetched records with a min-heap of aborted transactions ordered by
first offset and a set of producer ids whose aborted range covers the current position (B-13).
Because the broker never returns data at or past the LSO, every transaction in a fetch has
ended, and its aborted-index entry spans ``[first_offset, last_offset]`` where ``last_offset``
is the ABORT marker. A transactional batch of producer P at offset o therefore belongs to an
aborted transaction exactly when some entry of P has ``first_offset <= o <= last_offset``: the
heap walk reduces to an interval lookup per *batch* (never per record), which is what this
module does, in offset order. Seeking (B-14) needs no state to clear: the filter is rebuilt for
every read from the entries that intersect its range, including ones that began before it
(T-17).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from enum import IntEnum

from txn_log.errors import ConfigError
from txn_log.record.batch_header import BatchHeader
from txn_log.storage.txn_index import AbortedTxn


class IsolationLevel(IntEnum):
    """FetchRequest's isolation level ids (R-01 [EXT])."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    @classmethod
    def parse(cls, value: str | IsolationLevel) -> IsolationLevel:
        if isinstance(value, IsolationLevel):
            return value
        key = str(value).strip().lower()
        for level in cls:
            if level.name.lower() == key:
                return level
        raise ConfigError(
            f"unknown isolation level {value!r}; valid values are read_committed, read_uncommitted"
        )


class AbortedTxnFilter:
    """Decides, batch by batch, whether read_committed may deliver a data batch."""

    def __init__(self, aborted_txns: Iterable[AbortedTxn]) -> None:
        ranges: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for txn in aborted_txns:
            ranges[txn.producer_id].append((txn.first_offset, txn.last_offset))
        self._firsts: dict[int, list[int]] = {}
        self._lasts: dict[int, list[int]] = {}
        for producer_id, spans in ranges.items():
            spans.sort()
            self._firsts[producer_id] = [first for first, _ in spans]
            self._lasts[producer_id] = [last for _, last in spans]

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether ``header`` is a data batch of an aborted transaction."""
        if not header.is_transactional or header.is_control:
            return False
        firsts = self._firsts.get(header.producer_id)
        if firsts is None:
            return False
        index = bisect.bisect_right(firsts, header.base_offset) - 1
        return index >= 0 and header.base_offset <= self._lasts[header.producer_id][index]
