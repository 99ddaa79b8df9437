"""The transaction-aware log cleaner on one partition (C-02, B-11, B-17, B-18, P-29, T-05)."""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.txn_log.cleaner.helpers import (
    committed_records,
    end_txn,
    keyed,
    latest_per_key,
    open_compacted,
)
from txn_log.clock import ManualClock
from txn_log.record.codec import iter_records
from txn_log.storage.log_cleaner import clean_partition

DAY_MS = 86_400_000


def all_records(log) -> list[tuple[int, bytes | None]]:  # type: ignore[no-untyped-def]
    """(offset, key) of every data record on disk, aborted ones included (read_uncommitted)."""
    out = []
    for header, batch in log.read(log.log_start_offset):
        if not header.is_control:
            out += [(r.offset, r.key) for r in iter_records(batch)]
    return out


def control_offsets(log) -> list[int]:  # type: ignore[no-untyped-def]
    return [h.base_offset for h, _ in log.read(log.log_start_offset) if h.is_control]


def test_b17_committed_records_are_never_removed_because_of_aborted_ones(tmp_path: Path) -> None:
    """B-17: an aborted newer value of a key does not supersede the committed one."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    log.append(keyed([(b"k", b"committed")], clock, producer_id=1, epoch=0, seq=0,
                     transactional=True))  # fmt: skip
    end_txn(log, 1, 0, commit=True)
    log.append(keyed([(b"k", b"aborted")], clock, producer_id=1, epoch=0, seq=1,
                     transactional=True))  # fmt: skip
    end_txn(log, 1, 0, commit=False)
    log.roll()
    log.append(keyed([(b"other", b"x")], clock))
    stats = clean_partition(log, clock.time_ms(), force=True)
    assert stats.skipped is None
    assert [(o, k, v) for o, k, v in committed_records(log)] == [
        (0, b"k", b"committed"), (4, b"other", b"x")
    ]  # fmt: skip


def test_b11_aborted_data_is_removed_by_following_the_txnindex(tmp_path: Path) -> None:
    """B-11: records of an aborted transaction are dropped from the cleaned segment."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    log.append(keyed([(b"a", b"1"), (b"b", b"2")], clock, producer_id=1, epoch=0, seq=0,
                     transactional=True))  # fmt: skip
    end_txn(log, 1, 0, commit=False)
    log.append(keyed([(b"c", b"3")], clock, producer_id=2, epoch=0, seq=0))
    log.roll()
    log.append(keyed([(b"d", b"4")], clock))
    assert [k for _, k in all_records(log)] == [b"a", b"b", b"c", b"d"]
    stats = clean_partition(log, clock.time_ms(), force=True)
    assert stats.records_removed == 2
    assert [k for _, k in all_records(log)] == [b"c", b"d"]
    assert committed_records(log) == [(3, b"c", b"3"), (4, b"d", b"4")]


def test_b18_x21_markers_outlive_their_data_then_go_after_the_delete_horizon(
    tmp_path: Path,
) -> None:
    """B-18, X-21: an ABORT marker stays when its data goes, and goes only after
    delete.retention.ms (and only once no batch of its transaction is kept)."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    log.append(keyed([(b"a", b"1")], clock, producer_id=1, epoch=0, seq=0, transactional=True))
    end_txn(log, 1, 0, commit=False)  # offset 1
    log.append(keyed([(b"z", b"9")], clock, producer_id=2, epoch=0, seq=0))  # 2: 1's last? no
    log.append(keyed([(b"a", b"2")], clock, producer_id=1, epoch=0, seq=1, transactional=True))
    end_txn(log, 1, 0, commit=True)  # offset 4
    log.roll()
    log.append(keyed([(b"y", b"0")], clock))
    clean_partition(log, clock.time_ms(), force=True)
    assert [k for _, k in all_records(log)] == [b"z", b"a", b"y"]
    assert control_offsets(log) == [1, 4]  # the ABORT's data is gone, its marker is not
    clock.advance(DAY_MS + 1)
    clean_partition(log, clock.time_ms(), force=True)
    assert control_offsets(log) == [4]  # COMMIT stays: its transaction's data is kept
    assert committed_records(log) == [(2, b"z", b"9"), (3, b"a", b"2"), (5, b"y", b"0")]


def test_p29_x14_producer_state_survives_the_cleaning_of_all_its_records(tmp_path: Path) -> None:
    """P-29, F-06, X-14: a producer's last batch keeps its header when all its records go, so
    a process that replays the cleaned log still answers a retry with the original offsets."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    first = keyed([(b"k", b"old"), (b"j", b"old")], clock, producer_id=5, epoch=3, seq=0)
    original = log.append(first)
    log.append(keyed([(b"k", b"new"), (b"j", b"new")], clock, producer_id=6, epoch=0, seq=0))
    log.roll()
    log.append(keyed([(b"x", b"x")], clock))
    stats = clean_partition(log, clock.time_ms(), force=True)
    assert stats.records_removed == 2
    assert [k for _, k in all_records(log)] == [b"k", b"j", b"x"]  # producer 5's are gone
    log.close()
    for snapshot in tmp_path.glob("*.snapshot"):
        snapshot.unlink()  # the state must come from the cleaned log itself
    reopened = open_compacted(tmp_path, clock)
    entry = reopened.producer_state.last_entry(5)
    assert entry is not None and (entry.producer_epoch, entry.last_seq) == (3, 1)
    retry = reopened.append(first)
    assert retry.duplicate
    assert (retry.base_offset, retry.last_offset) == (original.base_offset, original.last_offset)


def test_b17_nothing_at_or_past_the_lso_is_touched(tmp_path: Path) -> None:
    """B-17: segments holding an open transaction's data, and all after them, stay as they are."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    log.append(keyed([(b"k", b"1")], clock))
    log.append(keyed([(b"k", b"2")], clock))
    log.roll()
    log.append(keyed([(b"t", b"open")], clock, producer_id=9, epoch=0, seq=0, transactional=True))
    log.append(keyed([(b"k", b"3")], clock))
    log.roll()
    log.append(keyed([(b"k", b"4")], clock))
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.log")}
    assert log.last_stable_offset == 2
    clean_partition(log, clock.time_ms(), force=True)
    after = {p.name: p.read_bytes() for p in tmp_path.glob("*.log")}
    changed = sorted(name for name in before if before[name] != after[name])
    assert changed == ["00000000000000000000.log"]
    assert [o for o, _ in all_records(log)] == [1, 2, 3, 4]  # 0 went: 1 supersedes it


def test_the_active_segment_is_never_cleaned(tmp_path: Path) -> None:
    """The active segment keeps superseded records: only closed segments are cleaned."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    for value in (b"1", b"2", b"3"):
        log.append(keyed([(b"k", value)], clock))
    stats = clean_partition(log, clock.time_ms(), force=True)
    assert stats.segments_cleaned == ()
    assert [o for o, _ in all_records(log)] == [0, 1, 2]


def test_tombstones_go_after_delete_retention_ms(tmp_path: Path) -> None:
    """A tombstone (null value) supersedes its key's records at once, and goes itself only
    delete.retention.ms after it was written (injected clock)."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, **{"delete.retention.ms": "1000"})
    log.append(keyed([(b"k", b"v")], clock))
    log.append(keyed([(b"k", None)], clock))
    log.append(keyed([(b"keep", b"v")], clock))
    log.roll()
    log.append(keyed([(b"tail", b"v")], clock))
    clean_partition(log, clock.time_ms(), force=True)
    assert all_records(log) == [(1, b"k"), (2, b"keep"), (3, b"tail")]
    clock.advance(999)
    clean_partition(log, clock.time_ms(), force=True)
    assert all_records(log) == [(1, b"k"), (2, b"keep"), (3, b"tail")]
    clock.advance(1)
    clean_partition(log, clock.time_ms(), force=True)
    assert all_records(log) == [(2, b"keep"), (3, b"tail")]


def test_t05_offsets_are_preserved_and_segments_keep_their_ranges(tmp_path: Path) -> None:
    """T-05: survivors keep their offsets (holes where records went); every segment still
    ends where the next begins (its last batch's offsets stay held)."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    for round_ in range(3):
        for key in (b"a", b"b", b"c"):
            log.append(keyed([(key, b"%d" % round_), (b"x" + key, b"v")], clock))
        log.roll()
    log.append(keyed([(b"a", b"final")], clock))
    before = committed_records(log)
    expected = latest_per_key(before)
    clean_partition(log, clock.time_ms(), force=True)
    records = committed_records(log)
    assert latest_per_key(records) == expected
    assert set(records) <= set(before)  # same offsets, keys and values: nothing renumbered
    # only the active segment's newer "a" is beyond the map: 12 stays, the rest are newest
    assert [o for o, _, _ in records] == [12, 13, 14, 15, 16, 17, 18]
    segments = log.segments
    for previous, following in itertools.pairwise(segments):
        assert previous.next_offset == following.base_offset


def test_a_topic_without_compact_is_not_cleaned(tmp_path: Path) -> None:
    """CFG-18: cleanup.policy=delete never runs the cleaner."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, **{"cleanup.policy": "delete"})
    log.append(keyed([(b"k", b"1")], clock))
    log.roll()
    stats = clean_partition(log, clock.time_ms(), force=True)
    assert stats.skipped == "cleanup.policy is delete"


def test_min_compaction_lag_ms_keeps_young_segments_uncleaned(tmp_path: Path) -> None:
    """min.compaction.lag.ms: a segment whose newest record is younger is not cleaned yet."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, **{"min.compaction.lag.ms": "5000"})
    log.append(keyed([(b"k", b"1")], clock))
    log.append(keyed([(b"k", b"2")], clock))
    log.roll()
    log.append(keyed([(b"t", b"v")], clock))
    assert clean_partition(log, clock.time_ms(), force=True).segments_cleaned == ()
    clock.advance(5000)
    assert clean_partition(log, clock.time_ms(), force=True).segments_cleaned == (0,)
    assert [o for o, _ in all_records(log)] == [1, 2]


def test_the_dirty_ratio_decides_when_cleaning_is_due(tmp_path: Path) -> None:
    """min.cleanable.dirty.ratio: after a cleaning, only bytes written since count as dirty."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, **{"min.cleanable.dirty.ratio": "0.5"})
    for value in (b"1", b"2", b"3"):
        log.append(keyed([(b"k", value), (b"pad", b"x" * 200)], clock))
    log.roll()
    log.append(keyed([(b"k", b"4")], clock))
    assert clean_partition(log, clock.time_ms()).segments_cleaned == (0,)
    again = clean_partition(log, clock.time_ms())
    assert again.skipped == "below min.cleanable.dirty.ratio" and again.dirty_ratio == 0.0
    log.roll()  # the small segment written since is dirty, but less than half of the bytes
    log.append(keyed([(b"k", b"5")], clock))
    small = clean_partition(log, clock.time_ms())
    assert small.skipped == "below min.cleanable.dirty.ratio" and 0 < small.dirty_ratio < 0.5
