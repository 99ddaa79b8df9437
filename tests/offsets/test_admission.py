"""Admission control: Spark's Kafka rateLimit and delayBatch, and its time strings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offsets.admission import (
    AdmissionLimit,
    available,
    parse_duration_ms,
    rate_limit,
    should_delay,
)
from txn_log.errors import ConfigError
from txn_log.topic_partition import TopicPartition

A, B, C = (TopicPartition("t", p) for p in range(3))


def test_max_rows_split_by_lag() -> None:
    assert rate_limit(10, {A: 0, B: 0}, {A: 100, B: 300}) == {A: 2, B: 7}
    assert rate_limit(1000, {A: 0, B: 0}, {A: 100, B: 300}) == {A: 100, B: 300}


def test_small_partitions_are_not_starved() -> None:
    assert rate_limit(10, {A: 0, B: 0}, {A: 1, B: 10_000}) == {A: 1, B: 9}


def test_new_partitions_begin_at_zero_and_idle_ones_stay() -> None:
    assert rate_limit(10, {A: 50}, {A: 50, B: 20}) == {A: 50, B: 10}
    assert rate_limit(10, {A: 5, B: 5}, {A: 5, B: 5}) == {A: 5, B: 5}


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=8),
    st.integers(1, 10**6),
)
def test_never_passes_the_end_nor_goes_back(lags: list[tuple[int, int]], max_rows: int) -> None:
    start = {TopicPartition("t", i): s for i, (s, _) in enumerate(lags)}
    end = {TopicPartition("t", i): s + n for i, (s, n) in enumerate(lags)}
    limited = rate_limit(max_rows, start, end)
    assert all(start[tp] <= limited[tp] <= end[tp] for tp in end)
    taken = available(start, limited)
    assert taken <= max_rows + len(end)  # shares below one offset round up
    if available(start, end) > 0:
        assert taken > 0


def test_min_rows_delays_until_enough_or_timeout() -> None:
    limit = AdmissionLimit(min_rows=100, max_trigger_delay_ms=1000)
    assert should_delay(limit, available_offsets=99, now_ms=10_500, last_trigger_ms=10_000)
    assert not should_delay(limit, available_offsets=100, now_ms=10_500, last_trigger_ms=10_000)
    assert not should_delay(limit, available_offsets=1, now_ms=11_000, last_trigger_ms=10_000)
    assert not should_delay(AdmissionLimit(), 0, 0, 0)


def test_limit_validation() -> None:
    with pytest.raises(ConfigError, match=r"minOffsetsPerTrigger \(10\) is higher than"):
        AdmissionLimit(max_rows=5, min_rows=10)
    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger must be positive"):
        AdmissionLimit(max_rows=0)


@pytest.mark.parametrize(
    ("text", "ms"),
    [("15m", 900_000), ("10s", 10_000), ("500ms", 500), ("250", 250), ("1h", 3_600_000),
     ("2d", 172_800_000), (" 3 min ", 180_000)],
)  # fmt: skip
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms("maxTriggerDelay", text) == ms


@pytest.mark.parametrize("text", ["", "soon", "5 parsecs", "-1s", "1.5s"])
def test_bad_durations_name_the_option(text: str) -> None:
    with pytest.raises(ConfigError, match=r"maxTriggerDelay.*500ms, 10s, 15m"):
        parse_duration_ms("maxTriggerDelay", text)
