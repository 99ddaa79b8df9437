"""Kafka's segment file naming: 20-digit zero-padded base offset + suffix (DESIGN §2)."""

from __future__ import annotations

import pytest

from txn_log.storage.file_names import (
    ALL_SUFFIXES,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
    parse_offset_file_name,
)


def test_names_match_kafka() -> None:
    assert offset_file_name(0, LOG_SUFFIX) == "00000000000000000000.log"
    assert offset_file_name(1234, INDEX_SUFFIX) == "00000000000000001234.index"
    assert offset_file_name(1234, TIME_INDEX_SUFFIX) == "00000000000000001234.timeindex"
    assert offset_file_name(1234, TXN_INDEX_SUFFIX) == "00000000000000001234.txnindex"
    assert offset_file_name(1234, SNAPSHOT_SUFFIX) == "00000000000000001234.snapshot"
    assert offset_file_name(2**63 - 1, LOG_SUFFIX) == "9223372036854775807.log".zfill(24)


@pytest.mark.parametrize("suffix", ALL_SUFFIXES)
@pytest.mark.parametrize("offset", [0, 1, 99, 2**31, 2**63 - 1])
def test_round_trip(offset: int, suffix: str) -> None:
    assert parse_offset_file_name(offset_file_name(offset, suffix)) == (offset, suffix)


def test_lexicographic_order_is_numeric_order() -> None:
    offsets = [0, 9, 10, 99, 100, 12345, 2**40]
    names = [offset_file_name(o, LOG_SUFFIX) for o in reversed(offsets)]
    assert [parse_offset_file_name(n) for n in sorted(names)] == [(o, LOG_SUFFIX) for o in offsets]


@pytest.mark.parametrize(
    "name",
    [
        "0.log",
        "0000000000000000000.log",  # 19 digits
        "000000000000000000000.log",  # 21 digits
        "00000000000000000000.log.deleted",
        "00000000000000000000.cleaned",
        "00000000000000000000.swap",
        "00000000000000000000",
        "99999999999999999999.log",  # beyond int64
        "-0000000000000000001.log",
        "txnlog.json",
    ],
)
def test_foreign_names_are_not_parsed(name: str) -> None:
    assert parse_offset_file_name(name) is None


@pytest.mark.parametrize(("offset", "suffix"), [(-1, LOG_SUFFIX), (2**63, LOG_SUFFIX), (0, ".tmp")])
def test_invalid_names_are_refused(offset: int, suffix: str) -> None:
    with pytest.raises(ValueError, match=r"offset|suffix"):
        offset_file_name(offset, suffix)
