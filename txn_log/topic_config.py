"""Topic names and topic configs, validated before anything is written (DESIGN §2).

Names follow Kafka's rule: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``, so a
name can never reach outside the log directory. Config keys and defaults are Kafka's own.

``cleanup.policy`` (CFG-18, C-02) is ``delete`` (retention by age and size, the default),
``compact`` (the log cleaner keeps the newest record per key, ``storage.log_cleaner``) or both
(``compact,delete``, in either order). ``delete.retention.ms`` is how long tombstones and
transaction markers outlive what they delete (B-18), ``min.cleanable.dirty.ratio`` the share of
uncleaned bytes that makes the cleaner run, ``min.compaction.lag.ms`` how old a segment's newest
record must be before it is cleaned, ``max.compaction.lag.ms`` how long dirty data may wait:
past it the cleaner cleans the partition whatever its dirty ratio, and the active segment rolls
(by time, even without appends) so that the data can be cleaned (KIP-354).

``compression.type`` is the codec the topic stores its batches in, with Kafka's values:
``producer`` (the default: each batch as its producer compressed it), ``uncompressed``,
``gzip``, ``snappy``, ``lz4`` or ``zstd``; a client batch in another codec is compressed again
on append (``storage.log_validator``, Kafka's LogValidator).

``flush.messages`` and ``flush.ms`` are Kafka's bounds on how many appended messages, and how
many milliseconds since the first of them, may wait in the page cache before the log forces
them to disk (LONG, at least 1 and 0, default Long.MAX_VALUE: no bound). The engine fsyncs
(``fdatasync``) every append before it acknowledges it, whatever they say, so each bound a
topic sets is always met: the value is validated, stored and reported, and no setting makes
the engine flush less often.

Every value here may change after the topic is created (``LogManager.alter_topic_config``);
a process applies the new one at its next operation on the topic (``topic_config_watch``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from txn_log.errors import InvalidConfigError, InvalidTopicError
from txn_log.record.batch_header import Compression, TimestampType

MAX_TOPIC_NAME_LENGTH = 249
LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC})


def validate_topic_name(name: object) -> str:
    """Return ``name`` if Kafka would accept it as a topic name, else raise InvalidTopicError."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"topic name must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidTopicError("topic name is empty; use 1 to 249 characters of [a-zA-Z0-9._-]")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name {name!r} is not allowed ('.' and '..' are reserved)")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name of {len(name)} characters is too long; the maximum is "
            f"{MAX_TOPIC_NAME_LENGTH}"
        )
    if not LEGAL_TOPIC_NAME.fullmatch(name):
        bad = sorted({c for c in name if not LEGAL_TOPIC_NAME.fullmatch(c)})
        raise InvalidTopicError(
            f"topic name {name!r} contains {''.join(bad)!r}; only ASCII letters, digits, "
            "'.', '_' and '-' are allowed"
        )
    return name


def check_client_append(topic: str) -> None:
    """Raise InvalidTopicError if ``topic`` is internal: clients never write those (C-03).

    Kafka's ``ReplicaManager`` answers INVALID_TOPIC_EXCEPTION (17) "Cannot append to internal
    topic" to a produce request for them; only the coordinators' own appends (origin
    COORDINATOR) reach them, so every record there decodes for every process.
    """
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(
            f"Cannot append to internal topic {topic!r}: {TRANSACTION_STATE_TOPIC} and "
            f"{CONSUMER_OFFSETS_TOPIC} are written only by the transaction and group "
            "coordinators; produce to a topic of your own"
        )


@dataclass(frozen=True)
class TopicConfig:
    """Per-topic settings under Kafka's config names (see ``KEYS``); times in ms, sizes in bytes."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    retention_ms: int = 7 * 24 * 3600 * 1000
    max_message_bytes: int = 1_048_588
    index_interval_bytes: int = 4096
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    check_expected_offsets: bool = False  # KIP-27, CFG-15: off unless configured
    cleanup_policy: str = "delete"  # normalised: "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1  # Kafka's Long.MAX_VALUE: no deadline
    compression_type: str = "producer"  # one of COMPRESSION_TYPES
    flush_messages: int = 2**63 - 1  # Kafka's Long.MAX_VALUE; met: every append is fsynced
    flush_ms: int = 2**63 - 1  # likewise (see the module docstring)

    def target_compression(self, source: Compression) -> Compression:
        """The codec a batch compressed with ``source`` is stored in (Kafka's
        ``BrokerCompressionType.targetCompression``): ``source`` itself under ``producer``."""
        if self.compression_type == "producer":
            return source
        if self.compression_type == "uncompressed":
            return Compression.NONE
        return Compression[self.compression_type.upper()]

    @property
    def compact(self) -> bool:
        """Whether the log cleaner compacts this topic (cleanup.policy names compact)."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def max_segment_ms(self) -> int:
        """How old a segment's first batch may be before the segment rolls: ``segment.ms``,
        or ``max.compaction.lag.ms`` when smaller on a compacted topic (Kafka's LogConfig.
        maxSegmentMs, KIP-354), so dirty data leaves the active segment in time to be cleaned."""
        if self.compact:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def delete(self) -> bool:
        """Whether retention deletes old segments (cleanup.policy names delete)."""
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None) -> TopicConfig:
        """Parse Kafka-named keys (``segment.bytes`` …); unknown keys and bad values raise."""
        values: dict[str, Any] = {}
        for key, raw in (config or {}).items():
            if key not in KEYS:
                raise InvalidConfigError(
                    f"unknown topic config {shown_value(key)}; valid keys are "
                    f"{', '.join(sorted(KEYS))}"
                )
            values[KEYS[key]] = _parse_value(key, raw)
        return cls(**values)

    def to_mapping(self) -> dict[str, Any]:
        """Kafka-named keys to JSON-friendly values (the inverse of ``from_mapping``)."""
        by_field = asdict(self)
        out: dict[str, Any] = {}
        for key, name in KEYS.items():
            value = by_field[name]
            out[key] = _TIMESTAMP_TYPE_NAMES[value] if name == "message_timestamp_type" else value
        return out


KEYS = {f.name.replace("_", "."): f.name for f in fields(TopicConfig)}
_TIMESTAMP_TYPE_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}
_MINIMUMS = {
    "segment.bytes": 14,
    "segment.ms": 1,
    "retention.bytes": -1,
    "retention.ms": -1,
    "max.message.bytes": 0,
    "index.interval.bytes": 0,
    "delete.retention.ms": 0,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 1,
    "flush.messages": 1,
    "flush.ms": 0,
}
_INT32_KEYS = frozenset({"segment.bytes", "max.message.bytes", "index.interval.bytes"})
"""Keys Kafka types INT (int32); the other integers are LONG (int64)."""
CLEANUP_POLICIES = ("delete", "compact")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
"""Kafka's ``compression.type`` values for a topic (``BrokerCompressionType``); ``none`` is a
producer setting, not a topic's."""
LIST_KEYS = frozenset({"cleanup.policy"})
"""Keys whose value is a comma-separated list (Kafka's ``ConfigDef.Type.LIST``): the ones an
incremental alteration may APPEND to or SUBTRACT from."""


def config_value_text(value: object) -> str:
    """A config value as Kafka's tools and DescribeConfigs write it (``true``, not Python's
    ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_cleanup_policy(raw: Any) -> str:
    """Kafka's ``cleanup.policy`` list, normalised to ``delete``, ``compact`` or
    ``compact,delete``; InvalidConfigError naming the valid values otherwise."""
    parts = [part.strip().lower() for part in str(raw).split(",")]
    if not parts or any(part not in CLEANUP_POLICIES for part in parts):
        raise InvalidConfigError(
            f"invalid value {shown_value(raw)} for topic config 'cleanup.policy'; valid values are "
            "delete, compact, compact,delete"
        )
    return ",".join(policy for policy in ("compact", "delete") if policy in parts)


def _parse_ratio(key: str, raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise InvalidConfigError(
            f"invalid value {shown_value(raw)} for topic config {key!r}; expected a number "
            "from 0 to 1"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise InvalidConfigError(
            f"invalid value {value} for topic config {key!r}; valid values are 0 to 1"
        )
    return value


def _parse_value(key: str, raw: Any) -> Any:
    if key == "cleanup.policy":
        return parse_cleanup_policy(raw)
    if key == "min.cleanable.dirty.ratio":
        return _parse_ratio(key, raw)
    if key == "compression.type":
        text = str(raw).strip().lower()
        if text not in COMPRESSION_TYPES:
            raise InvalidConfigError(
                f"invalid value {shown_value(raw)} for topic config 'compression.type'; valid "
                f"values are {', '.join(COMPRESSION_TYPES)}"
            )
        return text
    if key == "message.timestamp.type":
        for ts_type, name in _TIMESTAMP_TYPE_NAMES.items():
            if str(raw) == name:
                return ts_type
        raise InvalidConfigError(
            f"invalid value {shown_value(raw)} for topic config {key!r}; valid values are "
            "CreateTime, LogAppendTime"
        )
    if key == "check.expected.offsets":
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise InvalidConfigError(
                f"invalid value {shown_value(raw)} for topic config {key!r}; valid values are "
                "true, false"
            )
        return text == "true"
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InvalidConfigError(
            f"invalid value {shown_value(raw)} for topic config {key!r}; expected an integer"
        ) from None
    if value < _MINIMUMS[key]:
        raise InvalidConfigError(
            f"invalid value {value} for topic config {key!r}; the minimum is {_MINIMUMS[key]}"
        )
    maximum = 2**31 - 1 if key in _INT32_KEYS else 2**63 - 1
    if value > maximum:
        raise InvalidConfigError(
            f"invalid value {shown_value(raw)} for topic config {key!r}; the maximum is {maximum}"
        )
    return value


def shown_value(raw: Any) -> str:
    """``raw`` as an error message shows it: its repr, cut short (a key or value from the
    wire may be megabytes)."""
    text = repr(raw)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"
