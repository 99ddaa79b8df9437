"""Offset ranges and their planning into read tasks (Spark's ``KafkaOffsetRangeCalculator``).

A range is ``[start, end)`` of one partition: start inclusive, end exclusive. Its ``size`` counts
offsets, not records: markers and aborted records take offsets too, so it is an upper bound.

Planning drops empty ranges, then splits:

1. with ``max_records_per_partition``, every range into ``ceil(size / max)`` equal parts;
2. with ``min_partitions`` larger than the number of ranges, the large ranges proportionally to
   their size, so that there are about ``min_partitions`` tasks: a range whose share rounds to
   one task stays whole and the rest share the remaining tasks.

Parts are contiguous and cover their range exactly; the last part takes the rounding. The plan
depends only on its inputs, so re-planning a batch gives the same tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from txn_log.errors import ConfigError
from txn_log.topic_partition import TopicPartition


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition."""

    topic_partition: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        """Offsets in the range (an upper bound of the records it yields)."""
        return self.end - self.start

    def split(self, parts: int) -> list[OffsetRange]:
        """``parts`` contiguous ranges covering this one; the last takes the rounding."""
        out: list[OffsetRange] = []
        remaining, start = self.size, self.start
        for part in range(parts):
            this_part = remaining // (parts - part)
            remaining -= this_part
            end = min(start + this_part, self.end)
            out.append(OffsetRange(self.topic_partition, start, end))
            start = end
        return [r for r in out if r.size > 0]

    def __str__(self) -> str:
        return f"{self.topic_partition}[{self.start}, {self.end})"


def plan_ranges(
    ranges: Sequence[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """The read tasks for ``ranges``, in input order (see the module docstring)."""
    if min_partitions is not None and min_partitions < 1:
        raise ConfigError(f"minPartitions must be positive, got {min_partitions}")
    if max_records_per_partition is not None and max_records_per_partition < 1:
        raise ConfigError(
            f"maxRecordsPerPartition must be positive, got {max_records_per_partition}"
        )
    planned = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        planned = [
            part for r in planned for part in r.split(-(-r.size // max_records_per_partition))
        ]
    if min_partitions is not None and min_partitions > len(planned):
        planned = _spread(planned, min_partitions)
    return planned


def _spread(ranges: list[OffsetRange], min_partitions: int) -> list[OffsetRange]:
    total = sum(r.size for r in ranges)
    whole = [_part_count(r.size, total, min_partitions) == 1 for r in ranges]
    whole_size = sum(r.size for r, keep in zip(ranges, whole, strict=True) if keep)
    split_size = total - whole_size
    split_tasks = max(min_partitions - sum(whole), 1)
    out: list[OffsetRange] = []
    for r, keep in zip(ranges, whole, strict=True):
        parts = 1 if keep else _part_count(r.size, split_size, split_tasks)
        out.extend(r.split(parts))
    return out


def _part_count(size: int, total: int, tasks: int) -> int:
    # Spark's Math.round: half up
    return max(int(size / total * tasks + 0.5), 1)
