"""Where a read starts or ends, as the user wrote it: Spark's Kafka ``KafkaOffsetRangeLimit``.

    earliest | latest                        every partition at its first / readable end offset
    {"topic":{"0":23,"1":-2,"2":-1}}         per partition: an offset, -2 = earliest, -1 = latest
    a timestamp (ms)                         every partition at its first record with ts >= it
    {"topic":{"0":1700000000000}}            per partition, by timestamp

Precedence is Spark's: a global timestamp, then per-partition timestamps, then offsets (see
``select_spec``). A spec is resolved against the log (``offsets.resolve``) when a query plans
its first batch; until then it is only validated text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from offsets.partition_offsets import (
    OFFSETS_EXAMPLE,
    TIMESTAMPS_EXAMPLE,
    PartitionOffsets,
)
from txn_log.errors import ConfigError

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True)
class EarliestOffsets:
    """Every partition from its log start offset."""


@dataclass(frozen=True)
class LatestOffsets:
    """Every partition from its readable end (the LSO under read_committed)."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Per-partition offsets; -2 (``EARLIEST``) and -1 (``LATEST``) resolve per partition."""

    offsets: PartitionOffsets


@dataclass(frozen=True)
class GlobalTimestamp:
    """Every partition from its first record with a timestamp ≥ ``timestamp_ms`` (KIP-32)."""

    timestamp_ms: int


@dataclass(frozen=True)
class SpecificTimestamps:
    """Per-partition timestamps (ms), resolved through each partition's time index."""

    timestamps: PartitionOffsets


OffsetSpec = (
    EarliestOffsets | LatestOffsets | SpecificOffsets | GlobalTimestamp | SpecificTimestamps
)


class NoMatchStrategy(Enum):
    """``startingOffsetsByTimestampStrategy``: what a starting timestamp past every record
    means (Spark's ``StrategyOnNoMatchStartingOffset``)."""

    ERROR = "error"
    LATEST = "latest"

    @classmethod
    def parse(cls, option: str, value: str) -> NoMatchStrategy:
        for strategy in cls:
            if strategy.value == value.strip().lower():
                return strategy
        raise ConfigError(
            f"invalid value {value!r} for option {option!r}; valid values are error, latest"
        )


def parse_offsets_option(option: str, value: str) -> OffsetSpec:
    """``earliest``, ``latest`` (any case) or per-partition JSON with -2 / -1."""
    text = value.strip()
    if text.lower() == "earliest":
        return EarliestOffsets()
    if text.lower() == "latest":
        return LatestOffsets()
    if not text.startswith("{"):
        raise ConfigError(
            f"invalid value {value!r} for option {option!r}; valid values are earliest, latest, "
            f"or JSON with an offset per partition (-2 = earliest, -1 = latest), e.g. "
            f"{OFFSETS_EXAMPLE}"
        )
    offsets = PartitionOffsets.from_json(
        text, what=f"option {option!r}", example=OFFSETS_EXAMPLE, min_value=EARLIEST
    )
    return SpecificOffsets(offsets)


def parse_timestamp_option(option: str, value: str) -> GlobalTimestamp:
    """A single timestamp in ms since the epoch."""
    try:
        timestamp_ms = int(value.strip())
    except ValueError:
        raise ConfigError(
            f"invalid value {value!r} for option {option!r}; expected a single long value "
            "(ms since the epoch), e.g. 1700000000000"
        ) from None
    if timestamp_ms < 0:
        raise ConfigError(f"option {option!r} must be a timestamp ≥ 0 (ms), got {timestamp_ms}")
    return GlobalTimestamp(timestamp_ms)


def parse_timestamps_option(option: str, value: str) -> SpecificTimestamps:
    """Per-partition timestamps JSON."""
    timestamps = PartitionOffsets.from_json(
        value.strip(), what=f"option {option!r}", example=TIMESTAMPS_EXAMPLE, min_value=0
    )
    return SpecificTimestamps(timestamps)


def select_spec(
    *,
    timestamp: tuple[str, str | None],
    by_timestamp: tuple[str, str | None],
    offsets: tuple[str, str | None],
    default: OffsetSpec,
) -> OffsetSpec:
    """The spec of the first given option in Spark's order of preference; each is
    (option name, value or None)."""
    name, value = timestamp
    if value is not None:
        return parse_timestamp_option(name, value)
    name, value = by_timestamp
    if value is not None:
        return parse_timestamps_option(name, value)
    name, value = offsets
    if value is not None:
        return parse_offsets_option(name, value)
    return default


def describe(spec: OffsetSpec) -> str:
    """A short text for messages."""
    if isinstance(spec, EarliestOffsets):
        return "earliest"
    if isinstance(spec, LatestOffsets):
        return "latest"
    if isinstance(spec, SpecificOffsets):
        return spec.offsets.to_json()
    if isinstance(spec, GlobalTimestamp):
        return f"timestamp {spec.timestamp_ms}"
    return f"timestamps {spec.timestamps.to_json()}"
