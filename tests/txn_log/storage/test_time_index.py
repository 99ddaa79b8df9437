"""TimeIndex: Kafka's 12-byte timestamp -> offset entries, monotonic (KIP-32, T-11..T-13)."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txn_log.errors import CorruptIndexError, InvalidOffsetError, LogSegmentOffsetOverflowError
from txn_log.storage.time_index import ENTRY_SIZE, TimeIndex, TimestampOffset

BASE = 500


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000000500.timeindex"


def filled(path: Path, pairs: list[tuple[int, int]]) -> TimeIndex:
    index = TimeIndex(path, BASE)
    for timestamp, offset in pairs:
        index.maybe_append(timestamp, offset)
    return index


PAIRS = [(100, 502), (200, 510), (300, 510), (450, 530)]


def test_layout_is_kafkas_timestamp_and_relative_offset(path: Path) -> None:
    filled(path, PAIRS)
    assert ENTRY_SIZE == 12
    assert path.read_bytes() == b"".join(struct.pack(">qi", t, o - BASE) for t, o in PAIRS)


def test_empty_index_lookup_gives_no_timestamp_and_base_offset(path: Path) -> None:
    index = TimeIndex(path, BASE)
    assert index.lookup(10**12) == TimestampOffset(-1, BASE)
    assert index.entries() == [] and index.last_entry() is None


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (0, (-1, BASE)),
        (99, (-1, BASE)),
        (100, (100, 502)),
        (250, (200, 510)),
        (300, (300, 510)),
        (449, (300, 510)),
        (10**13, (450, 530)),
    ],
)
def test_lookup_returns_greatest_entry_at_or_below(
    path: Path, target: int, expected: tuple[int, int]
) -> None:
    assert filled(path, PAIRS).lookup(target) == TimestampOffset(*expected)


def test_maybe_append_only_moves_forward_in_time(path: Path) -> None:
    index = TimeIndex(path, BASE)
    assert not index.maybe_append(-1, 500)  # NO_TIMESTAMP is never indexed
    assert index.maybe_append(0, 500)
    assert index.maybe_append(100, 502)
    assert not index.maybe_append(100, 503)  # same timestamp: skipped
    assert not index.maybe_append(50, 504)  # older timestamp: skipped, no error
    assert index.maybe_append(101, 504)
    assert index.entries() == [
        TimestampOffset(0, 500),
        TimestampOffset(100, 502),
        TimestampOffset(101, 504),
    ]


@pytest.mark.parametrize(
    ("timestamp", "offset", "error"),
    [
        (1000, 529, InvalidOffsetError),  # offset goes back
        (10, 529, InvalidOffsetError),  # checked even when the timestamp would be skipped
        (1000, 499, LogSegmentOffsetOverflowError),
        (1000, BASE + 2**31, LogSegmentOffsetOverflowError),
    ],
)
def test_bad_offsets_are_refused_and_change_nothing(
    path: Path, timestamp: int, offset: int, error: type[Exception]
) -> None:
    index = filled(path, PAIRS)
    before = path.read_bytes()
    with pytest.raises(error, match=str(path)):
        index.maybe_append(timestamp, offset)
    assert path.read_bytes() == before


def test_appends_by_another_process_are_seen_and_respected(path: Path) -> None:
    reader = filled(path, PAIRS[:1])
    writer = TimeIndex(path, BASE)
    writer.maybe_append(200, 510)
    assert reader.lookup(250) == TimestampOffset(200, 510)
    assert not reader.maybe_append(150, 520)  # the other process's entry is the last one now
    assert reader.entries() == [TimestampOffset(100, 502), TimestampOffset(200, 510)]


def test_torn_last_entry_is_ignored(path: Path) -> None:
    index = filled(path, PAIRS)
    with path.open("ab") as file:
        file.write(struct.pack(">qi", 900, 40)[:7])
    reader = TimeIndex(path, BASE)
    assert reader.lookup(10**13) == TimestampOffset(450, 530)
    with pytest.raises(CorruptIndexError, match="not a multiple"):
        reader.sanity_check()
    assert index.maybe_append(900, 540)
    assert reader.lookup(10**13) == TimestampOffset(900, 540)
    reader.sanity_check()


def test_truncate_to_drops_entries_at_or_above(path: Path) -> None:
    index = filled(path, PAIRS)
    index.truncate_to(511)
    assert index.entries() == [
        TimestampOffset(100, 502),
        TimestampOffset(200, 510),
        TimestampOffset(300, 510),
    ]
    index.truncate_to(510)
    assert index.entries() == [TimestampOffset(100, 502)]
    assert TimeIndex(path, BASE).lookup(10**13) == TimestampOffset(100, 502)


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">qi", 5, 1)[:-1],
        struct.pack(">qiqi", 5, 1, 5, 2),  # timestamp not increasing
        struct.pack(">qiqi", 5, 2, 6, 1),  # offset goes back
        struct.pack(">qi", 5, -1),  # below the base offset
        struct.pack(">qi", -1, 0),  # NO_TIMESTAMP indexed
    ],
)
def test_sanity_check_names_the_file(path: Path, raw: bytes) -> None:
    path.write_bytes(raw)
    with pytest.raises(CorruptIndexError, match=str(path)):
        TimeIndex(path, BASE).sanity_check()


def test_sanity_check_accepts_a_valid_index(path: Path) -> None:
    filled(path, PAIRS).sanity_check()


@given(st.lists(st.tuples(st.integers(-1, 1000), st.integers(0, 3)), max_size=60))
def test_index_only_grows_and_tracks_the_running_maximum(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[int, int]]
) -> None:
    index = TimeIndex(tmp_path_factory.mktemp("ti") / "x.timeindex", BASE)
    offset, running_max, expected = BASE, -1, []
    for timestamp, offset_step in steps:
        offset += offset_step
        appended = index.maybe_append(timestamp, offset)
        assert appended == (timestamp > running_max)
        if appended:
            running_max = timestamp
            expected.append(TimestampOffset(timestamp, offset))
    entries = index.entries()
    assert entries == expected
    assert all(a.timestamp < b.timestamp for a, b in itertools.pairwise(entries))
    index.sanity_check()
