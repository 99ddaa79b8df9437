"""Planning ranges into tasks, as Spark's KafkaOffsetRangeCalculator does."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offsets.offset_range import OffsetRange, plan_ranges
from txn_log.errors import ConfigError
from txn_log.topic_partition import TopicPartition

A, B, C = (TopicPartition("t", p) for p in range(3))


def sizes(ranges: list[OffsetRange]) -> list[tuple[int, int]]:
    return [(r.topic_partition.partition, r.size) for r in ranges]


def test_no_options_keeps_one_task_per_non_empty_range() -> None:
    ranges = [OffsetRange(A, 0, 10), OffsetRange(B, 5, 5), OffsetRange(C, 7, 9)]
    assert plan_ranges(ranges) == [OffsetRange(A, 0, 10), OffsetRange(C, 7, 9)]


def test_min_partitions_splits_large_ranges_proportionally() -> None:
    # Spark's KafkaOffsetRangeCalculatorSuite: sizes 1, 2, 10000 with minPartitions 3 leave the
    # two small ranges whole and give the big one the remaining task (rounding to one).
    ranges = [OffsetRange(A, 0, 1), OffsetRange(B, 0, 2), OffsetRange(C, 0, 10_000)]
    assert sizes(plan_ranges(ranges, min_partitions=3)) == [(0, 1), (1, 2), (2, 10_000)]
    assert sizes(plan_ranges(ranges, min_partitions=4)) == [(0, 1), (1, 2), (2, 5000), (2, 5000)]


def test_min_partitions_with_equal_ranges() -> None:
    ranges = [OffsetRange(A, 1, 5), OffsetRange(B, 1, 5)]
    planned = plan_ranges(ranges, min_partitions=4)
    assert planned == [
        OffsetRange(A, 1, 3),
        OffsetRange(A, 3, 5),
        OffsetRange(B, 1, 3),
        OffsetRange(B, 3, 5),
    ]


def test_max_records_per_partition_splits_evenly() -> None:
    planned = plan_ranges(
        [OffsetRange(A, 0, 10), OffsetRange(B, 0, 3)], max_records_per_partition=4
    )
    assert sizes(planned) == [(0, 3), (0, 3), (0, 4), (1, 3)]


def test_max_records_then_min_partitions() -> None:
    planned = plan_ranges([OffsetRange(A, 0, 8)], max_records_per_partition=4, min_partitions=4)
    assert sizes(planned) == [(0, 2), (0, 2), (0, 2), (0, 2)]


def test_bad_values_are_refused() -> None:
    with pytest.raises(ConfigError, match="minPartitions must be positive"):
        plan_ranges([], min_partitions=0)
    with pytest.raises(ConfigError, match="maxRecordsPerPartition must be positive"):
        plan_ranges([], max_records_per_partition=-1)


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=6),
    st.one_of(st.none(), st.integers(1, 20)),
    st.one_of(st.none(), st.integers(1, 3000)),
)
def test_plans_cover_every_range_exactly_and_are_deterministic(
    spans: list[tuple[int, int]], min_partitions: int | None, max_records: int | None
) -> None:
    ranges = [OffsetRange(TopicPartition("t", i), s, s + n) for i, (s, n) in enumerate(spans)]
    planned = plan_ranges(
        ranges, min_partitions=min_partitions, max_records_per_partition=max_records
    )
    assert planned == plan_ranges(
        ranges, min_partitions=min_partitions, max_records_per_partition=max_records
    )
    for r in ranges:
        parts = [p for p in planned if p.topic_partition == r.topic_partition]
        if r.size == 0:
            assert parts == []
            continue
        assert parts[0].start == r.start and parts[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(parts))
        assert all(p.size > 0 for p in parts)
        if max_records is not None:
            assert all(p.size <= max_records for p in parts)
