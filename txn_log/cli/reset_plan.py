"""Where ``txnlog groups reset-offsets`` moves a group (kafka-consumer-groups --reset-offsets).

A ``ResetSpec`` is one of Kafka's scenarios, parsed from the command line before the log is
touched: ``--to-earliest``, ``--to-latest``, ``--to-current``, ``--to-offset N``,
``--shift-by N``, ``--to-datetime ISO`` and ``--by-duration PnDTnHnMnS``. ``plan_offsets``
turns it into the new offset of each partition, read from the log as it is now:

- earliest: the log start offset; latest: the high watermark (Kafka's tool asks with its
  default read_uncommitted isolation, so the end of the log, open transactions included);
- a datetime, or now minus a duration: the first offset whose record timestamp is at least
  that time (the time index, KIP-32, T-17), or the high watermark when every record is older
  (Kafka's tool takes the latest offset then);
- ``--shift-by``: the committed offset plus N (a partition without one is refused, as Kafka
  refuses it: there is nothing to shift);
- every target outside ``[log start, high watermark]`` is clamped into it, as Kafka's
  ``checkOffsetsRange`` does, and said so in the plan.

Offsets are positions to read next (exclusive ends of what the group consumed). Pure but for
the reads of the log it is given.
"""

from __future__ import annotations

import datetime
import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from txn_log.cli.common import UsageError
from txn_log.consumer.consumer import Consumer
from txn_log.group.group_metadata import OffsetAndMetadata
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


class Scenario(enum.Enum):
    """Kafka's reset scenarios, by their option name."""

    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    TO_CURRENT = "to-current"
    TO_OFFSET = "to-offset"
    SHIFT_BY = "shift-by"
    TO_DATETIME = "to-datetime"
    BY_DURATION = "by-duration"


@dataclass(frozen=True)
class ResetSpec:
    """A scenario and its argument: an offset (to-offset), a delta (shift-by) or a time in
    milliseconds since the epoch (to-datetime, by-duration: already resolved against now)."""

    scenario: Scenario
    value: int = 0


@dataclass(frozen=True)
class PlannedOffset:
    """One partition's line of the plan; ``clamped`` names the bound a target was moved to."""

    topic_partition: TopicPartition
    current: int | None
    new_offset: int
    clamped: str = ""


_DURATION = re.compile(
    r"^P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration ``PnDTnHnMnS`` (Java's ``Duration.parse``, which Kafka's tool
    uses; any part may be left out) in milliseconds."""
    match = _DURATION.match(text.strip().upper())
    if match is None or text.strip().upper() in ("P", "PT"):
        raise UsageError(
            f"--by-duration {text!r} is not an ISO-8601 duration PnDTnHnMnS (e.g. PT30M, P1DT2H)"
        )
    parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
    seconds = parts["days"] * 86400 + parts["hours"] * 3600 + parts["minutes"] * 60
    return round((seconds + parts["seconds"]) * 1000)


def parse_datetime_ms(text: str) -> int:
    """``YYYY-MM-DDTHH:mm:SS[.sss][zone]`` in milliseconds since the epoch; without a zone,
    the local time zone, as Kafka's tool reads it."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--to-datetime {text!r} is not YYYY-MM-DDTHH:mm:SS.sss (e.g. "
            "2024-05-01T12:00:00.000, or with a zone: 2024-05-01T12:00:00Z)"
        ) from None
    return round(moment.timestamp() * 1000)


def spec_from_args(scenario: str, value: str | None, now_ms: int) -> ResetSpec:
    """The spec of ``--<scenario> [value]`` (the command line names exactly one)."""
    kind = Scenario(scenario)
    if kind in (Scenario.TO_OFFSET, Scenario.SHIFT_BY):
        try:
            number = int(value or "")
        except ValueError:
            raise UsageError(f"--{scenario} takes a whole number, got {value!r}") from None
        if kind is Scenario.TO_OFFSET and number < 0:
            raise UsageError(f"--to-offset {number} must be an offset ≥ 0")
        return ResetSpec(kind, number)
    if kind is Scenario.TO_DATETIME:
        return ResetSpec(kind, parse_datetime_ms(value or ""))
    if kind is Scenario.BY_DURATION:
        return ResetSpec(kind, now_ms - parse_duration_ms(value or ""))
    return ResetSpec(kind)


def plan_offsets(
    log: Log,
    spec: ResetSpec,
    partitions: Iterable[TopicPartition],
    committed: Mapping[TopicPartition, OffsetAndMetadata],
) -> list[PlannedOffset]:
    """The new offset of each partition (module docstring); UsageError for a shift of a
    partition the group has no offset for, or for to-current without one."""
    consumer = log.consumer("read_uncommitted")
    plan = []
    for tp in sorted(set(partitions)):
        start, end = consumer.start_offset(tp), consumer.end_offset(tp)
        current = committed[tp].offset if tp in committed else None
        target = _target(consumer, spec, tp, start, end, current)
        clamped = ""
        if target < start:
            target, clamped = start, f"clamped up to log start {start}"
        elif target > end:
            target, clamped = end, f"clamped down to log end {end}"
        plan.append(PlannedOffset(tp, current, target, clamped))
    return plan


def _target(
    consumer: Consumer,
    spec: ResetSpec,
    tp: TopicPartition,
    start: int,
    end: int,
    current: int | None,
) -> int:
    kind = spec.scenario
    if kind is Scenario.TO_EARLIEST:
        return start
    if kind is Scenario.TO_LATEST:
        return end
    if kind is Scenario.TO_OFFSET:
        return spec.value
    if kind in (Scenario.TO_DATETIME, Scenario.BY_DURATION):
        found = consumer.offset_for_timestamp(tp, spec.value)
        return end if found is None else found
    if current is None:
        raise UsageError(
            f"cannot {kind.value} for {tp}: group has no committed offset there (valid: "
            f"--to-earliest ({start}), --to-latest ({end}) or --to-offset N in [{start}, {end}])"
        )
    return current + spec.value if kind is Scenario.SHIFT_BY else current
