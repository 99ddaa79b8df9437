"""Loading a partition from its files: Kafka's ``LogLoader`` (P-24, X-11, X-20; DESIGN §3).

Three ways, one per situation; each returns a ``LoadedLog`` that the partition reader or
writer installs as its cache, and changes nothing in memory before it succeeds:

- ``load`` (under the partition lock: a writer opening the partition, or recovering it before
  its first write after opening while another process held the lock): truncate a torn tail of
  the active segment, rebuild its indexes if they point past it, drop aborted-transaction
  entries past the log end, finish or undo a log cleaner's segment swap that a crash
  interrupted (``cleaner_swap``), reload producer state from the newest valid snapshot plus the log
  after it (deleting snapshots that do not fit the log), and delete the state snapshots
  (``state_snapshot``) past the log end: they describe records a truncation lost, and lower a
  DeleteRecords checkpoint past the log end to it (``log_start_checkpoint``), before any
  append could land below it;
- ``load_as_reader`` (no lock): the segments as they are, nothing truncated, deleted or
  written; producer state only when asked for, from a read-only manager;
- ``repair`` (under the partition lock, ``txnlog verify --repair``): recover every segment
  without trusting any index, delete unreadable snapshots and state snapshots past the log
  end, lower a DeleteRecords checkpoint past the log end, reload producer state; what it
  changed, one line each.

Opening a segment already validated it from its last index entry to the end (``segment``), so
a clean ``load`` reads little more than the unindexed tail.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from txn_log.clock import Clock
from txn_log.errors import CorruptRecordError
from txn_log.storage.cleaner_swap import recover_cleaner_files
from txn_log.storage.durable_file import fsync_directory
from txn_log.storage.file_names import SNAPSHOT_SUFFIX
from txn_log.storage.log_segments import drop_deleted_head, load_segments
from txn_log.storage.log_start_checkpoint import clamp_to_log_end
from txn_log.storage.producer_snapshot import read_snapshot
from txn_log.storage.producer_state import ProducerStateManager
from txn_log.storage.replay import replay_log
from txn_log.storage.segment import LogSegment
from txn_log.storage.state_snapshot import delete_past
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedLog:
    """A partition as loaded: its segments (oldest first), the log end offset (exclusive) and
    how far the active segment was applied (bytes), producer state at that end (None when not
    asked for), and what recovery changed, in words."""

    segments: list[LogSegment]
    end_offset: int
    tail_position: int
    producer_state: ProducerStateManager | None
    recovery: tuple[str, ...] = ()


def _indexes_within(segment: LogSegment) -> bool:
    """Whether the offset and time indexes describe only batches still in the segment.

    A power failure can keep index writes yet lose the log bytes they describe, cut at a batch
    boundary (X-20): such a segment looks clean but needs its indexes rebuilt.
    """
    last_index, last_time = segment.offset_index.last_entry(), segment.time_index.last_entry()
    return all(e is None or e.offset < segment.next_offset for e in (last_index, last_time))


def _read_if_exists(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


class LogLoader:
    """Loads one partition directory; holds no state between calls (thread-safe as such; the
    caller holds the partition lock where a method says so)."""

    def __init__(
        self, directory: Path, topic_partition: TopicPartition, config: TopicConfig, clock: Clock
    ) -> None:
        self.directory = directory
        self.topic_partition = topic_partition
        self.config = config
        self._clock = clock

    def _producer_state(self, *, read_only: bool = False) -> ProducerStateManager:
        return ProducerStateManager(
            self.directory, str(self.topic_partition), clock=self._clock, read_only=read_only
        )

    def load(self) -> LoadedLog:
        """Load and recover under the lock: truncate a torn tail, reload producer state.

        Only when bytes lie past the last valid batch of the active segment (a writer died
        mid-append), or its indexes point past it (a lost tail, X-20), is the whole active
        segment re-validated and its indexes rebuilt.
        """
        state = self._producer_state()
        swaps = recover_cleaner_files(self.directory)  # a cleaner's swap a crash interrupted
        segments = load_segments(self.directory, self.topic_partition, self.config)
        active = segments[-1]
        if active.log_path.stat().st_size == active.size and _indexes_within(active):
            recovery = None
        else:
            recovery = active.recover(self.config.max_message_bytes, allow_torn_tail=True)
        messages: tuple[str, ...] = tuple(swaps)
        if recovery is not None and recovery.truncated_bytes:
            message = (
                f"{self.topic_partition}: truncated a torn tail of {recovery.truncated_bytes} "
                f"bytes at position {recovery.truncated_at} of {active.log_path}"
            )
            messages += (message,)
            logger.warning(message)
        end, tail = active.next_offset, active.size
        active.txn_index.truncate_to(end)
        messages += tuple(delete_past(self.directory, end))  # state snapshots of lost records
        messages += tuple(clamp_to_log_end(self.directory, str(self.topic_partition), end))
        self._reload_producer_state(state, segments, end, now_ms=self._clock.time_ms())
        return LoadedLog(segments, end, tail, state, messages)

    def load_as_reader(self, *, with_producer_state: bool) -> LoadedLog:
        """Load without the lock: nothing truncated, deleted or written (a torn tail is simply
        not read); producer state replayed from the files only ``with_producer_state``."""
        segments = load_segments(self.directory, self.topic_partition, self.config)
        active = segments[-1]
        end, tail = active.next_offset, active.size
        state = None
        if with_producer_state:
            state = self._producer_state(read_only=True)
            self._reload_producer_state(state, segments, end, now_ms=None)
        return LoadedLog(segments, end, tail, state)

    def repair(self) -> tuple[LoadedLog, list[str]]:
        """Recover every segment (the caller holds the partition lock); one line per change.

        Bytes after the last valid batch of the last segment are a dead writer's torn tail and
        are truncated (X-11, X-20). An invalid batch in any other segment, or one with a valid
        batch after it, stays where it is and is reported as "could not repair" (data is never
        dropped). Every segment's indexes are rebuilt from its batches (aborted-transaction
        entries past its end dropped), unreadable producer snapshots deleted, and producer
        state reloaded from the files (P-24). Segment objects that lock-free readers hold stay
        valid: these are new ones, and readers notice a truncation themselves.
        """
        done = recover_cleaner_files(self.directory)
        segments = load_segments(
            self.directory, self.topic_partition, self.config
        )  # afresh: indexes not trusted
        for segment in segments:
            done += self._repair_segment(segment, last=segment is segments[-1])
        done += self._delete_unreadable_snapshots()
        active = segments[-1]
        end, tail = active.next_offset, active.size
        done += delete_past(self.directory, end)
        done += clamp_to_log_end(self.directory, str(self.topic_partition), end)
        state = self._producer_state()
        self._reload_producer_state(state, segments, end, now_ms=self._clock.time_ms())
        return LoadedLog(segments, end, tail, state), done

    def _reload_producer_state(
        self,
        state: ProducerStateManager,
        segments: list[LogSegment],
        end_offset: int,
        *,
        now_ms: int | None,
    ) -> None:
        """Fit ``state`` to the log [log start, ``end_offset``), then replay what no snapshot
        covers (P-24)."""
        drop_deleted_head(segments)
        state.truncate_and_reload(segments[0].base_offset, end_offset, now_ms)
        replay_log(state, segments, state.map_end_offset, end_offset)

    def _repair_segment(self, segment: LogSegment, *, last: bool) -> list[str]:
        """``recover`` one segment; what it changed, in words."""
        paths = [i.path for i in (segment.offset_index, segment.time_index, segment.txn_index)]
        before = [_read_if_exists(path) for path in paths]  # the files: caches may be stale
        try:
            result = segment.recover(self.config.max_message_bytes, allow_torn_tail=last)
        except CorruptRecordError as error:
            return [f"could not repair {segment.log_path}: {error}"]
        done = []
        if result.truncated_bytes:
            done.append(
                f"{self.topic_partition}: truncated a torn tail of {result.truncated_bytes} "
                f"bytes at position {result.truncated_at} of {segment.log_path}"
            )
        for path, old in zip(paths, before, strict=True):
            if _read_if_exists(path) != old:
                done.append(f"rebuilt {path}")
        return done

    def _delete_unreadable_snapshots(self) -> list[str]:
        """Delete snapshot files that fail their checks (P-24 falls back to older ones)."""
        done = []
        for path in sorted(self.directory.glob(f"*{SNAPSHOT_SUFFIX}")):
            try:
                read_snapshot(path)
            except CorruptRecordError as error:
                path.unlink(missing_ok=True)
                done.append(f"deleted unreadable snapshot {path}: {error}")
        if done:
            fsync_directory(self.directory)
        return done
