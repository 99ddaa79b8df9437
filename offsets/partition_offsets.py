"""``PartitionOffsets``: one offset per topic partition, and its one canonical JSON.

Spark's Kafka source keeps a stream position as ``{"topic": {"partition": offset}}`` (its
``KafkaSourceOffset``); this is the same shape, for the same reason: Spark checkpoints it as text
and compares positions as text. So there is exactly one way to write a position:

    {"orders":{"0":42,"1":7},"payments":{"0":0}}

topics sorted, partition keys sorted as strings (what ``json.dumps(sort_keys=True)`` does), no
spaces. ``to_dict`` builds the dict in that same order, so Spark's own ``json.dumps`` of it
(without ``sort_keys``) gives the same text every time.

Parsing validates the shape and every name and number, and each error shows an example of the
expected shape, as Spark's ``JsonUtils`` does. The same parser reads the ``assign`` option
(``{"topic": [0, 1]}``) and per-partition timestamps.

Offsets are exclusive positions: the offset of the next record to read (Kafka's
``position()``). Spec values may be -2 (earliest) or -1 (latest) where the caller allows them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from txn_log.errors import ConfigError, TxnLogError
from txn_log.topic_config import validate_topic_name
from txn_log.topic_partition import TopicPartition

OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
POSITIONS_EXAMPLE = '{"topicA":{"0":23,"1":42},"topicB":{"0":0}}'
TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000},"topicB":{"0":0}}'
PARTITIONS_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'


@dataclass(frozen=True)
class PartitionOffsets:
    """An immutable map TopicPartition -> offset, sorted by (topic, partition)."""

    entries: tuple[tuple[TopicPartition, int], ...] = ()

    @classmethod
    def of(cls, offsets: Mapping[TopicPartition, int]) -> PartitionOffsets:
        return cls(tuple(sorted(offsets.items())))

    # --- reading ---------------------------------------------------------------------------------

    @cached_property
    def _lookup(self) -> dict[TopicPartition, int]:
        return dict(self.entries)

    def as_dict(self) -> dict[TopicPartition, int]:
        """A new, mutable dict of the entries."""
        return dict(self.entries)

    @property
    def partitions(self) -> tuple[TopicPartition, ...]:
        return tuple(tp for tp, _ in self.entries)

    def get(self, topic_partition: TopicPartition, default: int) -> int:
        return self._lookup.get(topic_partition, default)

    def __getitem__(self, topic_partition: TopicPartition) -> int:
        return self._lookup[topic_partition]

    def __contains__(self, topic_partition: object) -> bool:
        return topic_partition in self._lookup

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self.partitions)

    def __len__(self) -> int:
        return len(self.entries)

    def total(self) -> int:
        return sum(offset for _, offset in self.entries)

    # --- the canonical form ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{"topic": {"0": 42}}`` with keys inserted in sorted (string) order."""
        nested: dict[str, dict[str, int]] = {}
        for tp, offset in self.entries:
            nested.setdefault(tp.topic, {})[str(tp.partition)] = offset
        return {
            topic: {key: nested[topic][key] for key in sorted(nested[topic])}
            for topic in sorted(nested)
        }

    def to_json(self) -> str:
        """The one canonical text of this position (sorted keys, no spaces)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def __str__(self) -> str:
        return self.to_json()

    @classmethod
    def from_dict(
        cls,
        value: object,
        *,
        what: str = "offset",
        example: str = POSITIONS_EXAMPLE,
        min_value: int = 0,
    ) -> PartitionOffsets:
        """Validate a decoded ``{"topic": {"0": 42}}``; ``what`` names it in errors."""
        values = parse_partition_values(value, what=what, example=example, min_value=min_value)
        return cls.of(values)

    @classmethod
    def from_json(
        cls,
        text: str,
        *,
        what: str = "offset",
        example: str = POSITIONS_EXAMPLE,
        min_value: int = 0,
    ) -> PartitionOffsets:
        return cls.from_dict(
            decode_json(text, what=what, example=example),
            what=what,
            example=example,
            min_value=min_value,
        )


def decode_json(text: object, *, what: str, example: str) -> Any:
    if not isinstance(text, str):
        raise ConfigError(f"{what}: expected a JSON string like {example}, got {text!r}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{what}: malformed JSON ({exc.msg} at character {exc.pos}); expected e.g. "
            f"{example}, got {text!r}"
        ) from None


def parse_partition_values(
    value: object, *, what: str, example: str, min_value: int
) -> dict[TopicPartition, int]:
    """``{"topic": {"<partition>": <int ≥ min_value>}}`` -> {TopicPartition: int}."""
    if not isinstance(value, dict):
        raise _shape_error(what, example, value, "the top level must be an object of topics")
    out: dict[TopicPartition, int] = {}
    for topic, per_partition in value.items():
        checked_topic = _topic(topic, what, example)
        if not isinstance(per_partition, dict):
            raise _shape_error(
                what, example, value, f"topic {topic!r} must map to an object of partitions"
            )
        for key, number in per_partition.items():
            tp = TopicPartition(checked_topic, _partition(key, what, example, value))
            if not isinstance(number, int) or isinstance(number, bool) or number < min_value:
                reason = f"{tp} must map to an integer ≥ {min_value}, got {number!r}"
                raise _shape_error(what, example, value, reason)
            out[tp] = number
    return out


def parse_topic_partitions(text: object, *, what: str = "assign") -> tuple[TopicPartition, ...]:
    """``{"topicA": [0, 1]}`` (Spark's ``assign`` option) -> sorted, distinct partitions."""
    value = decode_json(text, what=what, example=PARTITIONS_EXAMPLE)
    if not isinstance(value, dict) or not value:
        raise _shape_error(what, PARTITIONS_EXAMPLE, value, "name at least one topic")
    out: set[TopicPartition] = set()
    for topic, partitions in value.items():
        checked_topic = _topic(topic, what, PARTITIONS_EXAMPLE)
        if not isinstance(partitions, list) or not partitions:
            raise _shape_error(
                what, PARTITIONS_EXAMPLE, value, f"topic {topic!r} must map to a list of partitions"
            )
        for partition in partitions:
            if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
                reason = f"partition {partition!r} is not an integer ≥ 0"
                raise _shape_error(what, PARTITIONS_EXAMPLE, value, reason)
            out.add(TopicPartition(checked_topic, partition))
    return tuple(sorted(out))


def _topic(topic: object, what: str, example: str) -> str:
    try:
        return validate_topic_name(topic)
    except TxnLogError as exc:
        raise ConfigError(f"{what}: {exc}; expected e.g. {example}") from None


def _partition(key: object, what: str, example: str, value: object) -> int:
    if isinstance(key, str) and key.isascii() and key.isdigit():
        return int(key)
    raise _shape_error(what, example, value, f"partition key {key!r} is not a partition number")


def _shape_error(what: str, example: str, value: object, reason: str) -> ConfigError:
    shown = value if isinstance(value, str) else json.dumps(value, default=repr)
    return ConfigError(f"{what}: {reason}; expected e.g. {example}, got {shown}")
