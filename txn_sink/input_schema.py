"""The input columns the sink accepts, checked on the driver like Spark's Kafka sink.

    value       binary or string, required (nullable: a null value is a tombstone)
    key         binary or string (default null: round-robin over partitions)
    topic       string (used when the topic option is not set; a null topic fails the task)
    partition   int (default null: murmur2 of the key, else round-robin)
    headers     array<struct<key: string, value: binary>>
    timestamp   timestamp (default null: the time of the write)

Names match exactly (as in Spark's Kafka sink); other columns are ignored. A wrong type or a
missing required column raises ``ConfigError`` naming the column and the accepted types, before
any task runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from txn_log.errors import ConfigError

HEADERS_TYPE = "array<struct<key:string,value:binary>>"
ACCEPTED_TYPES: dict[str, tuple[str, ...]] = {
    "value": ("binary", "string"),
    "key": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": (HEADERS_TYPE,),
    "timestamp": ("timestamp",),
}
RECORD_COLUMNS = ("value", "key", "timestamp", "headers")
"""Columns that go into the records; ``topic`` and ``partition`` only route them."""


@dataclass(frozen=True)
class InputColumns:
    """Which of the sink's columns the input has (``value`` always)."""

    names: tuple[str, ...]

    @property
    def record_columns(self) -> tuple[str, ...]:
        return tuple(name for name in RECORD_COLUMNS if name in self.names)

    @property
    def has_key(self) -> bool:
        return "key" in self.names

    @property
    def has_topic(self) -> bool:
        return "topic" in self.names

    @property
    def has_partition(self) -> bool:
        return "partition" in self.names


def _accepted(name: str) -> str:
    return " or ".join(ACCEPTED_TYPES[name])


def validate_input_schema(schema: Any, topic_option: str | None) -> InputColumns:
    """The sink's columns of a Spark ``StructType``; raises ConfigError when unusable."""
    fields = {field.name: field.dataType.simpleString() for field in schema.fields}
    listing = ", ".join(f"{name} {kind}" for name, kind in fields.items()) or "(none)"
    if "value" not in fields:
        raise ConfigError(
            f"required column 'value' ({_accepted('value')}) not found; input columns: {listing}"
        )
    for name, accepted in ACCEPTED_TYPES.items():
        if name in fields and fields[name] not in accepted:
            raise ConfigError(
                f"column {name!r} has unsupported type {fields[name]}; {name!r} must be "
                f"{_accepted(name)}"
            )
    if topic_option is None and "topic" not in fields:
        raise ConfigError(
            'no topic to write to: set the topic option (.option("topic", ...)) or add a '
            f"string column 'topic'; input columns: {listing}"
        )
    used = tuple(name for name in ACCEPTED_TYPES if name in fields)
    if topic_option is not None:
        used = tuple(name for name in used if name != "topic")  # the option wins (Spark's rule)
    return InputColumns(used)
