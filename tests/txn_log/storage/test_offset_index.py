"""OffsetIndex: Kafka's 8-byte sparse offset -> position entries, shared between processes."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txn_log.errors import CorruptIndexError, InvalidOffsetError, LogSegmentOffsetOverflowError
from txn_log.storage.offset_index import ENTRY_SIZE, OffsetIndex, OffsetPosition

BASE = 1000


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000001000.index"


def filled(path: Path, pairs: list[tuple[int, int]]) -> OffsetIndex:
    index = OffsetIndex(path, BASE)
    for offset, position in pairs:
        index.append(offset, position)
    return index


PAIRS = [(1004, 0), (1010, 4096), (1020, 8200)]


def test_layout_is_kafkas_relative_offset_and_position(path: Path) -> None:
    filled(path, PAIRS)
    assert ENTRY_SIZE == 8
    assert path.read_bytes() == b"".join(struct.pack(">ii", o - BASE, p) for o, p in PAIRS)


def test_empty_index_sends_every_lookup_to_position_zero(path: Path) -> None:
    index = OffsetIndex(path, BASE)
    assert path.exists() and path.stat().st_size == 0
    assert index.lookup(BASE) == OffsetPosition(BASE, 0)
    assert index.lookup(BASE + 10**6) == OffsetPosition(BASE, 0)
    assert index.entries() == [] and index.last_entry() is None


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (999, (1000, 0)),
        (1000, (1000, 0)),
        (1003, (1000, 0)),
        (1004, (1004, 0)),
        (1009, (1004, 0)),
        (1010, (1010, 4096)),
        (1019, (1010, 4096)),
        (1020, (1020, 8200)),
        (5000, (1020, 8200)),
    ],
)
def test_lookup_returns_greatest_entry_at_or_below(
    path: Path, target: int, expected: tuple[int, int]
) -> None:
    assert filled(path, PAIRS).lookup(target) == OffsetPosition(*expected)


@pytest.mark.parametrize(
    ("offset", "position", "error"),
    [
        (1020, 9000, InvalidOffsetError),  # same offset as the last entry
        (1015, 9000, InvalidOffsetError),  # offset goes back
        (1030, 8200, InvalidOffsetError),  # position does not move forward
        (999, 9000, LogSegmentOffsetOverflowError),  # below the base offset
        (BASE + 2**31, 9000, LogSegmentOffsetOverflowError),  # relative offset beyond int32
        (1030, 2**31, LogSegmentOffsetOverflowError),  # position beyond int32
    ],
)
def test_bad_append_is_refused_and_changes_nothing(
    path: Path, offset: int, position: int, error: type[Exception]
) -> None:
    index = filled(path, PAIRS)
    before = path.read_bytes()
    with pytest.raises(error, match=str(path)):
        index.append(offset, position)
    assert path.read_bytes() == before
    assert index.entries() == [OffsetPosition(o, p) for o, p in PAIRS]


def test_appends_by_another_process_are_seen(path: Path) -> None:
    reader = filled(path, PAIRS[:1])
    writer = OffsetIndex(path, BASE)  # a second object on the same file: another process
    assert reader.lookup(1015) == OffsetPosition(1004, 0)
    writer.append(1010, 4096)
    writer.append(1020, 8200)
    assert reader.lookup(1015) == OffsetPosition(1010, 4096)
    assert reader.last_entry() == OffsetPosition(1020, 8200)
    # and the writer refuses an entry that the other object appended past
    with pytest.raises(InvalidOffsetError):
        reader.append(1020, 9000)


def test_torn_last_entry_is_ignored_then_replaced_by_the_next_append(path: Path) -> None:
    index = filled(path, PAIRS)
    with path.open("ab") as file:
        file.write(struct.pack(">ii", 1030 - BASE, 9000)[:5])  # a writer died mid-entry
    reader = OffsetIndex(path, BASE)
    assert reader.entries() == [OffsetPosition(o, p) for o, p in PAIRS]
    assert reader.lookup(2000) == OffsetPosition(1020, 8200)
    with pytest.raises(CorruptIndexError, match=str(path)):
        reader.sanity_check()
    index.append(1030, 9000)
    assert path.stat().st_size == 4 * ENTRY_SIZE
    assert reader.lookup(2000) == OffsetPosition(1030, 9000)
    reader.sanity_check()


def test_truncate_to_drops_entries_at_or_above(path: Path) -> None:
    index = filled(path, PAIRS)
    other = OffsetIndex(path, BASE)
    assert other.last_entry() == OffsetPosition(1020, 8200)
    index.truncate_to(1011)
    assert index.entries() == [OffsetPosition(1004, 0), OffsetPosition(1010, 4096)]
    assert other.lookup(5000) == OffsetPosition(1010, 4096)  # the shrink is noticed
    index.truncate_to(1010)
    assert index.entries() == [OffsetPosition(1004, 0)]
    index.truncate_to(5000)  # nothing at or above: a no-op
    assert index.entries() == [OffsetPosition(1004, 0)]
    index.truncate_to(0)
    assert index.entries() == [] and path.stat().st_size == 0


def test_rewrite_underneath_is_noticed_even_when_the_file_grows(path: Path) -> None:
    reader = filled(path, [(1004, 0), (1010, 100)])
    writer = OffsetIndex(path, BASE)
    writer.truncate_to(1005)
    writer.append(1007, 50)
    writer.append(1009, 80)  # three entries again, the second one differs
    writer.append(1012, 120)
    assert reader.entries() == [
        OffsetPosition(1004, 0),
        OffsetPosition(1007, 50),
        OffsetPosition(1009, 80),
        OffsetPosition(1012, 120),
    ]


def test_entries_survive_reopening(path: Path) -> None:
    index = filled(path, PAIRS)
    index.flush()
    index.close()
    assert OffsetIndex(path, BASE).entries() == [OffsetPosition(o, p) for o, p in PAIRS]


def test_rebuild_replaces_the_file(path: Path) -> None:
    index = filled(path, PAIRS)
    index.rebuild([OffsetPosition(1002, 10)])
    assert index.entries() == [OffsetPosition(1002, 10)]
    with pytest.raises(InvalidOffsetError):
        index.rebuild([OffsetPosition(1002, 10), OffsetPosition(1001, 20)])


def test_delete_removes_the_file(path: Path) -> None:
    index = filled(path, PAIRS)
    index.delete()
    assert not path.exists()


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">ii", 4, 0) + b"\x00",  # torn
        struct.pack(">ii", -1, 0),  # below the base offset
        struct.pack(">iiii", 4, 0, 4, 100),  # offset does not increase
        struct.pack(">iiii", 4, 100, 8, 100),  # position does not increase
        struct.pack(">iiii", 8, 0, 4, 100),  # offset goes back
    ],
)
def test_sanity_check_names_the_file(path: Path, raw: bytes) -> None:
    path.write_bytes(raw)
    with pytest.raises(CorruptIndexError, match=str(path)):
        OffsetIndex(path, BASE).sanity_check()


def test_sanity_check_accepts_a_valid_index(path: Path) -> None:
    filled(path, PAIRS).sanity_check()
    OffsetIndex(path.with_suffix(".empty"), BASE).sanity_check()


@given(
    deltas=st.lists(
        st.tuples(st.integers(1, 50), st.integers(1, 5000)), max_size=40, unique_by=lambda t: t
    ),
    targets=st.lists(st.integers(BASE - 5, BASE + 3000), max_size=20),
)
def test_lookup_agrees_with_a_linear_model(
    tmp_path_factory: pytest.TempPathFactory,
    deltas: list[tuple[int, int]],
    targets: list[int],
) -> None:
    path = tmp_path_factory.mktemp("idx") / "x.index"
    pairs: list[tuple[int, int]] = []
    offset, position = BASE, 0
    for offset_step, position_step in deltas:
        offset, position = offset + offset_step, position + position_step
        pairs.append((offset, position))
    index = filled(path, pairs)
    for target in targets:
        below = [p for p in pairs if p[0] <= target]
        expected = OffsetPosition(*below[-1]) if below else OffsetPosition(BASE, 0)
        assert index.lookup(target) == expected


def test_a_view_that_never_read_the_file_appends_and_answers_like_one_that_did(
    path: Path,
) -> None:
    """A fresh view (a process opening a segment) peeks at the last entry and appends after
    it without reading the file whole; what it and a view that read everything see is the
    same, a torn last entry is written over, and a file replaced underneath (the cleaner's
    swap) is followed."""
    filled(path, PAIRS)
    with path.open("ab") as file:
        file.write(struct.pack(">ii", 1030 - BASE, 9000)[:3])  # a writer died mid-entry
    fresh = OffsetIndex(path, BASE)
    assert fresh.last_entry() == OffsetPosition(1020, 8200)
    fresh.append(1030, 9000)
    with pytest.raises(InvalidOffsetError):
        fresh.append(1030, 9100)  # the peeked last entry still guards the order
    assert path.stat().st_size == 4 * ENTRY_SIZE
    whole = [OffsetPosition(o, p) for o, p in [*PAIRS, (1030, 9000)]]
    assert fresh.entries() == whole == OffsetIndex(path, BASE).entries()
    assert fresh.lookup(1025) == OffsetPosition(1020, 8200)
    replacement = path.with_suffix(".swap")
    replacement.write_bytes(struct.pack(">ii", 1002 - BASE, 10))
    replacement.rename(path)  # a new inode at the same name
    other = OffsetIndex(path, BASE)
    assert other.last_entry() == OffsetPosition(1002, 10)
    other.append(1040, 20)
    assert fresh.entries() == [OffsetPosition(1002, 10), OffsetPosition(1040, 20)]


def test_a_file_replaced_then_deleted_between_a_readers_stat_and_open_keeps_its_view(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN §3: an index replaced underneath (a new inode, as the cleaner's swap leaves it)
    and deleted a moment later (a later merge, retention) between a reader's ``stat`` and its
    ``open``: the reader raised FileNotFoundError (a reader process of
    test_cleaner_processes died of it). It keeps reading the file it has open, as it does
    when the file is already gone at its ``stat``."""
    reader = filled(path, PAIRS)
    assert reader.lookup(1015) == OffsetPosition(1010, 4096)
    swapped = path.with_suffix(".index.cleaned")
    filled(swapped, [(1002, 10)])
    os.replace(swapped, path)  # a new inode at the path, as the cleaner's swap leaves it
    real_open = os.open

    def deleted_before_open(name: Any, flags: int, *rest: Any) -> int:
        if Path(name) == path and path.exists():
            path.unlink()  # the merge deletes it right after the reader's stat
        return real_open(name, flags, *rest)

    monkeypatch.setattr(os, "open", deleted_before_open)
    assert reader.lookup(1015) == OffsetPosition(1010, 4096)  # the open file's entries
