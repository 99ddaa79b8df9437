"""TransactionIndex: the 34-byte aborted-transaction entries of a segment (B-09..B-12)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txn_log.errors import CorruptIndexError, InvalidOffsetError
from txn_log.storage.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
)

# The four transactions of Kafka's TransactionIndexTest: (producer id, first, last, LSO).
KAFKA_TXNS = [
    AbortedTxn(0, 0, 10, 11),
    AbortedTxn(1, 5, 15, 13),
    AbortedTxn(2, 18, 35, 25),
    AbortedTxn(3, 32, 50, 40),
]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000000000.txnindex"


def filled(path: Path, txns: list[AbortedTxn], base_offset: int = 0) -> TransactionIndex:
    index = TransactionIndex(path, base_offset)
    for txn in txns:
        index.append(txn)
    return index


def test_file_is_created_lazily_at_the_first_append_b09(path: Path) -> None:
    index = TransactionIndex(path, 0)
    assert not path.exists()
    assert index.entries() == []
    assert index.collect_aborted_txns(0, 100) == TxnIndexSearchResult([], False)
    index.sanity_check()
    index.flush()
    index.truncate_to(0)
    assert not path.exists()
    index.append(KAFKA_TXNS[0])
    assert path.exists()


def test_layout_is_34_bytes_version_0_b10(path: Path) -> None:
    filled(path, KAFKA_TXNS[:2])
    assert ENTRY_SIZE == 34
    assert path.read_bytes() == b"".join(
        struct.pack(">hqqqq", 0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
        for t in KAFKA_TXNS[:2]
    )


@pytest.mark.parametrize(
    ("fetch_offset", "upper_bound", "expected", "complete"),
    [
        (0, 32, KAFKA_TXNS[:3], True),  # entry 3 starts at 32: outside, but its LSO 40 ≥ 32
        (0, 33, KAFKA_TXNS, True),
        (11, 12, KAFKA_TXNS[1:2], True),  # entry 0 ends at 10; entry 1's LSO 13 ≥ 12 stops
        (16, 18, [], True),  # nothing intersects, entry 2's LSO 25 ≥ 18 stops the search
        (10, 11, KAFKA_TXNS[:1], True),  # last offset 10 counts; LSO 11 ≥ 11 stops at entry 0
        (51, 60, [], False),  # nothing intersects and no LSO reaches 60: look further
        (36, 100, KAFKA_TXNS[3:], False),
    ],
)
def test_collect_aborted_txns_follows_kafka_b12(
    path: Path,
    fetch_offset: int,
    upper_bound: int,
    expected: list[AbortedTxn],
    complete: bool,
) -> None:
    index = filled(path, KAFKA_TXNS)
    result = index.collect_aborted_txns(fetch_offset, upper_bound)
    assert result == TxnIndexSearchResult(expected, complete)


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 30), st.integers(1, 20), st.integers(-5, 40)),
        max_size=12,
    ),
    st.integers(0, 300),
    st.integers(1, 300),
)
def test_collect_agrees_with_a_brute_force_model(
    tmp_path_factory: pytest.TempPathFactory,
    specs: list[tuple[int, int, int, int]],
    fetch_offset: int,
    length: int,
) -> None:
    path = tmp_path_factory.mktemp("txn") / "x.txnindex"
    txns, last = [], 0
    for producer_id, span, gap, lso_shift in specs:
        last += gap
        txns.append(AbortedTxn(producer_id, max(last - span, 0), last, max(last + lso_shift, 0)))
    index = filled(path, txns)
    upper = fetch_offset + length
    stop = next((n for n, t in enumerate(txns) if t.last_stable_offset >= upper), None)
    scanned = txns if stop is None else txns[: stop + 1]
    expected = [t for t in scanned if t.last_offset >= fetch_offset and t.first_offset < upper]
    assert index.collect_aborted_txns(fetch_offset, upper) == TxnIndexSearchResult(
        expected, stop is not None
    )


@pytest.mark.parametrize(
    "txn",
    [
        AbortedTxn(9, 40, 50, 60),  # same last offset as the last entry
        AbortedTxn(9, 20, 45, 60),  # last offset goes back
        AbortedTxn(9, 70, 60, 80),  # first offset after last offset
    ],
)
def test_bad_append_is_refused_and_changes_nothing(path: Path, txn: AbortedTxn) -> None:
    index = filled(path, KAFKA_TXNS)
    before = path.read_bytes()
    with pytest.raises(InvalidOffsetError, match=str(path)):
        index.append(txn)
    assert path.read_bytes() == before


def test_last_offset_below_the_segment_is_refused(path: Path) -> None:
    index = TransactionIndex(path, 100)
    with pytest.raises(InvalidOffsetError, match="base offset 100"):
        index.append(AbortedTxn(1, 50, 99, 99))
    assert not path.exists()
    index.append(AbortedTxn(1, 50, 100, 100))  # may start in an earlier segment
    assert index.entries() == [AbortedTxn(1, 50, 100, 100)]


def test_entries_appended_by_another_process_are_seen(path: Path) -> None:
    reader = TransactionIndex(path, 0)
    assert reader.entries() == []  # file absent
    writer = filled(path, KAFKA_TXNS[:2])  # another process creates it
    assert reader.entries() == KAFKA_TXNS[:2]
    writer.append(KAFKA_TXNS[2])
    assert reader.collect_aborted_txns(16, 20) == TxnIndexSearchResult([KAFKA_TXNS[2]], True)
    with pytest.raises(InvalidOffsetError):
        reader.append(KAFKA_TXNS[1])  # the other process's entry is the last one now


def test_torn_last_entry_is_ignored(path: Path) -> None:
    index = filled(path, KAFKA_TXNS[:3])
    with path.open("ab") as file:
        file.write(struct.pack(">hqqqq", 0, 3, 32, 50, 40)[:20])
    reader = TransactionIndex(path, 0)
    assert reader.entries() == KAFKA_TXNS[:3]
    with pytest.raises(CorruptIndexError, match="not a multiple"):
        reader.sanity_check()
    index.append(KAFKA_TXNS[3])
    assert reader.entries() == KAFKA_TXNS
    reader.sanity_check()


def test_truncate_to_drops_entries_whose_marker_is_gone(path: Path) -> None:
    index = filled(path, KAFKA_TXNS)
    index.truncate_to(36)
    assert index.entries() == KAFKA_TXNS[:3]
    index.truncate_to(35)
    assert index.entries() == KAFKA_TXNS[:2]
    assert TransactionIndex(path, 0).entries() == KAFKA_TXNS[:2]
    index.truncate_to(0)
    assert index.entries() == []


def test_delete_removes_the_file(path: Path) -> None:
    index = filled(path, KAFKA_TXNS)
    index.delete()
    assert not path.exists()
    index.delete()  # already gone: fine


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (struct.pack(">hqqqq", 1, 0, 0, 10, 11), "version 1"),
        (struct.pack(">hqqqq", 0, 0, 0, 10, 11)[:-1], "not a multiple"),
        (struct.pack(">hqqqq", 0, 0, 0, 4, 11), "entry 0"),  # last offset below base 5
        (struct.pack(">hqqqq", 0, 0, 9, 8, 11), "entry 0"),  # first > last
        (struct.pack(">hqqqqhqqqq", 0, 0, 5, 8, 11, 0, 1, 5, 8, 11), "entry 1"),
    ],
)
def test_sanity_check_names_the_file(path: Path, raw: bytes, message: str) -> None:
    path.write_bytes(raw)
    with pytest.raises(CorruptIndexError, match=message) as info:
        TransactionIndex(path, 5).sanity_check()
    assert str(path) in str(info.value)
