"""Turn an ``OffsetSpec`` into concrete offsets for the partitions a query reads.

The log is reached through ``OffsetLookup``, so the rules here are tested without a log:

- ``earliest`` / -2 -> the log start offset; ``latest`` / -1 -> the readable end (the LSO under
  read_committed, the log end under read_uncommitted);
- JSON offsets and per-partition timestamps must name exactly the partitions being read
  (Spark's rule: "you must specify all TopicPartitions"), and an offset may not lie past the
  log end, nor an ending one past the readable end (the LSO under read_committed: a read must
  never reach into a transaction still open, B-05);
- a starting timestamp after every record is an error, or the readable end with
  ``NoMatchStrategy.LATEST``; an ending timestamp after every record is the readable end.

An offset below the log start is *not* an error here: it is data loss, reported (or skipped
over with ``failOnDataLoss=false``) when the range is planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from offsets.offset_spec import (
    EARLIEST,
    LATEST,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    NoMatchStrategy,
    OffsetSpec,
    SpecificOffsets,
)
from offsets.partition_offsets import PartitionOffsets
from txn_log.errors import ConfigError
from txn_log.topic_partition import TopicPartition


class OffsetLookup(Protocol):
    """Offsets of one log at one isolation level (implemented over ``txn_log.Consumer``)."""

    def earliest(self, topic_partition: TopicPartition) -> int:
        """The log start offset (inclusive)."""
        ...

    def latest(self, topic_partition: TopicPartition) -> int:
        """The readable end (exclusive): LSO under read_committed, else the log end."""
        ...

    def log_end(self, topic_partition: TopicPartition) -> int:
        """The log end offset (exclusive), whatever the isolation level."""
        ...

    def for_timestamp(self, topic_partition: TopicPartition, timestamp_ms: int) -> int | None:
        """First offset with a timestamp ≥ ``timestamp_ms``; None when every record is older."""
        ...


def resolve(
    spec: OffsetSpec,
    partitions: Sequence[TopicPartition],
    lookup: OffsetLookup,
    *,
    option: str,
    starting: bool,
    no_match: NoMatchStrategy = NoMatchStrategy.ERROR,
) -> PartitionOffsets:
    """Concrete offsets of ``partitions`` for ``spec`` (given by ``option``)."""
    if isinstance(spec, EarliestOffsets):
        return PartitionOffsets.of({tp: lookup.earliest(tp) for tp in partitions})
    if isinstance(spec, LatestOffsets):
        return PartitionOffsets.of({tp: lookup.latest(tp) for tp in partitions})
    if isinstance(spec, SpecificOffsets):
        _check_same_partitions(option, spec.offsets.partitions, partitions)
        return PartitionOffsets.of(
            {
                tp: _specific(option, tp, offset, lookup, starting=starting)
                for tp, offset in spec.offsets.entries
            }
        )
    if isinstance(spec, GlobalTimestamp):
        timestamps = {tp: spec.timestamp_ms for tp in partitions}
    else:
        _check_same_partitions(option, spec.timestamps.partitions, partitions)
        timestamps = spec.timestamps.as_dict()
    return PartitionOffsets.of(
        {
            tp: _by_timestamp(option, tp, ts, lookup, starting=starting, no_match=no_match)
            for tp, ts in timestamps.items()
        }
    )


def _specific(
    option: str, tp: TopicPartition, offset: int, lookup: OffsetLookup, *, starting: bool
) -> int:
    if offset == EARLIEST:
        return lookup.earliest(tp)
    if offset == LATEST:
        return lookup.latest(tp)
    log_end = lookup.log_end(tp)
    if offset > log_end:
        raise ConfigError(
            f"option {option!r}: offset {offset} for {tp} is past the log end offset {log_end}; "
            f"valid offsets are -2 (earliest), -1 (latest) or up to {log_end}"
        )
    if starting:
        return offset
    readable = lookup.latest(tp)
    if offset > readable:  # only read_committed's readable end lies below the log end
        raise ConfigError(
            f"option {option!r}: offset {offset} for {tp} is past its last stable offset "
            f"{readable}: the records from there on belong to a transaction still open, and "
            f"read_committed never reads them; valid ending offsets are -1 (latest, the "
            f"last stable offset) or up to {readable}, or read with "
            "isolation.level=read_uncommitted"
        )
    return offset


def _by_timestamp(
    option: str,
    tp: TopicPartition,
    timestamp_ms: int,
    lookup: OffsetLookup,
    *,
    starting: bool,
    no_match: NoMatchStrategy,
) -> int:
    offset = lookup.for_timestamp(tp, timestamp_ms)
    if offset is not None:
        return offset
    if starting and no_match is NoMatchStrategy.ERROR:
        raise ConfigError(
            f"option {option!r}: no offset matched timestamp {timestamp_ms} in {tp} (every "
            "record is older); set startingOffsetsByTimestampStrategy to 'latest' to start "
            "from the end instead"
        )
    return lookup.latest(tp)


def _check_same_partitions(
    option: str, specified: Sequence[TopicPartition], assigned: Sequence[TopicPartition]
) -> None:
    if set(specified) != set(assigned):
        raise ConfigError(
            f"option {option!r} must give a value for every partition read and no other: use "
            f"-1 for latest, -2 for earliest if you don't care. Specified: "
            f"{_names(specified)}; assigned: {_names(assigned)}"
        )


def _names(partitions: Sequence[TopicPartition]) -> str:
    return "[" + ", ".join(str(tp) for tp in sorted(partitions)) + "]"
