"""When a partition forces appends to disk that nobody asked it to sync: Kafka's topic configs
``flush.messages`` and ``flush.ms`` (``UnifiedLog.append`` flushes once ``flush.messages``
messages are unflushed; the log flusher once the log has gone ``flush.ms`` without a flush).

Every acknowledgement here that promises durability already comes after an fsync of what it
acknowledges: a Produce with acks=-1 (all, the default of Kafka's clients and the only setting
of idempotent and transactional producers), the engine producer's ``flush`` and everything
the coordinators write (markers, transaction states, offset commits). What is appended
without one, a Produce with acks=1 or 0 (answered once the OS has the bytes), waits in the
page cache for the next fsync of its partition; these two settings bound that wait, as in
Kafka:

- ``flush.messages`` (at least 1): the append that brings the messages appended since the
  last sync to this many syncs them before it returns;
- ``flush.ms`` (at least 0): when the oldest of them has waited this long, the next append
  or housekeeping pass of the partition syncs them (a pass runs every 30 s by default, as
  Kafka's flusher runs every ``log.flush.scheduler.interval.ms``).

Kafka's defaults (Long.MAX_VALUE) bound nothing, so nothing is synced that was not before.
The count is per process and partition: each process syncs after its own appends (an fsync
of the segment covers every process's bytes in it). Any sync of the active segment, asked for
or not, starts the count again.

Not thread-safe: the partition log calls it under its partition lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from txn_log.topic_config import TopicConfig


@dataclass
class UnflushedAppends:
    """The messages this process appended to a partition since its last sync of the active
    segment, and when the first of them was appended (ms, the partition's clock)."""

    messages: int = 0
    first_append_ms: int | None = None

    def note(self, messages: int, now_ms: int) -> None:
        """``messages`` appended at ``now_ms`` and not synced yet."""
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        self.messages += messages

    def due(self, config: TopicConfig, now_ms: int) -> bool:
        """Whether ``config``'s bounds call for a sync now."""
        if self.first_append_ms is None:
            return False
        return (
            self.messages >= config.flush_messages
            or now_ms - self.first_append_ms >= config.flush_ms
        )

    def synced(self) -> None:
        """The active segment was synced: nothing waits any more."""
        self.messages = 0
        self.first_append_ms = None
