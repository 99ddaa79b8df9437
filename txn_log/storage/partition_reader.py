"""Reading one partition without its lock (DESIGN §3, §6): Spark's executors, the CLI, and the
base of the writer (``PartitionLog``).

Files are the truth; this object is a per-process cache of them (the segment list, the log end,
and optionally producer state), kept current by applying what other processes appended since it
last looked (``_catch_up``). It never takes the partition lock, never waits on a writer and
never truncates, deletes or writes a file:

- the readable end is the end of the last complete batch whose length and CRC are valid; a batch
  still being written is simply not there yet, nor is a dead writer's torn tail;
- segments another process's retention deleted are forgotten (``_refresh_start``); one deleted
  before this process applied what followed it is jumped over, producer state reloaded from a
  snapshot at or after the new log start (``_skip_deleted_segments``); a read below the log
  start raises OffsetOutOfRangeError naming the range;
- the log start is ``max(first segment's base, the DeleteRecords checkpoint)``
  (``log_start_checkpoint``), the checkpoint read afresh by every call that needs the start (a
  14-byte file), before catching up, so a start another process moved is honoured at once and
  is never past the end this process has caught up to.

Producer state is kept only when asked for at opening (``last_stable_offset``,
``producer_state``): without it, opening costs O(segments) however many batches follow the last
snapshot, which is what an executor reading a planned range needs.

Offsets: ``log_end_offset`` is exclusive (the next offset to assign); ``high_watermark`` equals
it (no replication); ``last_stable_offset`` = min(max(first unstable offset, log start), log
end) (B-03, B-04): a transaction that began below a start DeleteRecords moved holds it at the
start, never below it (Kafka's ``maybeIncrementFirstUnstableOffset``), so the LSO never goes
backward and a read_committed reader starting at the log start waits for it, then reads on.

Thread safety: one ``threading.RLock`` per object guards the cache. Iterators returned by
``read`` and ``batch_locations`` run outside it, over the segments as they were.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from txn_log.clock import SYSTEM_CLOCK, Clock
from txn_log.errors import ConfigError, UnknownTopicOrPartitionError
from txn_log.record.batch_header import BatchHeader
from txn_log.storage import replay
from txn_log.storage.log_bounds import check_offset_in_log
from txn_log.storage.log_loader import LoadedLog, LogLoader
from txn_log.storage.log_segments import (
    directory_stamp,
    drop_deleted_head,
    floor_index,
    iter_batches,
    iter_headers,
    open_existing_segment,
    open_newest_first,
    reopen_replaced_segments,
    segment_bases_on_disk,
)
from txn_log.storage.log_start_checkpoint import read_log_start
from txn_log.storage.partition_metadata import IdentityCheck, PartitionIdentity, read_identity
from txn_log.storage.producer_state import ProducerStateManager
from txn_log.storage.segment import LogSegment
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)
_RELISTS = 5  # listings tried while the segment holding an offset is merged away under them


def identity_if_any(directory: Path, topic_partition: TopicPartition) -> PartitionIdentity | None:
    """The partition's topic id now, or None for a partition written before topic ids (or one
    being deleted)."""
    try:
        return read_identity(directory, str(topic_partition))
    except UnknownTopicOrPartitionError:
        return None


class PartitionReader:
    """The segments (and optionally the producer state) of one partition directory, read-only;
    open one with ``open_partition_reader``."""

    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: TopicConfig,
        loaded: LoadedLog,
        *,
        clock: Clock,
        identity: PartitionIdentity | None,
    ) -> None:
        self.directory = directory
        self.topic_partition = topic_partition
        self.config = config
        """The topic's config as this object last read it (``refresh_config``)."""
        self._config_source: Callable[[], TopicConfig] | None = None
        self._clock = clock
        self._mutex = threading.RLock()
        self._identity: PartitionIdentity | None = None  # None: a partition before topic ids
        self._identity_check: IdentityCheck | None = None
        self._set_identity(identity)
        self._segments: list[LogSegment] = []
        self._end_offset = 0
        self._tail_position = 0  # bytes of the active segment applied to the caches
        self._producer_state: ProducerStateManager | None = None
        self._directory_stamp: int | None = None  # when segments were last checked (cleaner)
        self._install(loaded)

    def _install(self, loaded: LoadedLog) -> None:
        """Replace the cache with what the loader read (the caller holds the mutex, or nobody
        else can see this object yet)."""
        self._segments = loaded.segments
        self._end_offset = loaded.end_offset
        self._tail_position = loaded.tail_position
        self._producer_state = loaded.producer_state

    # --- the topic's config ---------------------------------------------------------------------

    def follow_config(self, source: Callable[[], TopicConfig]) -> None:
        """Take the topic's config from ``source`` (the log directory's watch of the topic
        file, ``log_dir.topic_config_watch``) at each ``refresh_config`` from now on, so a
        config another process changed applies here without reopening."""
        self._config_source = source
        self.refresh_config()

    def refresh_config(self) -> TopicConfig:
        """The topic's config now, kept in ``config``: re-read from its source when it
        follows one (a ``stat`` of the topic file when unchanged), else the config it was
        opened with. Called at the start of each operation that applies the config (an
        append, each write under the partition lock, a cleaning, a read's bound), so one
        operation works with one config. Thread-safe (one attribute is replaced)."""
        source = self._config_source
        if source is not None:
            self.config = source()
        return self.config

    # --- identity --------------------------------------------------------------------------------

    def _set_identity(self, identity: PartitionIdentity | None) -> None:
        if self._identity_check is not None:
            self._identity_check.close()
        self._identity = identity
        self._identity_check = None if identity is None else IdentityCheck(self.directory, identity)

    def _check_identity(self) -> None:
        """Raise unless the directory still belongs to the topic this object was opened for
        (``partition_metadata.IdentityCheck``: one ``stat`` while unchanged)."""
        if self._identity_check is not None:
            self._identity_check.check(self.topic_partition)

    @property
    def topic_id(self) -> str | None:
        """The id of the topic this partition belongs to (Kafka's topic id, KIP-516)."""
        return None if self._identity is None else self._identity.topic_id

    def is_current(self) -> bool:
        """Whether the directory still belongs to the topic this object was opened for (one
        ``stat``); False once the topic was deleted, or deleted and re-created."""
        try:
            self._check_identity()
        except UnknownTopicOrPartitionError:
            return False
        return True

    # --- catching up with other processes -----------------------------------------------------

    def _catch_up(self) -> None:
        """Apply batches other processes appended since this process last looked.

        ``_tail_position`` is how far this process has applied the active segment; a segment
        that another process rolled to is applied from its start.
        """
        while True:
            active = self._segments[-1]
            for position, header in active.batches(start_position=self._tail_position):
                if self._producer_state is not None:
                    replay.apply_at(self._producer_state, active, position, header)
                self._end_offset = header.next_offset
                self._tail_position = position + header.size_in_bytes
            if self._producer_state is not None:
                self._producer_state.update_map_end_offset(self._end_offset)
            if self._end_offset == active.base_offset:
                return
            segment = open_existing_segment(self.directory, self._end_offset, self.config)
            if segment is None:
                status = active.log_name_status()
                if status != "mine" and self._resume_in_merged():
                    continue
                if status == "gone":
                    self._skip_deleted_segments()
                return
            self._segments.append(segment)
            self._tail_position = 0

    def _resume_in_merged(self) -> bool:
        """The segment this view last applied was closed, then merged by the log cleaner with
        the ones after it (``cleaner_swap``) before this process applied them: re-list, and go
        on at ``_end_offset`` inside the segment that holds it now (its cleaned batches replay
        to the same producer state: the cleaner keeps each producer's last batch). False when
        no segment holds it (retention deleted it: ``_skip_deleted_segments``). The segment
        listed as holding it may itself be merged away before it is opened: listed again."""
        end = self._end_offset
        for _ in range(_RELISTS):
            try:
                bases = segment_bases_on_disk(self.directory, self.topic_partition)
            except UnknownTopicOrPartitionError:
                return False
            below = [b for b in bases if b <= end]
            if not below:
                return False
            # listed after the segment at ``end`` was found gone, so after the merge renamed
            # its file over this one: it holds ``end``, unless merged away again meanwhile
            holder = open_existing_segment(self.directory, below[-1], self.config)
            if holder is not None:
                break
        else:
            return False
        if end >= holder.next_offset:
            return False
        position = holder.find_batch_position(end)
        self._segments = [*(s for s in self._segments if s.base_offset < holder.base_offset),
                          holder]  # fmt: skip
        self._tail_position = holder.size if position is None else position
        return True

    def _skip_deleted_segments(self) -> None:
        """Jump over segments another process's retention deleted before this process applied
        the ones after them: the gap can no longer be read, so producer state is reloaded from
        a snapshot at or after the new log start (retention made sure one exists) plus the log.

        Deletes no file, so lock-free readers may come here too.
        """
        try:
            on_disk = segment_bases_on_disk(self.directory, self.topic_partition)
        except UnknownTopicOrPartitionError:
            return  # the topic was deleted: this view keeps what it read (the files it holds)
        bases = [b for b in on_disk if b >= self._end_offset]
        retained = open_newest_first(self.directory, bases, self.config)
        if not retained:
            return  # the partition itself is gone (topic deleted)
        logger.info(
            "%s: segments up to offset %d were deleted by retention before this process read "
            "them; continuing at the log start %d",
            self.topic_partition, self._end_offset, retained[0].base_offset,
        )  # fmt: skip
        self._segments = retained
        active = retained[-1]
        self._end_offset, self._tail_position = active.next_offset, active.size
        if self._producer_state is not None:
            start = self._producer_state.reload_from_snapshots(
                retained[0].base_offset, self._end_offset
            )
            replay.replay_log(self._producer_state, list(retained), start, self._end_offset)

    def _refresh_start(self) -> None:
        """Forget segments that another process's retention deleted (``drop_deleted_head``),
        and, when the directory changed since the last look, take the cleaned copies of
        segments the log cleaner replaced (``reopen_replaced_segments``)."""
        drop_deleted_head(self._segments)
        stamp = directory_stamp(self.directory)  # before looking: a later swap changes it
        if stamp != self._directory_stamp:
            self._directory_stamp = stamp
            reopen_replaced_segments(self.directory, self._segments, self.config)

    # --- offsets ---------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """First offset still in the log, inclusive: the first segment's base (after forgetting
        segments that another process's retention deleted) or the DeleteRecords checkpoint,
        whichever is higher (module docstring). CorruptSnapshotError if the checkpoint does not
        read back whole."""
        with self._mutex:
            return self._log_start_now()

    def _log_start_now(self) -> int:
        """The log start as the files say now (the caller holds the mutex); catches up."""
        checkpointed = read_log_start(self.directory)  # first: the end caught up to passes it
        self._catch_up()
        self._refresh_start()
        return max(self._segments[0].base_offset, min(checkpointed, self._end_offset))

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (exclusive end), after catching up."""
        with self._mutex:
            self._catch_up()
            return self._end_offset

    @property
    def high_watermark(self) -> int:
        """Equals the log end: every appended batch is as durable as it will get."""
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """First offset of the earliest open transaction, else the log end (B-03, B-04), never
        below the log start (module docstring)."""
        state = self._require_producer_state("last_stable_offset")
        with self._mutex:
            log_start = self._log_start_now()
            first_unstable = state.first_unstable_offset()
            if first_unstable is None:
                return self._end_offset
            return min(max(first_unstable, log_start), self._end_offset)

    @property
    def first_unstable_offset(self) -> int | None:
        """Inclusive first offset of the earliest open transaction, even one that began below
        the log start (B-03; the log cleaner never passes it, B-17), None when none is open."""
        state = self._require_producer_state("first_unstable_offset")
        with self._mutex:
            self._catch_up()
            return state.first_unstable_offset()

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._require_producer_state("producer_state")

    def _require_producer_state(self, what: str) -> ProducerStateManager:
        if self._producer_state is None:
            raise ConfigError(
                f"{self.topic_partition}: {what} needs producer state, which a partition reader "
                "opened without it does not keep (open_partition_reader's with_producer_state)"
            )
        return self._producer_state

    def check_offset(self, offset: int) -> None:
        """Raise OffsetOutOfRangeError naming the valid range unless start ≤ offset ≤ end."""
        with self._mutex:
            log_start = self._log_start_now()
            check_offset_in_log(self.topic_partition, offset, log_start, self._end_offset)

    # --- reading ---------------------------------------------------------------------------------

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first (for inspection tools)."""
        with self._mutex:
            self._catch_up()
            return tuple(self._segments)

    def read(
        self, start_offset: int, end_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Whole batches overlapping [start_offset, end_offset), in offset order, lock-free.

        The first batch may begin before ``start_offset`` (batches are never split); the caller
        drops records outside the range. Each batch's bytes are read once, by the scan that
        checked them (length, magic, CRC-32C: ``LogSegment.batches_with_bytes``). Raises
        OffsetOutOfRangeError below the log start or past the log end.
        """
        with self._mutex:
            log_start = self._log_start_now()
            end = self._end_offset if end_offset is None else min(end_offset, self._end_offset)
            check_offset_in_log(self.topic_partition, start_offset, log_start, self._end_offset)
            segments = list(self._segments)
        return self._iter_batches(segments, start_offset, end)

    @staticmethod
    def _iter_batches(
        segments: list[LogSegment], start_offset: int, end_offset: int
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        return iter_batches(segments, start_offset, end_offset)

    def batch_locations(
        self, start_offset: int, end_offset: int | None = None
    ) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """(segment, file position, header) of the batches overlapping [start, end), lock-free."""
        with self._mutex:
            self._catch_up()
            end = self._end_offset if end_offset is None else end_offset
            segments = list(self._segments)
        return iter_headers(segments, start_offset, end)

    def collect_aborted_txns(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Aborted transactions intersecting [start_offset, end_offset) (B-12 step 4)."""
        with self._mutex:
            self._catch_up()
            aborted: list[AbortedTxn] = []
            for segment in self._segments[floor_index(self._segments, start_offset) :]:
                result = segment.txn_index.collect_aborted_txns(start_offset, end_offset)
                aborted.extend(result.aborted_txns)
                if result.is_complete:
                    break
            return aborted

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """First offset at or after the log start whose record timestamp is ≥ ``timestamp_ms``
        (KIP-32, T-17; Kafka looks from the log start too); None if none.

        Control records are never the answer (F-30).
        """
        with self._mutex:
            log_start = self._log_start_now()
            for segment in self._segments:
                if segment.next_offset <= log_start:
                    continue
                if segment.max_timestamp is not None and segment.max_timestamp < timestamp_ms:
                    continue
                found = segment.find_offset_by_timestamp(
                    timestamp_ms, max(segment.base_offset, log_start), replay.record_timestamps
                )
                if found is not None:
                    return found
            return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp of the log, or
        None if no data batch remains (KIP-734's MAX_TIMESTAMP lookup; control records never
        count, F-30). The segments' maximum finds the timestamp, a lookup its first record."""
        newest = max(
            (s.max_timestamp for s in self.segments if s.max_timestamp is not None),
            default=None,
        )
        if newest is None:
            return None
        found = self.offset_for_timestamp(newest)
        return None if found is None else (found, newest)

    def close(self) -> None:
        with self._mutex:
            for segment in self._segments:
                segment.close()
            if self._identity_check is not None:
                self._identity_check.close()


def open_partition_reader(
    directory: Path,
    topic_partition: TopicPartition,
    config: TopicConfig,
    *,
    clock: Clock = SYSTEM_CLOCK,
    with_producer_state: bool = False,
) -> PartitionReader:
    """Open a partition to read it without its lock: no truncation, no snapshot clean-up, no
    writes (a torn tail is simply not read).

    ``with_producer_state`` (inspection tools, a read-only ``Log``) replays producer state from
    the newest snapshot and the log after it, for ``last_stable_offset`` and ``producer_state``;
    without it (an executor reading a planned range, DESIGN §6) those two raise ConfigError and
    opening costs O(segments) however many batches follow the last snapshot.
    """
    if not directory.is_dir():
        raise UnknownTopicOrPartitionError(f"{topic_partition}: no directory {directory}")
    identity = identity_if_any(directory, topic_partition)
    loader = LogLoader(directory, topic_partition, config, clock)
    loaded = loader.load_as_reader(with_producer_state=with_producer_state)
    return PartitionReader(
        directory, topic_partition, config, loaded, clock=clock, identity=identity
    )
