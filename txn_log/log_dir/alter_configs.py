"""Changing a topic's config after creation: Kafka's AlterConfigs and IncrementalAlterConfigs
as pure functions of the topic file's config (DESIGN §2; CFG-18 for cleanup.policy).

A topic file holds the whole config (every key, ``config``) and which keys were set
explicitly (``config_overrides``: given at creation or altered since; Kafka's topic-level
overrides, reported as DYNAMIC_TOPIC_CONFIG by DescribeConfigs, the others as defaults). A topic
written before overrides were recorded counts as overriding the keys whose value differs from
the default. Two forms, as Kafka's ``ConfigurationControlManager``:

- replace (AlterConfigs, ``replace=True``): the keys given become the overrides, with their
  values; every other key goes back to its default. Only SET operations.
- incremental (IncrementalAlterConfigs): each operation changes one key, the others stay:

      SET       the key takes the value (an override)
      DELETE    the key goes back to its default (no longer an override; a key that was not
                one is left as it is)
      APPEND    list keys only (``LIST_KEYS``: cleanup.policy): the values not there yet are
                added to the current list (the default's when not overridden)
      SUBTRACT  list keys only: the values are removed from the current list

A key named twice, an unknown key, a null value for SET/APPEND/SUBTRACT, APPEND or SUBTRACT of
a key that is no list, and any resulting value ``TopicConfig`` refuses raise
InvalidConfigError naming the key (and, for values, the valid ones); nothing is changed
(STYLE 3). The defaults are Kafka's (``TopicConfig()``), and for the internal topics the
engine's own (``INTERNAL_CONFIG`` over them).

Internal topics (decision; Kafka lets an operator alter them): only the keys of
``INTERNAL_ALTERABLE`` may change, the segment and compaction settings; the others are what the
engine depends on and stay as they are: ``cleanup.policy`` compact (C-02: the coordinators
replay them from their log start, and the cleaner bounds them), ``compression.type`` (the
coordinators' own appends are never recompressed), ``max.message.bytes`` (an atomic commit
record of many transactions must fit), the retention keys (never applied to them) and
``message.timestamp.type`` / ``check.expected.offsets``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from txn_log.errors import InvalidConfigError
from txn_log.topic_config import INTERNAL_TOPICS, KEYS, LIST_KEYS, TopicConfig, shown_value

INTERNAL_ALTERABLE = frozenset(
    {
        "segment.bytes",
        "segment.ms",
        "index.interval.bytes",
        "delete.retention.ms",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
    }
)
"""The keys of an internal topic's config that may be altered (see the module docstring)."""


class OpType(enum.IntEnum):
    """An incremental operation, numbered as Kafka's ``AlterConfigOp.OpType`` (the wire's id)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class AlterConfigOp:
    """One change to one key; ``value`` is the text Kafka's clients send (None for DELETE)."""

    key: str
    op_type: OpType = OpType.SET
    value: str | None = None


def set_ops(config: Mapping[str, Any]) -> list[AlterConfigOp]:
    """A mapping of keys to values as SET operations (what AlterConfigs sends)."""
    return [
        AlterConfigOp(key, OpType.SET, None if value is None else str(value))
        for key, value in config.items()
    ]


@dataclass(frozen=True)
class AlteredConfig:
    """A topic's config after an alteration: the whole config and the keys set explicitly."""

    config: TopicConfig
    overrides: frozenset[str]

    def document_fields(self) -> dict[str, Any]:
        """The topic file's fields for it (``config``, ``config_overrides``)."""
        return {"config": self.config.to_mapping(), "config_overrides": sorted(self.overrides)}


def defaults_for(topic: str, internal_config: Mapping[str, str]) -> dict[str, Any]:
    """Every key's default for ``topic``: Kafka's, with ``internal_config`` over them for an
    internal topic (what DELETE and a replace go back to)."""
    defaults = TopicConfig().to_mapping()
    if topic in INTERNAL_TOPICS:
        defaults.update(TopicConfig.from_mapping(internal_config).to_mapping())
    return defaults


def stored_overrides(document: Mapping[str, Any], defaults: Mapping[str, Any]) -> frozenset[str]:
    """The keys a topic file overrides: as recorded, or (a file from before they were) those
    whose value differs from the default."""
    recorded = document.get("config_overrides")
    if isinstance(recorded, list):
        return frozenset(key for key in recorded if key in KEYS)
    config = TopicConfig.from_mapping(document.get("config")).to_mapping()
    return frozenset(key for key, value in config.items() if value != defaults[key])


def alter_config(
    topic: str,
    document: Mapping[str, Any],
    ops: Sequence[AlterConfigOp],
    *,
    replace: bool,
    internal_config: Mapping[str, str],
) -> AlteredConfig:
    """The config of topic file ``document`` after ``ops`` (see the module docstring);
    InvalidConfigError, with nothing changed, if any operation or the result is invalid."""
    _check_ops(topic, ops, replace=replace)
    defaults = defaults_for(topic, internal_config)
    if replace:
        values, overrides = dict(defaults), set()
    else:
        values = TopicConfig.from_mapping(document.get("config")).to_mapping()
        overrides = set(stored_overrides(document, defaults))
    for op in ops:
        if op.op_type is OpType.DELETE:
            values[op.key] = defaults[op.key]
            overrides.discard(op.key)
            continue
        value = str(op.value)
        if op.op_type is not OpType.SET:
            value = list_change(op, str(values[op.key]))
        values[op.key] = value
        overrides.add(op.key)
    return AlteredConfig(TopicConfig.from_mapping(values), frozenset(overrides))


def _check_ops(topic: str, ops: Sequence[AlterConfigOp], *, replace: bool) -> None:
    """What Kafka refuses before looking at any value (its ``ConfigAdminManager`` answers the
    first two INVALID_REQUEST on the wire, before the engine is asked)."""
    _check_distinct(op.key for op in ops)
    for op in ops:
        if not isinstance(op.op_type, OpType):
            raise InvalidConfigError(
                f"unknown operation {shown_value(op.op_type)} for config {shown_value(op.key)}; "
                f"valid operations are {', '.join(t.name for t in OpType)}"
            )
    nulls = [op.key for op in ops if op.value is None and op.op_type is not OpType.DELETE]
    if nulls:
        shown = ",".join(shown_value(key) for key in nulls[:10])
        raise InvalidConfigError(f"Null value not supported for topic configs: {shown}")
    for op in ops:
        if op.key not in KEYS:
            raise InvalidConfigError(
                f"unknown topic config {shown_value(op.key)}; valid keys are "
                f"{', '.join(sorted(KEYS))}"
            )
        if replace and op.op_type is not OpType.SET:
            raise InvalidConfigError(
                f"a replacing alteration only sets keys; {op.op_type.name} of {op.key} is not one"
            )
        if op.op_type in (OpType.APPEND, OpType.SUBTRACT) and op.key not in LIST_KEYS:
            raise InvalidConfigError(
                f"Can't {op.op_type.name} to key {op.key} because its type is not LIST (list "
                f"keys: {', '.join(sorted(LIST_KEYS))})"
            )
        if topic in INTERNAL_TOPICS and op.key not in INTERNAL_ALTERABLE:
            raise InvalidConfigError(
                f"topic {topic!r} is internal to txnlog: its {op.key} stays as the engine set "
                f"it (cleanup.policy compact); only {', '.join(sorted(INTERNAL_ALTERABLE))}"
                " can be altered"
            )


def _check_distinct(keys: Iterable[str]) -> None:
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise InvalidConfigError(f"Error due to duplicate config keys: {shown_value(key)}")
        seen.add(key)


def list_change(op: AlterConfigOp, current: str) -> str:
    """APPEND or SUBTRACT ``op.value``'s items to or from the list ``current`` (Kafka's
    order: the current items, then the new ones not there yet)."""
    items = [item for item in current.split(",") if item]
    given = [item.strip() for item in str(op.value).split(",")]
    if op.op_type is OpType.APPEND:
        return ",".join(items + [item for item in dict.fromkeys(given) if item not in items])
    return ",".join(item for item in items if item not in given)
