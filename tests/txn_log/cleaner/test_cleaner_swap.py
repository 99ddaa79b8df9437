"""The swap protocol's recovery and the reader's defence against mixed versions
(``cleaner_swap``, ``LogSegment._indexed_position``)."""

from __future__ import annotations

from pathlib import Path

from tests.txn_log.cleaner.helpers import keyed, open_compacted
from txn_log.clock import ManualClock
from txn_log.record.batch_header import parse_header
from txn_log.storage import offset_index
from txn_log.storage.cleaner_swap import (
    MERGE_SUFFIX,
    commit_swap,
    recover_cleaner_files,
    write_cleaned,
)
from txn_log.storage.durable_file import temp_path_for
from txn_log.storage.segment import LogSegment


def test_a_committed_swap_of_a_segment_retention_deleted_is_dropped_not_resurrected(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    log.append(keyed([(b"k", b"1")], clock))
    log.roll()
    log.append(keyed([(b"k", b"2")], clock))
    batch = keyed([(b"k", b"1")], clock)
    write_cleaned(tmp_path, 0, [batch], [parse_header(batch)], None, 4096)
    commit_swap(tmp_path, 0)  # the commit point, then the cleaner died
    (tmp_path / "00000000000000000000.log").unlink()  # and retention deleted the segment
    done = recover_cleaner_files(tmp_path)
    assert not (tmp_path / "00000000000000000000.log").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if ".swap" in p.name) == []
    assert done == []


def test_an_index_of_the_other_version_is_never_trusted(tmp_path: Path) -> None:
    """A lock-free reader may pair a segment's log with the index of its cleaned copy (or the
    reverse): an entry whose position does not hold a batch with its offset is ignored."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, **{"index.interval.bytes": "1"})
    for value in range(6):
        log.append(keyed([(b"k%d" % value, b"x" * 40)], clock))
    log.close()
    segment = LogSegment.open(tmp_path, 0, index_interval_bytes=1)
    truth = {offset: segment.find_batch_position(offset) for offset in range(6)}
    # an index as a cleaned copy would have it: same offsets, smaller positions
    wrong = b"".join(offset_index.ENTRY.pack(o, 7 * o) for o in range(1, 6))
    (tmp_path / "00000000000000000000.index").write_bytes(wrong)
    reopened = LogSegment.open(tmp_path, 0, index_interval_bytes=1)
    assert {offset: reopened.find_batch_position(offset) for offset in range(6)} == truth


def test_a_merge_hint_half_written_by_a_dead_cleaner_is_removed(tmp_path: Path) -> None:
    """The hint is written durably (temporary file, rename) under the partition lock: a
    temporary one left by a SIGKILL before its rename goes at the next recovery, with the
    cleaned files it was to vouch for, and the segments stay as they were."""
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    log.append(keyed([(b"k", b"1")], clock))
    log.roll()
    log.append(keyed([(b"k", b"2")], clock))
    log.roll()
    batch = keyed([(b"k", b"2")], clock)
    write_cleaned(tmp_path, 0, [batch], [parse_header(batch)], None, 4096)
    hint = temp_path_for(tmp_path / ("00000000000000000000.log" + MERGE_SUFFIX))
    hint.write_bytes(b"2")
    recover_cleaner_files(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir() if ".merged" in p.name or ".cleaned" in p.name)
    assert left == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".log")) == [
        "00000000000000000000.log", "00000000000000000001.log", "00000000000000000002.log"
    ]  # fmt: skip
