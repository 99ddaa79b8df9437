"""Retention of a partition's segments: which to delete, and how (T-10, B-09; DESIGN §2).

Kafka's rules, applied by ``PartitionLog`` under the partition's lock:

- retention.ms judges a segment by its newest record's timestamp (T-10), not by file times; a
  segment holding only control batches by its first marker's (append) time;
- retention.bytes deletes the oldest segment while what remains is still at least the limit;
- a segment wholly below the log start that DeleteRecords moved (``log_start_checkpoint``) is
  deleted whatever its age or size (Kafka's ``deleteLogStartOffsetBreachedSegments``, which
  also runs for a topic that is compacted only); deleting it never moves the start backward,
  since the start is the higher of the first segment's base and the checkpoint;
- the active (newest) segment is never deleted, nor one holding data of an open transaction,
  so the first unstable offset never falls below the first segment (B-03, B-04); one below
  the checkpointed start waits for its transaction to end (readers refuse its offsets anyway);
- a segment goes with its offset and time indexes and its aborted-transaction index (B-09);
- by age and size only for topics whose ``cleanup.policy`` names ``delete`` (the default;
  ``compact,delete`` too): a purely compacted topic is shrunk by the log cleaner instead
  (CFG-18, C-02);
- never a segment of an internal topic: ``__transaction_state`` (transactional ids, the
  ledgers of atomic commits) and ``__consumer_offsets`` are replayed from their first offset,
  and are compacted (cleanup.policy=compact, C-02) instead of deleted by age.

Deleting unlinks the files and closes nothing: readers take no lock, and a reader thread in the
middle of a deleted segment reads on through its open descriptors (``owned_fd`` closes them
when the last reference goes), as readers in other processes do. Functions here are stateless;
the caller holds the partition's lock (``delete_old_segments`` is the whole round).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from txn_log.errors import StorageError
from txn_log.storage.cleaner_swap import remove_cleaner_files
from txn_log.storage.durable_file import fsync_directory
from txn_log.storage.file_names import LOG_SUFFIX, SEGMENT_SUFFIXES, parse_offset_file_name
from txn_log.storage.producer_state import ProducerStateManager
from txn_log.storage.segment import LogSegment
from txn_log.topic_config import INTERNAL_TOPICS, TopicConfig

_INDEX_SUFFIXES = frozenset(SEGMENT_SUFFIXES) - {LOG_SUFFIX}


def applies_to(topic: str) -> bool:
    """Whether retention may delete segments of ``topic`` (never of an internal topic)."""
    return topic not in INTERNAL_TOPICS


def delete_old_segments(
    topic: str,
    directory: Path,
    segments: Sequence[LogSegment],
    config: TopicConfig,
    now_ms: int,
    state: ProducerStateManager,
    log_start_offset: int = 0,
) -> int:
    """Delete the oldest of ``segments`` (oldest first, the last one active) while retention
    applies at ``now_ms``; returns how many went (the caller drops them from its list).
    ``log_start_offset`` is the checkpointed log start (inclusive; 0 when never moved).

    Producer state is kept (Kafka since KIP-360): a snapshot at or after the new log start
    makes sure a process that opens the partition later has it too, before any file goes.
    """
    count = deletable_segments(
        topic, segments, config, now_ms, state.first_unstable_offset(), log_start_offset
    )
    log_start = segments[count].base_offset  # the first segment kept
    if count:
        latest = state.latest_snapshot_offset()
        if latest is None or latest <= log_start:  # opening drops those at the log start
            state.take_snapshot()
        state.delete_snapshots_before(log_start)
        unlink_segments(directory, segments[:count])
    remove_orphan_indexes(directory, log_start)
    return count


def deletable_segments(
    topic: str,
    segments: Sequence[LogSegment],
    config: TopicConfig,
    now_ms: int,
    first_unstable_offset: int | None,
    log_start_offset: int = 0,
) -> int:
    """How many of the oldest ``segments`` of ``topic`` (oldest first, the last one active)
    retention deletes at ``now_ms``; ``first_unstable_offset`` is the inclusive first offset of
    the earliest open transaction, None when none is open; ``log_start_offset`` the
    checkpointed log start (inclusive), below which whole segments go whatever the policy."""
    if not applies_to(topic):
        return 0
    total = sum(s.size for s in segments)
    count = 0
    for segment in segments[:-1]:
        if first_unstable_offset is not None and segment.next_offset > first_unstable_offset:
            break
        below_start = segment.next_offset <= log_start_offset
        if not (below_start or (config.delete and _breaches(segment, config, now_ms, total))):
            break
        total -= segment.size
        count += 1
    return count


def _breaches(segment: LogSegment, config: TopicConfig, now_ms: int, total: int) -> bool:
    """Whether retention.ms or retention.bytes deletes ``segment`` (the oldest left) when the
    partition holds ``total`` bytes."""
    newest = newest_timestamp(segment)
    expired = config.retention_ms >= 0 and (newest is None or now_ms - newest > config.retention_ms)
    oversize = config.retention_bytes >= 0 and total - segment.size >= config.retention_bytes
    return expired or oversize


def newest_timestamp(segment: LogSegment) -> int | None:
    """What retention.ms judges ``segment`` by (T-10): its newest data record's timestamp, or,
    when it holds only control batches, its first batch's (a marker's LogAppendTime); None
    for an empty segment, which holds no offset and may always go."""
    if segment.max_timestamp is not None:
        return segment.max_timestamp
    return segment.first_batch_timestamp


def unlink_segments(directory: Path, segments: Sequence[LogSegment]) -> None:
    """Unlink the files of ``segments`` without closing them (readers may be in them).

    The ``.log`` files go first and durably (directory fsync): a segment must never come back
    after a crash without its ``.txnindex``, or its aborted records would read as committed.
    Index files a crash leaves behind are removed by ``remove_orphan_indexes``.
    Raises StorageError.
    """
    try:
        for segment in segments:
            segment.log_path.unlink(missing_ok=True)
        fsync_directory(directory)
        for segment in segments:
            for index in (segment.offset_index, segment.time_index, segment.txn_index):
                index.path.unlink(missing_ok=True)
            remove_cleaner_files(directory, segment.base_offset)
    except OSError as error:
        raise StorageError(f"cannot delete old segments in {directory}: {error}") from error


def remove_orphan_indexes(directory: Path, log_start_offset: int) -> None:
    """Index files below the log start whose segment is gone: left by a crash during a
    deletion, or created by a reader that opened a segment while it was being deleted."""
    for path in directory.iterdir():
        parsed = parse_offset_file_name(path.name)
        if parsed is not None and parsed[1] in _INDEX_SUFFIXES and parsed[0] < log_start_offset:
            path.unlink(missing_ok=True)
