"""Which transactional ids the coordinator's periodic scans can find (C-25, C-27, C-28).

Every coordinator operation looks for timed-out transactions and expirable ids at most every
50 ms (``TransactionCoordinator._abort_timed_out``). Looking at every id each time costs about
0.7 ms per thousand ids (a Spark sink's task ids are kept 7 days), paid by whichever commit
comes 50 ms after the last look. ``ExpirationIndex`` keeps, as the state log is applied:

- the ids in ONGOING, the only state that times out (``is_expired_txn``);
- how many ids have each transaction timeout, so that the C-28 check (the expiration must
  exceed every id's timeout) is one comparison with the largest;
- a heap of ``(last update ms, id)`` for ids in a state that may expire (EMPTY, COMPLETE_*),
  pushed at each such update and never updated in place: an entry whose id was updated since
  (another timestamp, or a state that may not expire) is stale and is skipped by the reader,
  who checks each candidate against the id's current metadata. The heap is rebuilt from the
  live ids when stale entries outnumber them, so it stays within twice their number.

The ids whose last update is at or before a time are the heap entries at or below it, a
subtree at the heap's root: finding them costs their number, not the number of ids.

Not thread-safe: the coordinator state that owns it is used under the coordinator lock.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator, Mapping

from txn_log.coordinator.transaction_metadata import TransactionMetadata
from txn_log.coordinator.transaction_state import TransactionState, is_expiration_allowed

_REBUILD_SLACK = 1024  # stale heap entries tolerated beyond the number of live ids


class ExpirationIndex:
    """The candidates of the periodic scans over a ``CoordinatorState``'s ids (module doc)."""

    def __init__(self) -> None:
        self.ongoing: set[str] = set()
        """Ids whose transaction is ONGOING."""
        self._timeouts: Counter[int] = Counter()  # transaction timeout ms -> ids with it
        self._idle: list[tuple[int, str]] = []  # heap; stale entries included (module doc)

    def replaced(
        self,
        transactional_id: str,
        previous: TransactionMetadata | None,
        current: TransactionMetadata | None,
        everyone: Mapping[str, TransactionMetadata],
    ) -> None:
        """``transactional_id``'s metadata went from ``previous`` to ``current`` (None: none);
        ``everyone`` is every id's metadata after the change (for a rebuild of the heap)."""
        if previous is not None:
            self._timeouts[previous.txn_timeout_ms] -= 1
            if not self._timeouts[previous.txn_timeout_ms]:
                del self._timeouts[previous.txn_timeout_ms]
        if current is None:
            self.ongoing.discard(transactional_id)
            return
        self._timeouts[current.txn_timeout_ms] += 1
        if current.state is TransactionState.ONGOING:
            self.ongoing.add(transactional_id)
        else:
            self.ongoing.discard(transactional_id)
        if is_expiration_allowed(current.state):
            heapq.heappush(self._idle, (current.txn_last_update_timestamp_ms, transactional_id))
            if len(self._idle) > 2 * len(everyone) + _REBUILD_SLACK:
                self._rebuild(everyone)

    def longest_timeout_ms(self) -> int | None:
        """The largest transaction timeout of any id (None without ids)."""
        return max(self._timeouts) if self._timeouts else None

    def updated_at_or_before(self, time_ms: int) -> Iterator[tuple[int, str]]:
        """``(last update ms, id)`` of every heap entry at or before ``time_ms``, stale ones
        included, in no particular order."""
        heap = self._idle
        pending = [0] if heap and heap[0][0] <= time_ms else []
        while pending:
            index = pending.pop()
            yield heap[index]
            for child in (2 * index + 1, 2 * index + 2):
                if child < len(heap) and heap[child][0] <= time_ms:
                    pending.append(child)

    def _rebuild(self, everyone: Mapping[str, TransactionMetadata]) -> None:
        self._idle = [
            (md.txn_last_update_timestamp_ms, tid)
            for tid, md in everyone.items()
            if is_expiration_allowed(md.state)
        ]
        heapq.heapify(self._idle)
