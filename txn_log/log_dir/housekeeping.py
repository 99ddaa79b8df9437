"""Housekeeping of a writable log: Kafka's periodic log tasks, run by the processes themselves.

There is no broker, so whatever process holds the log open for writing does what Kafka's log
manager schedules (DESIGN §3): every ``interval_ms`` one *pass* visits each
partition this ``Log`` has open, and the internal topics' partitions whether it opened them or
not, and, under that partition's lock, applies retention (T-10, B-09:
``PartitionLog.run_housekeeping``) and forgets expired producer ids (P-26, P-27). Then it runs
the log cleaner (``storage.log_cleaner``, C-02) as Kafka's LogCleanerManager schedules it: every
compacted partition whose cleaning is due (dirty ratio at least ``min.cleanable.dirty.ratio``,
or dirty data older than ``max.compaction.lag.ms``) is cleaned in the same pass, dirtiest first
(the lag's overdue ones before all), each at most once per pass. The cleaner's reads and writes
go through one ``Throttler`` per housekeeper (Kafka's ``log.cleaner.io.max.bytes.per.second``:
``cleaner_io_max_bytes_per_second``, default ``DEFAULT_CLEANER_IO_MAX_BYTES_PER_SECOND``), so the
share of disk and CPU a pass takes is bounded; ``stop`` wakes a throttled cleaner, which gives
up before its next swap. One cleaner at a time across processes: the pass holds
``.housekeeping.lock``, and each partition's ``.cleaner.lock`` besides (``txnlog clean``).
A pass never waits for a writer (a partition being written is left for the next pass).

- Rate: one pass per ``interval_ms`` per open ``Log`` (default 30 s, and the first pass one
  interval after opening). Kafka checks retention every 5 minutes
  (``log.retention.check.interval.ms``) and producer ids every 10 (``producer.id.expiration.
  check.interval.ms``) in a broker that runs for months; the processes of an embedded log
  often live minutes (a CLI call, a Spark job), and a pass over partitions with nothing to
  delete costs a few system calls each. A Spark task that opens the log to write for a few
  seconds usually ends before its first pass. The internal topics are visited by every
  writable log (opening them at its first pass), so whichever process holds the log open
  keeps them cleaned, even one that never runs a transaction.
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
from txn_log.storage.log_cleaner import CleanerStats, clean_partition, cleaning_priority
from txn_log.storage.partition_log import PartitionHousekeeping, PartitionLog
from txn_log.storage.throttler import Throttler, ThrottleStopped
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

DEFAULT_HOUSEKEEPING_INTERVAL_MS = 30_000
DEFAULT_CLEANER_IO_MAX_BYTES_PER_SECOND = 32 * 1024 * 1024
"""The background cleaner's byte rate (read and written). Kafka's default is unlimited; this
one is generous: above what the pure-Python cleaner reaches on a small machine (about 10-20 MB/s
of segments read twice and written once), so it binds only on faster machines. Lower it
(``Log.open(cleaner_io_max_bytes_per_second=...)``) to bound the share of a process's time the
cleaner takes."""
HOUSEKEEPING_LOCK_FILE = ".housekeeping.lock"
_STAMP_WIDTH = 20

PartitionSource = Callable[[], Iterable[tuple[TopicPartition, PartitionLog]]]


def validate_io_rate(rate: object) -> float:
    """``rate`` (bytes per second) if it is a positive number."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
        raise ConfigError(
            f"cleaner_io_max_bytes_per_second must be a positive number of bytes per second; "
            f"got {rate!r}"
        )
    return float(rate)


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
        *,
        cleaner_io_max_bytes_per_second: float = DEFAULT_CLEANER_IO_MAX_BYTES_PER_SECOND,
    ) -> None:
        self.log_dir = log_dir
        self.interval_ms = interval_ms
        self._clock = clock
        self._partitions = partitions
        self._lock = HousekeepingLock(log_dir)
        self._pass_lock = threading.Lock()
        self._stopped = False
        self._stop_event = threading.Event()  # wakes a throttled cleaner at stop()
        self._throttler = Throttler(cleaner_io_max_bytes_per_second, stop=self._stop_event)
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
                cleaned = self._clean_due(partitions)
            finally:
                self._lock.release(self._clock.time_ms())
            return HousekeepingPass(
                True, started, MappingProxyType(done), tuple(busy), tuple(cleaned)
            )

    def _clean_due(
        self, partitions: list[tuple[TopicPartition, PartitionLog]]
    ) -> list[CleanerStats]:
        """Clean every compacted partition whose cleaning is due, dirtiest first (Kafka's
        LogCleanerManager.grabFilthiestCompactedLog, taken in turn); what each one did."""
        due: list[tuple[float, TopicPartition, PartitionLog]] = []
        for topic_partition, partition in partitions:
            try:
                priority = cleaning_priority(partition, self._clock.time_ms())
            except (TxnLogError, OSError) as error:
                logger.warning("%s: log cleaner failed: %s", topic_partition, error)
                continue
            if priority is not None:
                due.append((priority, topic_partition, partition))
        due.sort(key=lambda entry: entry[0], reverse=True)
        done: list[CleanerStats] = []
        for _, topic_partition, partition in due:
            try:
                stats = clean_partition(
                    partition, self._clock.time_ms(), wait=False, throttler=self._throttler
                )
            except ThrottleStopped:
                break  # stop(): give up; what was swapped in is complete and consistent
            except (TxnLogError, OSError) as error:
                logger.warning("%s: log cleaner failed: %s", topic_partition, error)
                continue
            if stats.skipped is None:
                logger.info(
                    "%s: cleaned %d segment(s), %d -> %d bytes, %d record(s) removed",
                    topic_partition, len(stats.segments_cleaned), stats.bytes_before,
                    stats.bytes_after, stats.records_removed,
                )  # fmt: skip
                done.append(stats)
        return done

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
        self._stop_event.set()  # a throttled cleaner gives up now
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
