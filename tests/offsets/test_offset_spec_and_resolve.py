"""Starting / ending specs: parsing, Spark's precedence, and resolution against a fake log."""

from __future__ import annotations

from typing import ClassVar

import pytest

from offsets.offset_spec import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    NoMatchStrategy,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    describe,
    parse_offsets_option,
    parse_timestamp_option,
    select_spec,
)
from offsets.partition_offsets import PartitionOffsets
from offsets.resolve import resolve
from txn_log.errors import ConfigError
from txn_log.topic_partition import TopicPartition

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


class FakeLog:
    """Partition a0 holds offsets [10, 50) with LSO 40; a1 holds [0, 5), all stable."""

    starts: ClassVar = {A0: 10, A1: 0}
    lsos: ClassVar = {A0: 40, A1: 5}
    ends: ClassVar = {A0: 50, A1: 5}

    def earliest(self, tp: TopicPartition) -> int:
        return self.starts[tp]

    def latest(self, tp: TopicPartition) -> int:
        return self.lsos[tp]

    def log_end(self, tp: TopicPartition) -> int:
        return self.ends[tp]

    def for_timestamp(self, tp: TopicPartition, timestamp_ms: int) -> int | None:
        # record at offset o has timestamp 1000 + o; capped at the LSO like the consumer
        offset = max(timestamp_ms - 1000, self.starts[tp])
        return None if offset >= self.ends[tp] else min(offset, self.lsos[tp])


def test_parse_words_any_case_and_json() -> None:
    assert parse_offsets_option("startingOffsets", " Earliest ") == EarliestOffsets()
    assert parse_offsets_option("startingOffsets", "LATEST") == LatestOffsets()
    spec = parse_offsets_option("startingOffsets", '{"a": {"0": -2, "1": 3}}')
    assert isinstance(spec, SpecificOffsets) and spec.offsets[A0] == -2
    assert describe(spec) == '{"a":{"0":-2,"1":3}}'


@pytest.mark.parametrize("value", ["first", "", '{"a": {"0": -3}}', '{"a": {"0": 1}'])
def test_bad_offsets_option_names_option_and_valid_values(value: str) -> None:
    with pytest.raises(ConfigError, match="startingOffsets") as info:
        parse_offsets_option("startingOffsets", value)
    assert "earliest" in str(info.value) or "e.g." in str(info.value)


def test_bad_timestamp() -> None:
    with pytest.raises(ConfigError, match=r"startingTimestamp.*long value"):
        parse_timestamp_option("startingTimestamp", "yesterday")
    with pytest.raises(ConfigError, match="≥ 0"):
        parse_timestamp_option("startingTimestamp", "-5")


def test_precedence_is_sparks() -> None:
    def pick(ts: str | None, by_ts: str | None, offsets: str | None) -> object:
        return select_spec(
            timestamp=("startingTimestamp", ts),
            by_timestamp=("startingOffsetsByTimestamp", by_ts),
            offsets=("startingOffsets", offsets),
            default=LatestOffsets(),
        )

    assert pick("5", '{"a": {"0": 1}}', "earliest") == GlobalTimestamp(5)
    assert isinstance(pick(None, '{"a": {"0": 1}}', "earliest"), SpecificTimestamps)
    assert pick(None, None, "earliest") == EarliestOffsets()
    assert pick(None, None, None) == LatestOffsets()


def test_no_match_strategy() -> None:
    assert NoMatchStrategy.parse("x", " LATEST") is NoMatchStrategy.LATEST
    with pytest.raises(ConfigError, match="valid values are error, latest"):
        NoMatchStrategy.parse("startingOffsetsByTimestampStrategy", "skip")


def _resolve(
    spec: OffsetSpec,
    *,
    starting: bool = True,
    no_match: NoMatchStrategy = NoMatchStrategy.ERROR,
) -> dict[TopicPartition, int]:
    resolved = resolve(
        spec, [A0, A1], FakeLog(), option="opt", starting=starting, no_match=no_match
    )
    return resolved.as_dict()


def test_resolve_words_and_specials() -> None:
    assert _resolve(EarliestOffsets()) == {A0: 10, A1: 0}
    assert _resolve(LatestOffsets()) == {A0: 40, A1: 5}
    spec = parse_offsets_option("opt", '{"a": {"0": -1, "1": -2}}')
    assert _resolve(spec) == {A0: 40, A1: 0}
    spec = parse_offsets_option("opt", '{"a": {"0": 45, "1": 2}}')
    assert _resolve(spec) == {A0: 45, A1: 2}  # a start past the LSO, within the log: allowed


def test_an_ending_offset_past_the_last_stable_offset_is_refused() -> None:
    """B-05, B-07: read_committed never reads at or past the LSO; an explicit end there would
    deliver records of a transaction still open (the readable end is the LSO itself)."""
    assert _resolve(parse_offsets_option("opt", '{"a": {"0": 40, "1": 5}}'), starting=False) == {
        A0: 40,
        A1: 5,
    }
    with pytest.raises(ConfigError, match=r"45 for a-0 is past its last stable offset 40.*-1"):
        _resolve(parse_offsets_option("opt", '{"a": {"0": 45, "1": 5}}'), starting=False)


def test_resolve_specific_must_cover_exactly_the_partitions_read() -> None:
    with pytest.raises(ConfigError, match=r"Specified: \[a-0\]; assigned: \[a-0, a-1\]"):
        _resolve(parse_offsets_option("opt", '{"a": {"0": 1}}'))


def test_resolve_offset_past_log_end_is_refused() -> None:
    with pytest.raises(ConfigError, match="past the log end offset 50"):
        _resolve(parse_offsets_option("opt", '{"a": {"0": 51, "1": 0}}'))


def test_resolve_by_timestamp() -> None:
    assert _resolve(GlobalTimestamp(1003)) == {A0: 10, A1: 3}
    with pytest.raises(ConfigError, match="no offset matched timestamp 1009 in a-1"):
        _resolve(GlobalTimestamp(1009))
    assert _resolve(GlobalTimestamp(1009), no_match=NoMatchStrategy.LATEST) == {A0: 10, A1: 5}
    assert _resolve(GlobalTimestamp(1009), starting=False) == {A0: 10, A1: 5}
    spec = SpecificTimestamps(PartitionOffsets.of({A0: 1045, A1: 1001}))
    assert _resolve(spec) == {A0: 40, A1: 1}  # capped at the LSO
    with pytest.raises(ConfigError, match="every partition read"):
        _resolve(SpecificTimestamps(PartitionOffsets.of({A0: 1045})))
