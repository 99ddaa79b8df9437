"""Housekeeping of a writable log: Kafka's periodic log tasks, run by the processes themselves.

There is no broker, so whatever process holds the log open for writing does what Kafka's log
manager schedules (issue 12 items 10, 11): every ``interval_ms`` one *pass* visits each
partition this ``Log`` has open and, under that partition's lock, applies retention (T-10,
B-09: ``PartitionLog.run_housekeeping``) and forgets expired producer ids (P-26, P-27). Then
it runs the log cleaner (``storage.log_cleaner``, C-02) on at most one partition of a compacted
topic whose uncleaned bytes reached ``min.cleanable.dirty.ratio``: rate-limited to one cleaning
per pass per ``Log``, one cleaner per partition across processes (``.cleaner.lock``), never
waiting for a writer (a partition being written is left for the next pass).

- Rate: one pass per ``interval_ms`` per open ``Log`` (default 30 s, and the first pass one
  interval after opening). Kafka checks retention every 5 minutes
  (``log.retention.check.interval.ms``) and producer ids every 10 (``producer.id.expiration.
  check.interval.ms``) in a broker that runs for months; the processes of an embedded log
  often live minutes (a CLI call, a Spark job), and a pass over partitions with nothing to
  delete costs a few system calls each. A Spark task that opens the log to write for a few
  seconds usually ends before its first pass, and passes only visit partitions it opened.
- One pass at a time across processes: a pass first takes ``.housekeeping.lock`` in the log
  directory *without waiting*; if another process holds it, this round is skipped. It then
  takes each partition's lock without waiting too: a partition whose writer is in the middle
  of an append, or stopped inside one, is skipped until the next round. So a pass never waits
  for a writer, and ``Log.close`` never waits for more than a pass in progress.
- The lock file records when a pass last finished (20 ASCII digits, ms since the epoch, by the
  log's clock), which ``txnlog topics describe`` shows (``last_pass_ms``).
- Threads: one daemon thread per process runs the passes of every writable ``Log`` it has
  open, holding them only weakly, so a ``Log`` that is dropped without ``close()`` is still
  garbage collected; ``Log.run_housekeeping`` runs a pass on demand. A child process made by
  ``fork`` starts its own thread when it next opens a log.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from txn_log.clock import Clock
from txn_log.errors import ConfigError, TxnLogError
from txn_log.owned_fd import owned_fd
from txn_log.storage.file_io import write_all
from txn_log.storage.log_cleaner import CleanerStats, clean_partition
from txn_log.storage.partition_log import PartitionHousekeeping, PartitionLog
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

DEFAULT_HOUSEKEEPING_INTERVAL_MS = 30_000
HOUSEKEEPING_LOCK_FILE = ".housekeeping.lock"
_STAMP_WIDTH = 20

PartitionSource = Callable[[], Iterable[tuple[TopicPartition, PartitionLog]]]


def validate_interval(interval_ms: object) -> int | None:
    """``interval_ms`` if it is a positive integer or None (no background passes)."""
    if interval_ms is None:
        return None
    if not isinstance(interval_ms, int) or isinstance(interval_ms, bool) or interval_ms <= 0:
        raise ConfigError(
            f"housekeeping_interval_ms must be a positive number of milliseconds, or None for "
            f"no background housekeeping; got {interval_ms!r}"
        )
    return interval_ms


@dataclass(frozen=True)
class HousekeepingPass:
    """The outcome of one pass. ``ran`` is False when another process was running one (then
    nothing was done); ``busy`` lists partitions skipped because a writer held them."""

    ran: bool
    started_ms: int
    partitions: Mapping[TopicPartition, PartitionHousekeeping] = field(
        default_factory=lambda: MappingProxyType({})
    )
    busy: tuple[TopicPartition, ...] = ()
    cleaned: tuple[CleanerStats, ...] = ()


class HousekeepingLock:
    """``<log dir>/.housekeeping.lock``: an exclusive ``flock`` taken without waiting, which
    also stores when the last pass finished. One object per holder; not re-entrant."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / HOUSEKEEPING_LOCK_FILE
        self._fd: int | None = None
        self._close_fd: Callable[[], object] | None = None

    def try_acquire(self) -> bool:
        """Take the lock if no other process (or other ``HousekeepingLock``) holds it."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._close_fd = owned_fd(self, self._fd)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def release(self, finished_ms: int | None = None) -> None:
        """Record ``finished_ms`` as the last pass (if given) and release the lock."""
        if self._fd is None:
            return
        if finished_ms is not None:
            write_all(self._fd, f"{finished_ms:0{_STAMP_WIDTH}d}\n".encode(), 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._close_fd is not None:
            self._close_fd()
            self._close_fd = self._fd = None


def last_pass_ms(log_dir: Path) -> int | None:
    """When a housekeeping pass last finished in ``log_dir`` (ms), None if none ever did.
    Reads without the lock (for inspection tools)."""
    try:
        text = (log_dir / HOUSEKEEPING_LOCK_FILE).read_bytes()[:_STAMP_WIDTH]
    except FileNotFoundError:
        return None
    return int(text) if len(text) == _STAMP_WIDTH and text.isdigit() else None


class Housekeeper:
    """Runs the passes of one ``Log``: on demand (``run_once``) and, with an interval, from the
    process's housekeeping thread. Thread-safe; passes of one housekeeper never overlap."""

    def __init__(
        self,
        log_dir: Path,
        clock: Clock,
        partitions: PartitionSource,
        interval_ms: int | None,
    ) -> None:
        self.log_dir = log_dir
        self.interval_ms = interval_ms
        self._clock = clock
        self._partitions = partitions
        self._lock = HousekeepingLock(log_dir)
        self._pass_lock = threading.Lock()
        self._stopped = False
        self._next_clean = 0  # where the next pass looks first for a partition to clean
        if interval_ms is not None:
            _SCHEDULER.register(self, interval_ms / 1000)

    def run_once(self) -> HousekeepingPass:
        """One pass now: skipped (``ran`` False) if another process is running one."""
        with self._pass_lock:
            started = self._clock.time_ms()
            if self._stopped or not self._lock.try_acquire():
                return HousekeepingPass(False, started)
            done: dict[TopicPartition, PartitionHousekeeping] = {}
            busy: list[TopicPartition] = []
            cleaned: list[CleanerStats] = []
            try:
                partitions = list(self._partitions())
                for topic_partition, partition in partitions:
                    result = self._run_partition(topic_partition, partition)
                    if result is None:
                        busy.append(topic_partition)
                    else:
                        done[topic_partition] = result
                cleaned = self._clean_one(partitions)
            finally:
                self._lock.release(self._clock.time_ms())
            return HousekeepingPass(
                True, started, MappingProxyType(done), tuple(busy), tuple(cleaned)
            )

    def _clean_one(
        self, partitions: list[tuple[TopicPartition, PartitionLog]]
    ) -> list[CleanerStats]:
        """Clean the first compacted partition, in turn from where the last pass stopped,
        whose dirty ratio is reached; what it did (nothing when none was due)."""
        compacted = [(tp, p) for tp, p in partitions if p.config.compact]
        if not compacted:
            return []
        start = self._next_clean % len(compacted)
        for step in range(len(compacted)):
            topic_partition, partition = compacted[(start + step) % len(compacted)]
            try:
                stats = clean_partition(partition, self._clock.time_ms(), wait=False)
            except (TxnLogError, OSError) as error:
                logger.warning("%s: log cleaner failed: %s", topic_partition, error)
                continue
            if stats.skipped is None:
                self._next_clean = start + step + 1
                logger.info(
                    "%s: cleaned %d segment(s), %d -> %d bytes, %d record(s) removed",
                    topic_partition, len(stats.segments_cleaned), stats.bytes_before,
                    stats.bytes_after, stats.records_removed,
                )  # fmt: skip
                return [stats]
        return []

    def _run_partition(
        self, topic_partition: TopicPartition, partition: PartitionLog
    ) -> PartitionHousekeeping | None:
        try:
            result = partition.run_housekeeping()
        except (TxnLogError, OSError) as error:  # one broken partition must not stop the rest
            logger.warning("%s: housekeeping failed: %s", topic_partition, error)
            return None
        if result is not None and (result.deleted_segments or result.expired_producers):
            logger.info(
                "%s: retention deleted %d segment(s), log start now %d; %d producer id(s) expired",
                topic_partition, len(result.deleted_segments), result.log_start_offset,
                len(result.expired_producers),
            )  # fmt: skip
        return result

    def stop(self) -> None:
        """No more passes; waits for a pass in progress (bounded: passes never wait for a
        writer). Idempotent."""
        _SCHEDULER.unregister(self)
        with self._pass_lock:
            self._stopped = True
            self._lock.close()


class _Scheduler:
    """The process's housekeeping thread: runs each registered housekeeper when it is due.

    Holds housekeepers by weak reference; the thread starts with the first registration (and
    again in a child process after ``fork``, whose threads are gone).
    """

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._condition = threading.Condition()
        self._entries: dict[int, tuple[weakref.ref[Housekeeper], float, float]] = {}
        self._thread: threading.Thread | None = None

    def register(self, keeper: Housekeeper, interval_s: float) -> None:
        with self._condition:
            due = time.monotonic() + interval_s
            self._entries[id(keeper)] = (weakref.ref(keeper), interval_s, due)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="txnlog-housekeeping", daemon=True
                )
                self._thread.start()
            self._condition.notify()

    def unregister(self, keeper: Housekeeper) -> None:
        with self._condition:
            entry = self._entries.get(id(keeper))
            if entry is not None and entry[0]() is keeper:
                del self._entries[id(keeper)]

    def _run(self) -> None:
        while True:
            for keeper in self._wait_for_due():
                try:
                    keeper.run_once()
                except Exception:  # a background thread must log, not die, and try again
                    logger.exception("housekeeping pass of %s failed", keeper.log_dir)

    def _wait_for_due(self) -> list[Housekeeper]:
        """Block until some housekeepers are due; reschedule and return them."""
        with self._condition:
            while True:
                now = time.monotonic()
                due: list[Housekeeper] = []
                for key, (ref, interval_s, at) in list(self._entries.items()):
                    keeper = ref()
                    if keeper is None:
                        del self._entries[key]
                    elif at <= now:
                        due.append(keeper)
                        self._entries[key] = (ref, interval_s, now + interval_s)
                if due:
                    return due
                next_due = min((at for _, _, at in self._entries.values()), default=None)
                self._condition.wait(None if next_due is None else next_due - now)


_SCHEDULER = _Scheduler()
