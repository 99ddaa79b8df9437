"""Admission control: how far one micro-batch may advance (Spark's Kafka ``rateLimit`` and
``delayBatch``).

- ``max_rows`` (``maxOffsetsPerTrigger``) is split across partitions in proportion to their lag
  (``end - start``): a partition's share is floored, but a share below one offset is rounded up
  so that small partitions are never starved, and no partition passes its available end.
- ``min_rows`` (``minOffsetsPerTrigger``) holds a batch back until that many offsets are
  available in total, or until ``max_trigger_delay_ms`` (``maxTriggerDelay``, default 15 min)
  has passed since the last batch that ran.

Counts are offsets, not records: markers and aborted records take offsets too. Times are ms.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from txn_log.errors import ConfigError
from txn_log.topic_partition import TopicPartition

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
_DURATION = re.compile(r"(\d+)\s*([a-z]*)")
_UNIT_MS = {
    "": 1,
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


@dataclass(frozen=True)
class AdmissionLimit:
    """What one trigger may read; None means no such limit."""

    max_rows: int | None = None
    min_rows: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS

    def __post_init__(self) -> None:
        if self.max_rows is not None and self.max_rows < 1:
            raise ConfigError(f"maxOffsetsPerTrigger must be positive, got {self.max_rows}")
        if self.min_rows is not None and self.min_rows < 1:
            raise ConfigError(f"minOffsetsPerTrigger must be positive, got {self.min_rows}")
        if (
            self.min_rows is not None
            and self.max_rows is not None
            and self.min_rows > self.max_rows
        ):
            raise ConfigError(
                f"the value of minOffsetsPerTrigger ({self.min_rows}) is higher than "
                f"maxOffsetsPerTrigger ({self.max_rows})"
            )
        if self.max_trigger_delay_ms < 0:
            raise ConfigError(f"maxTriggerDelay must be ≥ 0, got {self.max_trigger_delay_ms} ms")


def available(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> int:
    """Offsets between ``start`` and ``end`` over ``end``'s partitions (new ones count from 0)."""
    return sum(max(e - start.get(tp, 0), 0) for tp, e in end.items())


def rate_limit(
    max_rows: int, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """``end`` limited to about ``max_rows`` offsets past ``start`` (partitions missing from
    ``start`` begin at 0), split in proportion to each partition's lag."""
    lags = {tp: e - start.get(tp, 0) for tp, e in end.items()}
    total = sum(lag for lag in lags.values() if lag > 0)
    if total < 1:
        return dict(end)
    limited: dict[TopicPartition, int] = {}
    for tp, e in end.items():
        if lags[tp] <= 0:
            limited[tp] = e
            continue
        share = max_rows * lags[tp] / total
        take = int(share) if share >= 1 else 1
        limited[tp] = min(e, start.get(tp, 0) + take)
    return limited


def should_delay(
    limit: AdmissionLimit, available_offsets: int, now_ms: int, last_trigger_ms: int
) -> bool:
    """Whether ``min_rows`` holds this trigger back (the caller records ``now_ms`` as the last
    trigger time whenever this returns False)."""
    if limit.min_rows is None:
        return False
    if now_ms - last_trigger_ms >= limit.max_trigger_delay_ms:
        return False
    return available_offsets < limit.min_rows


def parse_duration_ms(option: str, value: str) -> int:
    """Spark's time strings: ``15m``, ``10s``, ``500ms``, ``1h``, ``2d``; a bare number is ms."""
    match = _DURATION.fullmatch(value.strip().lower())
    if match is None or match.group(2) not in _UNIT_MS:
        raise ConfigError(
            f"invalid value {value!r} for option {option!r}; expected a duration such as 500ms, "
            f"10s, 15m, 1h or 2d (units: {', '.join(u for u in _UNIT_MS if u)})"
        )
    return int(match.group(1)) * _UNIT_MS[match.group(2)]
