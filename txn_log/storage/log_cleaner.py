"""The transaction-aware log cleaner of compacted topics (C-02, B-11, B-17, B-18, P-29, T-05).

For a partition of a topic with ``cleanup.policy`` compact, ``clean_partition`` rewrites the
closed segments below the last stable offset, keeping the newest record per key:

- cleanable range: from the first segment, the closed segments (never the active one) that end
  at or below the LSO (B-17: never past the first unstable offset, even one below a log start
  that DeleteRecords moved) and whose newest record is at least ``min.compaction.lag.ms`` old.
  The cleaner never reads or writes the log start checkpoint: records below the start stay
  unreadable whatever it rewrites, and the segments it writes keep their base offsets, so the
  start neither moves nor comes back. It runs when the bytes written since the last cleaning
  (``cleaner-offset-checkpoint``) are at least ``min.cleanable.dirty.ratio`` of the range, or
  when that dirty section holds a batch older than ``max.compaction.lag.ms`` (KIP-354; the
  housekeeping pass rolls a quiet partition's active segment by the same deadline and cleans
  the due partitions dirtiest first: ``cleaning_priority``);
- the offset map (key → newest offset) is built from the dirty section (from the checkpoint
  on; the clean section was already cleaned against itself), from committed and
  non-transactional records only: aborted records, found by the aborted-transaction index
  exactly as a read_committed reader finds them (B-11), never make a committed record go
  (B-17), and are themselves dropped;
- a record goes when a newer one has its key, or when it is a tombstone (null value) older than
  ``delete.retention.ms``; records without a key are kept;
- a COMMIT/ABORT marker is kept while any batch of its transaction is kept, and then until
  ``delete.retention.ms`` after its own timestamp (the delete horizon: B-18, X-21); an ABORT
  marker's aborted-transaction index entry goes with the marker (a reader handed the entry
  without the marker would treat the producer's later batches as aborted, B-13);
- a producer's last data batch (its last offset is the producer state's ``last_data_offset``)
  keeps its header even when all its records go (F-06, P-29, X-14), so a retry of it after
  cleaning is still answered as a duplicate, by a process that replays the cleaned log too;
- consecutive cleaned segments are written as one while their cleaned bytes fit in
  ``segment.bytes`` and their offsets in int32 of the first base (Kafka's
  ``groupSegmentsBySize``): a long-lived compacted topic keeps a few files, not one per roll;
- a written segment covers its group's whole offset range: when the group's last batch goes,
  an empty producer-less batch over its offsets stays (``batch_rewriter.range_keeper``), so
  segments still meet end to end; inside a segment removed batches and records leave holes
  (T-05), and an earlier cleaning's range keeper that no longer ends a segment goes;
- a batch that keeps every record is copied as is; one that loses some is rebuilt from its
  surviving records' bytes (``batch_rewriter``); a segment that loses nothing and merges with
  no other is not rewritten.

Before each swap the cleaner raises the partition's ``cleaner_horizon`` durably (how far it has
rewritten segments, and the end of the tombstones and markers it removed), so that the state
snapshots of the internal topics stay valid across a cleaning below them (``state_snapshot``).
Every byte read and written is reported to an optional ``Throttler``
(``log.cleaner.io.max.bytes.per.second``).

Each group is swapped in through ``cleaner_swap`` (write ``.cleaned`` without the lock, then
commit and finish the swap, and for a merge delete the covered segments, under the partition
lock: the lock is held for a few renames and unlinks, not while cleaning). One cleaner at a
time per partition across processes (``.cleaner.lock``, taken without waiting). Keys are
opaque bytes: internal topics are cleaned as any other compacted topic.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from txn_log.errors import LogLockedError, StorageError, UnknownTopicOrPartitionError
from txn_log.file_lock import FileLock
from txn_log.record.batch_header import HEADER_SIZE, BatchHeader, parse_header
from txn_log.record.compression import MAX_RECORDS_BYTES, records_limit
from txn_log.storage.batch_rewriter import RawRecord, iter_raw_records, range_keeper, rebuild_batch
from txn_log.storage.batch_scan import INT32_MAX
from txn_log.storage.cleaner_horizon import advance_horizon
from txn_log.storage.cleaner_swap import (
    CLEANER_LOCK_FILE,
    commit_swap,
    finish_swap,
    recover_cleaner_files,
    remove_cleaner_files,
    write_cleaned,
)
from txn_log.storage.durable_file import write_durably
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.segment import LogSegment
from txn_log.storage.throttler import Throttler
from txn_log.storage.txn_index import ENTRY as TXN_ENTRY
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_config import TopicConfig

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
NOTHING_CLEANABLE = "no closed segment below the last stable offset (and min.compaction.lag.ms)"
BELOW_RATIO = "below min.cleanable.dirty.ratio"


@dataclass(frozen=True)
class CleanerStats:
    """What one cleaning of one partition did (``skipped``: why it did nothing)."""

    topic_partition: str
    segments_cleaned: tuple[int, ...] = ()  # base offsets of the segments replaced
    segments_written: int = 0  # the cleaned segments that replaced them (merged: fewer)
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0
    batches_removed: int = 0
    dirty_ratio: float = 0.0
    skipped: str | None = None


def read_checkpoint(directory: Path) -> int:
    """The first offset not yet cleaned (0 when never cleaned or unreadable)."""
    try:
        text = (directory / CHECKPOINT_FILE).read_text().strip()
    except FileNotFoundError:
        return 0
    return int(text) if text.isdigit() else 0


class _AbortedRanges:
    """Aborted transactions by producer: is a data batch part of one (B-11, as read_committed)."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for txn in aborted:
            self._spans[txn.producer_id].append((txn.first_offset, txn.last_offset))

    def is_aborted(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        spans = self._spans.get(header.producer_id, ())
        return any(first <= header.base_offset <= last for first, last in spans)


@dataclass
class _Context:
    """What one cleaning decides by: the snapshot taken under the lock, and the map."""

    now_ms: int
    delete_retention_ms: int
    aborted: _AbortedRanges
    last_data_offsets: dict[int, int]
    offset_map: dict[bytes, int]
    txn_retained: dict[int, bool]
    records_removed: int = 0
    batches_removed: int = 0
    throttler: Throttler | None = None
    removed_end: int = 0  # exclusive end of the tombstones and markers removed so far
    max_records_bytes: int = MAX_RECORDS_BYTES  # how far a batch may inflate (DESIGN §4)

    def charge(self, byte_count: int) -> None:
        """Report bytes read or written to the throttler (log.cleaner.io.max.bytes.per.second)."""
        if self.throttler is not None:
            self.throttler.maybe_throttle(byte_count)

    def past_horizon(self, header: BatchHeader) -> bool:
        return header.max_timestamp + self.delete_retention_ms <= self.now_ms

    def is_producers_last(self, header: BatchHeader) -> bool:
        return (
            header.has_producer_id
            and self.last_data_offsets.get(header.producer_id) == header.last_offset
        )


def _cleanable(segments: list[LogSegment], end: int, now_ms: int, lag_ms: int) -> list[LogSegment]:
    """The closed segments from the log start that end at or below ``end`` and are old enough."""
    chosen: list[LogSegment] = []
    for segment, following in itertools.pairwise(segments):
        if following.base_offset > end:
            break
        newest = segment.max_timestamp
        if newest is None:
            newest = segment.first_batch_timestamp
        if lag_ms > 0 and newest is not None and now_ms - newest < lag_ms:
            break
        chosen.append(segment)
    return chosen


def _build_offset_map(segments: list[LogSegment], context: _Context) -> None:
    for segment in segments:
        for position, header in segment.batches():
            if header.is_control or context.aborted.is_aborted(header):
                continue
            data = segment.read_bytes(position, header.size_in_bytes)
            context.charge(len(data))
            for record in iter_raw_records(data, header, context.max_records_bytes):
                if record.key is not None:
                    context.offset_map[record.key] = record.offset


def _kept_records(
    records: list[RawRecord], header: BatchHeader, context: _Context
) -> list[RawRecord]:
    """The records of a committed or non-transactional batch that stay: no newer record has
    their key, and they are not a tombstone past the delete horizon (recorded in
    ``removed_end``: a snapshot before it must not miss it, ``cleaner_horizon``)."""
    kept = []
    for record in records:
        if record.key is not None:
            if context.offset_map.get(record.key, record.offset) != record.offset:
                continue
            if record.is_tombstone and context.past_horizon(header):
                context.removed_end = max(context.removed_end, record.offset + 1)
                continue
        kept.append(record)
    return kept


def _clean_batch(header: BatchHeader, data: bytes, context: _Context) -> bytes | None:
    """The batch's bytes after cleaning (``data`` itself when unchanged), None when it goes."""
    producer_id = header.producer_id
    if header.is_control:
        retained = context.txn_retained.pop(producer_id, False)
        if retained or not context.past_horizon(header):
            return data
        context.removed_end = max(context.removed_end, header.next_offset)  # cleaner_horizon
        return None
    records = list(iter_raw_records(data, header, context.max_records_bytes))
    kept = [] if context.aborted.is_aborted(header) else _kept_records(records, header, context)
    context.records_removed += len(records) - len(kept)
    if len(kept) == len(records):
        result: bytes | None = data
    elif kept or context.is_producers_last(header):
        result = rebuild_batch(header, kept)
    else:
        result = None
    if result is not None and header.is_transactional:
        context.txn_retained[producer_id] = True
    return result


@dataclass
class _CleanedSegment:
    """One segment's batches after cleaning, before they are written (``_Group``)."""

    segment: LogSegment
    batches: list[bytes]
    changed: bool
    removed_last: BatchHeader | None  # its last batch, when that went (the range it ends)

    @property
    def size(self) -> int:
        return sum(map(len, self.batches)) + (HEADER_SIZE if self.removed_last else 0)


def _is_range_keeper(header: BatchHeader) -> bool:
    return not header.has_producer_id and not header.is_control and header.records_count == 0


def _clean_segment(segment: LogSegment, context: _Context) -> _CleanedSegment:
    """The cleaned batches of ``segment`` (``changed``: it lost something)."""
    located = list(segment.batches())
    out: list[bytes] = []
    changed = False
    removed_last = None
    for number, (position, header) in enumerate(located):
        data = segment.read_bytes(position, header.size_in_bytes)
        context.charge(len(data))
        last = number == len(located) - 1
        # an earlier cleaning's range keeper stays only where a range still ends (_Group)
        keeper = _is_range_keeper(header)
        cleaned = None if keeper else _clean_batch(header, data, context)
        if cleaned is None:
            if last:
                removed_last = header
            if not (last and keeper):  # written again as it was
                context.batches_removed += 1
                changed = True
        elif cleaned is not data:
            changed = True
        if cleaned is not None:
            out.append(cleaned)
    return _CleanedSegment(segment, out, changed, removed_last)


@dataclass
class _Group:
    """Consecutive cleaned segments written as one (Kafka's ``groupSegmentsBySize``): at most
    ``segment.bytes`` after cleaning, offsets within int32 of the first base (index entries)."""

    members: list[_CleanedSegment]
    end: int  # exclusive: the base offset of the segment after the last member
    size: int  # of the members' cleaned batches

    @classmethod
    def of(cls, member: _CleanedSegment, end: int) -> _Group:
        return cls([member], end, member.size)

    def add_if_fits(self, member: _CleanedSegment, end: int, segment_bytes: int) -> bool:
        """Take ``member`` (whose segment ends at ``end``) if the group stays within bounds."""
        first = self.members[0].segment.base_offset
        if self.size + member.size > segment_bytes or end - 1 - first > INT32_MAX:
            return False
        self.members.append(member)
        self.end, self.size = end, self.size + member.size
        return True

    @property
    def needs_writing(self) -> bool:
        return len(self.members) > 1 or self.members[0].changed

    def batches(self) -> list[bytes]:
        """The members' batches; where the last one's last batch went, an empty batch over its
        offsets (``range_keeper``), so the written segment still ends at ``end``; holes inside
        it are fine (T-05)."""
        out = [batch for member in self.members for batch in member.batches]
        removed_last = self.members[-1].removed_last
        if removed_last is not None:
            out.append(range_keeper(removed_last))
        return out

    def txn_index(self, headers: list[BatchHeader]) -> bytes | None:
        """The members' aborted-transaction index entries whose ABORT marker is among the
        cleaned batches (``headers``), in order (None: the members had no index). An entry
        whose marker the cleaner removed goes with it, as Kafka's cleaner rebuilds the index
        from the markers it keeps (B-10, B-18): a reader handed such an entry would wait for
        that producer's ABORT marker forever and drop its later committed batches (B-13)."""
        parts = [_read_if_exists(m.segment.txn_index.path) for m in self.members]
        found = [part for part in parts if part is not None]
        if not found:
            return None
        markers = {header.base_offset for header in headers if header.is_control}
        entries = b"".join(found)
        entries = entries[: len(entries) - len(entries) % TXN_ENTRY.size]  # a torn last entry
        kept = [
            entry
            for entry in TXN_ENTRY.iter_unpack(entries)
            if entry[3] in markers  # (version, producer id, first offset, last offset, LSO)
        ]
        return b"".join(TXN_ENTRY.pack(*entry) for entry in kept)


def _read_if_exists(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _swap_in(partition: PartitionLog, group: _Group, *, wait: bool) -> bool:
    """Commit and finish the swap of ``group`` under the partition lock; False (and the
    cleaned files deleted) when retention deleted one of its segments or another cleaner
    replaced one first. LogLockedError (cleaned files deleted) when not ``wait``ing and a
    writer holds it."""
    directory = partition.directory
    base = group.members[0].segment.base_offset
    merged_end = group.end if len(group.members) > 1 else None
    try:
        with partition.maintenance_locked(wait=wait):
            for member in group.members:
                if not member.segment.log_path.exists() or member.segment.is_replaced():
                    remove_cleaner_files(directory, base)
                    return False
            commit_swap(directory, base, merged_end)
            finish_swap(directory, base)
    except LogLockedError:
        remove_cleaner_files(directory, base)
        raise
    return True


def clean_partition(
    partition: PartitionLog,
    now_ms: int,
    *,
    force: bool = False,
    wait: bool = True,
    throttler: Throttler | None = None,
) -> CleanerStats:
    """Clean one partition of a compacted topic once (see the module docstring).

    ``force`` cleans whatever the dirty ratio; ``throttler`` is told every byte read and
    written (ThrottleStopped, with nothing swapped in for the segment at hand, when it is
    stopped). Never waits for another cleaner (skipped), and
    holds the partition lock only to take its snapshot and for each segment's swap; without
    ``wait`` (housekeeping) a partition a writer holds at those moments is skipped.
    """
    name = str(partition.topic_partition)
    config = partition.refresh_config()  # cleanup.policy and the lags as they are now
    if not config.compact:
        return CleanerStats(name, skipped=f"cleanup.policy is {config.cleanup_policy}")
    directory = partition.directory
    lock = FileLock(directory / CLEANER_LOCK_FILE)
    try:
        if not lock.try_acquire():
            return CleanerStats(name, skipped="another process is cleaning it")
    except FileNotFoundError:
        return CleanerStats(name, skipped="deleted with its topic")
    try:
        return _clean_locked(partition, now_ms, force, wait, throttler)
    except (LogLockedError, UnknownTopicOrPartitionError) as error:
        return CleanerStats(name, skipped=str(error))
    except StorageError:
        if not directory.is_dir():  # its topic was deleted while it was being cleaned
            return CleanerStats(name, skipped="deleted with its topic")
        raise
    finally:
        lock.release()
        lock.close()


@dataclass(frozen=True)
class _Section:
    """What is cleanable now: the chosen closed segments and how dirty they are."""

    chosen: list[LogSegment]
    first_dirty: int
    ratio: float
    must_clean: bool  # dirty data older than max.compaction.lag.ms (KIP-354)

    def skip_reason(self, config: TopicConfig, force: bool) -> str | None:
        if not self.chosen:
            return NOTHING_CLEANABLE
        dirty = self.ratio > 0
        if force or (dirty and (self.must_clean or self.ratio >= config.min_cleanable_dirty_ratio)):
            return None
        return BELOW_RATIO


def _measure(partition: PartitionLog, segments: list[LogSegment], now_ms: int) -> _Section:
    """Under the partition lock: the cleanable section of ``segments`` (B-17: below the LSO)."""
    config, directory = partition.config, partition.directory
    # B-17: never past the first unstable offset, even one below a log start DeleteRecords
    # moved (the LSO is held at the start then): a replay of the cleaned segments must still
    # find where that transaction began
    unstable = partition.first_unstable_offset
    end = segments[-1].base_offset if unstable is None else min(unstable, segments[-1].base_offset)
    chosen = _cleanable(segments, end, now_ms, config.min_compaction_lag_ms)
    first_dirty = read_checkpoint(directory)
    dirty = [s for s in chosen if s.base_offset >= first_dirty]
    total = sum(s.size for s in chosen)
    ratio = sum(s.size for s in dirty) / total if total else 0.0
    oldest = min((t for s in dirty if (t := s.first_batch_timestamp) is not None), default=None)
    lag = config.max_compaction_lag_ms
    must_clean = oldest is not None and now_ms - oldest >= lag
    return _Section(chosen, first_dirty, ratio, must_clean)


def cleaning_priority(partition: PartitionLog, now_ms: int) -> float | None:
    """How dirty ``partition`` is when a cleaning is due (its dirty ratio; 2.0 past
    ``max.compaction.lag.ms``, which goes first), None when it is not due. First rolls an
    active segment whose first batch is older than the topic's roll time (``max_segment_ms``,
    so a quiet partition's data becomes cleanable). Never waits: None when a writer holds it.
    """
    if not partition.refresh_config().compact:  # as another process may have altered it
        return None
    try:
        partition.maybe_roll_by_time()
        with partition.maintenance_locked(wait=False) as current:
            section = _measure(partition, list(current), now_ms)
    except (LogLockedError, UnknownTopicOrPartitionError):
        return None
    if section.skip_reason(partition.config, force=False) is not None:
        return None
    return 2.0 if section.must_clean else section.ratio


def _clean_locked(
    partition: PartitionLog, now_ms: int, force: bool, wait: bool, throttler: Throttler | None
) -> CleanerStats:
    name, config, directory = str(partition.topic_partition), partition.config, partition.directory
    with partition.maintenance_locked(wait=wait) as current:
        recover_cleaner_files(directory, cleaner_lock_held=True)
        segments = list(current)
        section = _measure(partition, segments, now_ms)
        chosen, first_dirty, ratio = section.chosen, section.first_dirty, section.ratio
        skipped = section.skip_reason(config, force)
        if skipped is not None:
            return CleanerStats(name, dirty_ratio=ratio, skipped=skipped)
        state = partition.producer_state
        last_data = {pid: e.last_data_offset for pid, e in state.active_producers().items()}
        aborted = partition.collect_aborted_txns(segments[0].base_offset, partition.log_end_offset)
    context = _Context(
        now_ms, config.delete_retention_ms, _AbortedRanges(aborted), last_data, {}, {},
        throttler=throttler, max_records_bytes=records_limit(config.max_message_bytes),
    )  # fmt: skip
    # Only the dirty section feeds the map: what the clean section superseded within itself
    # went in an earlier cleaning (the checkpoint moves only after a complete one).
    _build_offset_map([s for s in chosen if s.base_offset >= first_dirty], context)
    cleaned: list[int] = []
    written: list[int] = []
    before = after = 0
    ends = {s.base_offset: following.base_offset for s, following in itertools.pairwise(segments)}

    def write(group: _Group) -> None:
        nonlocal before, after
        if not group.needs_writing:
            return
        batches = group.batches()
        # before the swap: no process may see a cleaned segment the horizon does not cover
        advance_horizon(directory, group.end, context.removed_end)
        base = group.members[0].segment.base_offset
        headers = [parse_header(b) for b in batches]
        size = write_cleaned(directory, base, batches, headers, group.txn_index(headers),
                             config.index_interval_bytes)  # fmt: skip
        context.charge(size)
        if _swap_in(partition, group, wait=wait):
            written.append(base)
            cleaned.extend(m.segment.base_offset for m in group.members)
            before += sum(m.segment.size for m in group.members)
            after += size

    group: _Group | None = None
    for segment in chosen:
        member, end = _clean_segment(segment, context), ends[segment.base_offset]
        if group is not None and group.add_if_fits(member, end, config.segment_bytes):
            continue
        if group is not None:
            write(group)
        group = _Group.of(member, end)
    if group is not None:
        write(group)
    cleanable_end = chosen[-1].next_offset if chosen else 0
    following = [s.base_offset for s in segments if s.base_offset > chosen[-1].base_offset]
    if following:
        cleanable_end = following[0]
    write_durably(directory / CHECKPOINT_FILE, f"{cleanable_end}\n".encode())
    _ = partition.log_start_offset  # this process's own view takes the cleaned copies
    return CleanerStats(
        name, tuple(cleaned), len(written), before, after, context.records_removed,
        context.batches_removed, ratio,
    )  # fmt: skip
