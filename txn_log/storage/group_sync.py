"""fdatasync several partitions at once (group commit across files).

``fdatasync`` releases the GIL, so syncing the partitions of one transaction from a few threads
costs about one sync's latency instead of one per partition, and lets the file system merge
them into fewer journal commits. Durability is unchanged: this returns only when every file is
synced, and the first failure is raised (a failed sync is fatal, never retried).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

_MAX_THREADS = 8
_pool: ThreadPoolExecutor | None = None


class Flushable(Protocol):
    def flush(self) -> None: ...


def flush_all(logs: Sequence[Flushable]) -> None:
    """Flush every log; concurrently when there is more than one (the calling thread syncs
    the first itself, which saves it a hand-over). Returns once every flush has ended, and
    raises the first failure in ``logs`` order."""
    global _pool
    if len(logs) <= 1:
        for log in logs:
            log.flush()
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_MAX_THREADS, thread_name_prefix="txnlog-sync")
    futures = [_pool.submit(log.flush) for log in logs[1:]]
    failure: BaseException | None = None
    try:
        logs[0].flush()
    except BaseException as first:
        failure = first
    for future in futures:
        later = future.exception()
        if failure is None:
            failure = later
    if failure is not None:
        raise failure
