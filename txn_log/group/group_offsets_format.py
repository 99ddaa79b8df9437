"""Records of ``__consumer_offsets`` (checklist §5): Kafka's own offset-commit layout, so its
tools can read them::

    key   (OffsetCommitKey v1):   version int16 = 1 | group string | topic string | partition int32
    value (OffsetCommitValue v3): version int16 = 3 | offset int64 | leader_epoch int32
                                  | metadata string | commit_timestamp int64
    a null value deletes the offset; strings are int16 length + UTF-8

Decoding returns None for the record kinds Kafka keeps beside offsets in the same topic (group
metadata, key version 2); the store (``group_offsets``) skips them.

Validation comes first (STYLE 3): group ids, offsets and metadata that Kafka's OffsetCommit
would refuse raise typed errors before anything is written or registered with the coordinator
(INVALID_GROUP_ID: empty or over the int16 string's 32,767 UTF-8 bytes; OFFSET_METADATA_TOO_LARGE:
over ``offset.metadata.max.bytes``, Kafka's default 4,096 bytes; offsets int64 ≥ 0). The
encoders validate too, so no caller ever meets a raw ``struct.error``. Pure functions.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from txn_log.errors import (
    ConfigError,
    CorruptRecordError,
    InvalidGroupIdError,
    OffsetMetadataTooLargeError,
    TxnLogError,
)
from txn_log.group.group_metadata import OffsetAndMetadata
from txn_log.topic_config import validate_topic_name
from txn_log.topic_partition import TopicPartition

KEY_VERSION = 1
VALUE_VERSION = 3
MAX_GROUP_ID_BYTES = 32_767  # the protocol's int16-length string
MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes default
MAX_INT32 = (1 << 31) - 1
MAX_INT64 = (1 << 63) - 1
_INT16 = struct.Struct(">h")
_PARTITION = struct.Struct(">i")
_VALUE_FIXED = struct.Struct(
    ">"
    "h"  # version
    "q"  # offset
    "i"  # leader_epoch
)
_TIMESTAMP = struct.Struct(">q")  # commit_timestamp


# --- validation (before anything is written) --------------------------------------------------


def _preview(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "…"


def _utf8(text: str, error: type[TxnLogError], what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as cause:
        raise error(f"{what} {_preview(text)} is not valid UTF-8: {cause.reason}") from None


def validate_group_id(group_id: object, where: str = "") -> str:
    """``group_id`` if Kafka would accept it: a non-empty string of at most 32,767 UTF-8 bytes
    (INVALID_GROUP_ID). ``where`` names the partition in messages, when there is one."""
    suffix = f" (committing {where})" if where else ""
    if not isinstance(group_id, str) or not group_id:
        raise InvalidGroupIdError(f"group id must be a non-empty string, got {group_id!r}{suffix}")
    size = len(_utf8(group_id, InvalidGroupIdError, "group id"))
    if size > MAX_GROUP_ID_BYTES:
        raise InvalidGroupIdError(
            f"group id {_preview(group_id)} is {size} bytes of UTF-8{suffix}; at most "
            f"{MAX_GROUP_ID_BYTES} bytes fit the protocol's int16 string"
        )
    return group_id


def validate_offset(tp: TopicPartition | str, committed: OffsetAndMetadata) -> None:
    """Refuse what Kafka's OffsetCommit refuses, naming ``tp`` (a partition or a description):
    an offset outside int64 ≥ 0, a leader epoch outside -1..int32, metadata that is not a string
    or is over 4,096 UTF-8 bytes (OFFSET_METADATA_TOO_LARGE)."""
    offset, epoch, metadata = committed.offset, committed.leader_epoch, committed.metadata
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ConfigError(f"offset {offset!r} for {tp} must be an integer ≥ 0")
    if offset > MAX_INT64:
        raise ConfigError(f"offset {offset} for {tp} does not fit an int64 (max {MAX_INT64})")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or not -1 <= epoch <= MAX_INT32:
        raise ConfigError(f"leader epoch {epoch!r} for {tp} must be -1 or an int32 ≥ 0")
    if not isinstance(metadata, str):
        raise ConfigError(f"offset metadata for {tp} must be a str, got {type(metadata).__name__}")
    size = len(_utf8(metadata, OffsetMetadataTooLargeError, f"offset metadata for {tp}"))
    if size > MAX_METADATA_BYTES:
        raise OffsetMetadataTooLargeError(
            f"offset metadata for {tp} is {size} bytes of UTF-8; at most {MAX_METADATA_BYTES} "
            "(Kafka's offset.metadata.max.bytes default)"
        )


def _validate_partition(tp: object) -> TopicPartition:
    if not isinstance(tp, TopicPartition):
        raise ConfigError(f"offsets must be keyed by TopicPartition, got {tp!r}")
    validate_topic_name(tp.topic)
    if tp.partition > MAX_INT32:
        raise ConfigError(f"partition {tp.partition} of {tp.topic!r} does not fit an int32")
    return tp


def normalize_offsets(
    offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Accept plain ints or OffsetAndMetadata; refuse, naming the partition, anything Kafka's
    OffsetCommit would refuse (see ``validate_offset``). Changes nothing."""
    if not isinstance(offsets, Mapping):
        raise ConfigError(f"offsets must be a mapping of TopicPartition to offset, got {offsets!r}")
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, committed in offsets.items():
        _validate_partition(tp)
        om = committed if isinstance(committed, OffsetAndMetadata) else OffsetAndMetadata(committed)
        validate_offset(tp, om)
        out[tp] = om
    return out


# --- records ---------------------------------------------------------------------------------


def _string(data: bytes) -> bytes:
    return _INT16.pack(len(data)) + data


def _read_string(buf: bytes, position: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(buf, position)
    position += _INT16.size
    if length < 0 or position + length > len(buf):
        raise CorruptRecordError(f"offset commit record: bad string length {length}")
    return buf[position : position + length].decode(), position + length


def encode_key(group_id: str, topic_partition: TopicPartition) -> bytes:
    """OffsetCommitKey v1; a typed error (never a raw struct.error) for what does not fit."""
    validate_group_id(group_id, str(topic_partition))
    _validate_partition(topic_partition)
    return (
        _INT16.pack(KEY_VERSION)
        + _string(group_id.encode())
        + _string(topic_partition.topic.encode())
        + _PARTITION.pack(topic_partition.partition)
    )


def encode_value(
    committed: OffsetAndMetadata,
    commit_timestamp_ms: int,
    topic_partition: TopicPartition | None = None,
) -> bytes:
    """OffsetCommitValue v3; a typed error naming ``topic_partition`` for what does not fit."""
    validate_offset(topic_partition or "an offset commit", committed)
    return (
        _VALUE_FIXED.pack(VALUE_VERSION, committed.offset, committed.leader_epoch)
        + _string(committed.metadata.encode())
        + _TIMESTAMP.pack(commit_timestamp_ms)
    )


def decode_record(
    key: bytes | None, value: bytes | None
) -> tuple[str, TopicPartition, OffsetAndMetadata | None] | None:
    """(group, partition, offset or None for a deletion); None for other record kinds (Kafka
    keeps group metadata, key version 2, in the same topic)."""
    if key is None or len(key) < _INT16.size:
        raise CorruptRecordError("offset commit record without a key")
    (version,) = _INT16.unpack_from(key, 0)
    if version not in (0, 1):
        return None
    try:
        group_id, position = _read_string(key, _INT16.size)
        topic, position = _read_string(key, position)
        (partition,) = _PARTITION.unpack_from(key, position)
        tp = TopicPartition(topic, partition)
        if value is None:
            return group_id, tp, None
        _, offset, leader_epoch = _VALUE_FIXED.unpack_from(value, 0)
        metadata, _ = _read_string(value, _VALUE_FIXED.size)
    except struct.error as error:
        raise CorruptRecordError(f"truncated offset commit record: {error}") from None
    return group_id, tp, OffsetAndMetadata(offset, metadata, leader_epoch)
