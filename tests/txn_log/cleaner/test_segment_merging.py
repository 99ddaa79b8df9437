"""The cleaner merges small cleaned segments (Kafka's ``groupSegmentsBySize``), and lock-free
readers holding the old segments never lose or repeat a record across a merge (C-02, T-05)."""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.txn_log.cleaner.helpers import TP, committed_records, end_txn, keyed, open_compacted
from txn_log.cli.verify_checks import check_partition
from txn_log.clock import ManualClock
from txn_log.storage.log_cleaner import clean_partition
from txn_log.storage.log_segments import drop_covered, iter_headers
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.partition_reader import PartitionReader, open_partition_reader
from txn_log.storage.segment import LogSegment
from txn_log.topic_config import TopicConfig

SEGMENT_BYTES = "1000"


def _rounds(log: PartitionLog, clock: ManualClock, first: int, count: int) -> None:
    """Each round a committed transaction (keys a, b and the round's own key), an aborted one
    over key a, then a roll: many small segments, most of each superseded later."""
    for round_ in range(first, first + count):
        pid = 7
        log.append(keyed([(b"a", b"%d" % round_), (b"b", b"%d" % round_),
                          (b"u%d" % round_, b"own")], clock, producer_id=pid, epoch=0,
                         seq=4 * round_, transactional=True))  # fmt: skip
        end_txn(log, pid, 0, commit=True)
        log.append(keyed([(b"a", b"aborted")], clock, producer_id=pid, epoch=0,
                         seq=4 * round_ + 3, transactional=True))  # fmt: skip
        end_txn(log, pid, 0, commit=False)
        log.roll()
        clock.advance(10)


def _expected(rounds: int) -> dict[bytes, bytes]:
    newest = {b"a": b"%d" % (rounds - 1), b"b": b"%d" % (rounds - 1)}
    return {**newest, **{b"u%d" % r: b"own" for r in range(rounds)}}


def _view(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, bytes | None]:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), f"a record repeated or out of order: {offsets}"
    return {key: value for _, key, value in records if key is not None}


def _reader(log: PartitionLog, clock: ManualClock) -> PartitionReader:
    """A lock-free reader, as another process opens one (the log's clock: producer ids are
    expired by it)."""
    return open_partition_reader(
        log.directory, TP, log.config, clock=clock, with_producer_state=True
    )


def _ranges(log: PartitionLog) -> list[tuple[int, int, int]]:
    return [(s.base_offset, s.next_offset, s.size) for s in log.segments]


def test_cleaned_segments_merge_up_to_segment_bytes_and_keep_their_offsets(
    tmp_path: Path,
) -> None:
    """C-02, T-05: 30 one-round segments clean into a few merged ones, each at most
    segment.bytes, meeting end to end; offsets, the read_committed view, aborted data gone."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, **{"segment.bytes": SEGMENT_BYTES})
    _rounds(log, clock, 0, 30)
    before = committed_records(log)
    assert len(log.segments) == 31
    stats = clean_partition(log, clock.time_ms(), force=True)
    assert len(stats.segments_cleaned) == 30 and 1 < stats.segments_written < 10
    ranges = _ranges(log)
    assert len(ranges) == stats.segments_written + 1
    assert all(end == following for (_, end, _), (following, _, _) in itertools.pairwise(ranges))
    assert all(size <= int(SEGMENT_BYTES) for _, _, size in ranges)
    after = committed_records(log)
    assert _view(after) == _view(before) == _expected(30)
    assert set(after) <= set(before)  # offsets (and records) unchanged, only fewer
    # nothing left to do: a second cleaning rewrites nothing (the merged files stay)
    assert clean_partition(log, clock.time_ms(), force=True).segments_cleaned == ()
    # later segments merge into the last merged one while it has room
    _rounds(log, clock, 30, 3)
    again = clean_partition(log, clock.time_ms(), force=True)
    assert again.segments_written >= 1 and len(log.segments) <= len(ranges) + 1
    assert _view(committed_records(log)) == _expected(33)


def test_producer_state_survives_a_merge(tmp_path: Path) -> None:
    """P-29, X-14: after merging, a process replaying the log from scratch (no snapshot) knows
    the producer's last sequence, so its retry is still a duplicate."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, **{"segment.bytes": SEGMENT_BYTES})
    _rounds(log, clock, 0, 12)
    clean_partition(log, clock.time_ms(), force=True)
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    fresh = _reader(log, clock)
    try:
        entry = fresh.producer_state.active_producers()[7]
        assert (entry.producer_epoch, entry.last_seq) == (0, 47)
    finally:
        fresh.close()


def test_a_reader_opened_before_a_merge_reads_every_record_once(tmp_path: Path) -> None:
    """A lock-free reader (another process's view) opened before the merge: an iterator it
    made before, its reads after, and reads from every offset see each record once."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, **{"segment.bytes": SEGMENT_BYTES})
    _rounds(log, clock, 0, 20)
    reader = _reader(log, clock)
    try:
        expected = _view(committed_records(reader))
        early = reader.read(reader.log_start_offset)  # made before, consumed after
        assert clean_partition(log, clock.time_ms(), force=True).segments_written > 1
        offsets = [h.base_offset for h, _ in early]
        assert offsets == sorted(set(offsets))
        assert _view(committed_records(reader)) == expected == _expected(20)
        assert len(reader.segments) == len(log.segments)  # the covered ones forgotten
        end = reader.last_stable_offset
        for start in range(0, end, 7):
            suffix = committed_records(reader, start)
            assert [o for o, _, _ in suffix] == sorted({o for o, _, _ in suffix})
            assert all(o >= start for o, _, _ in suffix)
    finally:
        reader.close()


def test_a_reader_whose_last_segment_was_merged_before_it_caught_up(tmp_path: Path) -> None:
    """A reader last looked while segment N was active; since then N was closed, more segments
    written and N merged with them. It re-lists and goes on inside the merged segment: log end,
    LSO, producer state and records agree with a reader opened afresh."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)  # segment.bytes 1 GiB: all merge into segment 0
    _rounds(log, clock, 0, 3)
    log.append(keyed([(b"a", b"pending")], clock, producer_id=9, epoch=0, seq=0,
                     transactional=True))  # fmt: skip
    reader = _reader(log, clock)
    try:
        assert reader.last_stable_offset == 18  # 9's open transaction, in the active segment
        end_txn(log, 9, 0, commit=True)
        log.roll()
        _rounds(log, clock, 3, 10)
        stats = clean_partition(log, clock.time_ms(), force=True)
        assert stats.segments_written == 1 and 18 in stats.segments_cleaned
        assert not (log.directory / "00000000000000000018.log").exists()
        fresh = _reader(log, clock)
        try:
            assert reader.log_end_offset == fresh.log_end_offset
            assert reader.last_stable_offset == fresh.last_stable_offset == log.log_end_offset
            mine = dict(reader.producer_state.active_producers())
            theirs = dict(fresh.producer_state.active_producers())
            assert {pid: (e.producer_epoch, e.last_seq) for pid, e in mine.items()} == {
                pid: (e.producer_epoch, e.last_seq) for pid, e in theirs.items()
            }
            assert _view(committed_records(reader)) == _view(committed_records(fresh))
        finally:
            fresh.close()
    finally:
        reader.close()


def test_a_scan_over_a_list_holding_both_versions_yields_each_batch_once(tmp_path: Path) -> None:
    """The list a reader made while a merge was under way may hold the merged segment and an
    old one it covers: ``drop_covered`` removes the old one, and a scan over the list as it
    was still yields each batch once."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)  # segment.bytes 1 GiB: one merged segment
    _rounds(log, clock, 0, 6)
    config = TopicConfig.from_mapping({"cleanup.policy": "compact"})
    old = [LogSegment.open(log.directory, s.base_offset) for s in log.segments]
    before = [(h.base_offset, h.next_offset) for _, _, h in iter_headers(old, 0, 10**6)]
    assert clean_partition(log, clock.time_ms(), force=True).segments_written == 1
    merged = LogSegment.open(log.directory, 0, index_interval_bytes=config.index_interval_bytes)
    mixed = [merged, *old[1:]]  # the merged head, then the old segments it covers
    seen = [(h.base_offset, h.next_offset) for _, _, h in iter_headers(mixed, 0, 10**6)]
    assert [b for b, _ in seen] == sorted({b for b, _ in seen})
    assert set(seen) <= set(before) and seen[-1] == before[-1]
    from_inside = [h.base_offset for _, _, h in iter_headers(mixed, old[2].base_offset, 10**6)]
    assert from_inside == sorted(set(from_inside)) and from_inside[0] >= old[2].base_offset - 1
    dropped = list(mixed)
    assert drop_covered(dropped) and [s.base_offset for s in dropped] == [0, old[-1].base_offset]
    for segment in [*old, merged]:
        segment.close()


def test_verify_rechecks_a_segment_a_merge_replaced_since_its_first_look(tmp_path: Path) -> None:
    """``txnlog verify`` checks a partition once without a lock, then again under its lock
    reusing the segments it found clean. A merge between the two replaces a clean segment
    under the same name: the recheck must read the merged file, not reuse the old check
    (which ended where the merged file does not), or it reports a gap that is not there."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, **{"segment.bytes": SEGMENT_BYTES})
    _rounds(log, clock, 0, 6)
    first = check_partition(log.directory, TP.topic)
    assert first is not None and first.problems == []
    clean_partition(log, clock.time_ms(), force=True)
    merged = [s.base_offset for s in log.segments]
    assert len(merged) < len(first.segments)  # the first segment now covers later ones
    again = check_partition(log.directory, TP.topic, reuse=first)
    assert again is not None and again.problems == []
    assert [s.base for s in again.segments if s is not None] == merged
