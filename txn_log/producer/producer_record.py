"""``ProducerRecord``: one record as ``Producer.send`` accepts it, checked field by field, and
its exact encoded size (F-09, F-16..F-24); ``RecordMetadata``: where its batch landed.

``check_destination`` and ``validate_record`` turn the caller's fields into a topic, an optional
partition and a ``ProducerRecord``, or raise a typed error naming the partition (or topic) and
the field, and saying what is valid:

    topic          a valid topic name, not an internal topic                  InvalidTopicError
    partition      None or an int                                             InvalidRecordError

    key, value     bytes, bytearray or memoryview (copied to bytes) or None   InvalidRecordError
    timestamp_ms   None (now) or an int, not bool, 0 <= t <= 2**63-1 (Kafka
                   refuses negative timestamps; larger ones overflow int64)   InvalidTimestampError
    headers        None or a sequence of (str key, bytes-like or None value)
                   pairs; keys must encode as UTF-8 (F-24, KIP-82)            InvalidRecordError

Kafka's producer checks the same before a record enters its accumulator (``ProducerRecord``'s
constructor, the serializers, ``ensureValidRecordSize``), so that a bad record never reaches a
batch that other records share.

Sizes are the encoder's (``record.codec``), exactly: a record takes

    varint(body) + body,   body = 1 (attributes) + varlong(timestamp_delta)
                                  + varint(offset_delta) + ``record_body_size(record)``

where the deltas are relative to the first record of its batch (F-17). ``max_compressed_size``
bounds what any codec here may make of a records section, for deciding when a record near
``max.message.bytes`` must be compressed to know whether it fits. Pure functions, thread-safe.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from txn_log.errors import InvalidRecordError, InvalidTimestampError, InvalidTopicError
from txn_log.record.batch_header import Compression
from txn_log.record.varint import INT64_MAX, size_of_varint
from txn_log.topic_config import INTERNAL_TOPICS, validate_topic_name
from txn_log.topic_partition import TopicPartition

Header = tuple[str, "bytes | None"]
BytesLike = bytes | bytearray | memoryview
_BYTES_LIKE = (bytes, bytearray, memoryview)
_PREVIEW = 40
_SMALLEST_BLOCK = 16 * 1024  # no codec here frames blocks smaller than this (deflate, snappy 32K)


class ProducerRecord(NamedTuple):
    """One validated record, in the tuple shape the encoders take (``encode_records``)."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[Header, ...]


@dataclass(frozen=True)
class RecordMetadata:
    """Where one appended batch landed: offsets inclusive."""

    topic_partition: TopicPartition
    base_offset: int
    last_offset: int


def describe_value(value: object) -> str:
    """Type and a short repr, for error messages."""
    text = repr(value)
    if len(text) > _PREVIEW:
        text = text[:_PREVIEW] + "…"
    return f"{type(value).__name__} {text}"


def _bytes_or_none(where: str, field: str, value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, _BYTES_LIKE):
        return bytes(value)  # a copy: later changes to the caller's buffer do not reach the log
    hint = "; encode text first, e.g. .encode('utf-8')" if isinstance(value, str) else ""
    raise InvalidRecordError(
        f"{where}: {field} must be bytes, bytearray, memoryview or None, got "
        f"{describe_value(value)}{hint}"
    )


def validate_timestamp(where: str, timestamp_ms: object) -> int | None:
    """``timestamp_ms`` as an int, None for "now"; InvalidTimestampError outside 0..2**63-1."""
    if timestamp_ms is None:
        return None
    valid = "None (now) or an int of ms since the epoch from 0 to 2**63-1"
    if not isinstance(timestamp_ms, numbers.Integral) or isinstance(timestamp_ms, bool):
        raise InvalidTimestampError(
            f"{where}: timestamp_ms must be {valid}, got {describe_value(timestamp_ms)}"
        )
    value = int(timestamp_ms)
    if value < 0:
        raise InvalidTimestampError(
            f"{where}: timestamp_ms must be {valid}; Kafka refuses negative timestamps, got {value}"
        )
    if value > INT64_MAX:
        raise InvalidTimestampError(
            f"{where}: timestamp_ms must be {valid} (an int64), got {value}"
        )
    return value


def validate_headers(where: str, headers: object) -> tuple[Header, ...]:
    """``headers`` as a tuple of (str, bytes | None) pairs (F-24)."""
    if headers is None:
        return ()
    if isinstance(headers, (str, *_BYTES_LIKE, Mapping)) or not isinstance(headers, Iterable):
        raise InvalidRecordError(
            f"{where}: headers must be a sequence of (str key, bytes or None value) pairs, got "
            f"{describe_value(headers)}"
        )
    checked = []
    for index, header in enumerate(headers):
        if not isinstance(header, (tuple, list)) or len(header) != 2:
            raise InvalidRecordError(
                f"{where}: header {index} must be a (key, value) pair of a str and bytes or "
                f"None, got {describe_value(header)}"
            )
        key, value = header
        if not isinstance(key, str):
            raise InvalidRecordError(
                f"{where}: header {index} key must be a str, got {describe_value(key)}"
            )
        try:
            key.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InvalidRecordError(
                f"{where}: header {index} key {key[:_PREVIEW]!r} is not valid UTF-8 "
                f"({error.reason}); header keys are UTF-8 strings"
            ) from None
        checked.append((key, _bytes_or_none(where, f"header {index} ({key!r}) value", value)))
    return tuple(checked)


def where(topic: str, partition: int | None) -> str:
    """How errors name a record's destination: its partition, or its topic when the key or
    round-robin will pick the partition."""
    return f"topic {topic!r}" if partition is None else f"{topic}-{partition}"


def check_destination(topic: object, partition: object) -> tuple[str, int | None]:
    """``(topic, partition)`` for ``send()``, or InvalidTopicError (a bad name, or an internal
    topic: Kafka refuses client appends to those) or InvalidRecordError (a partition that is
    not None or an int). Whether they exist is the producer's metadata to say."""
    name = validate_topic_name(topic)
    if name in INTERNAL_TOPICS:
        raise InvalidTopicError(
            f"Cannot append to internal topic {name}: only txnlog's coordinators write it; "
            "send to a topic of your own"
        )
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool)):
        raise InvalidRecordError(
            f"topic {name!r}: partition must be an int or None (then the key or round-robin "
            f"picks one), got {describe_value(partition)}"
        )
    return name, partition


def validate_record(
    topic: str,
    partition: int | None,
    key: object,
    value: object,
    timestamp_ms: object,
    headers: object,
    now_ms: int,
) -> ProducerRecord:
    """The record ``send()`` buffers; errors name ``where(topic, partition)`` and the field.

    ``now_ms`` stands in for a None timestamp. Raises InvalidRecordError or
    InvalidTimestampError (both ConfigError) and changes nothing.
    """
    if (
        headers is None
        and (key is None or type(key) is bytes)
        and (value is None or type(value) is bytes)
        and (timestamp_ms is None or (type(timestamp_ms) is int and 0 <= timestamp_ms <= INT64_MAX))
    ):  # the common case, checked in one expression: send() is called once per record
        return ProducerRecord(key, value, now_ms if timestamp_ms is None else timestamp_ms, ())
    place = where(topic, partition)
    return ProducerRecord(
        _bytes_or_none(place, "key", key),
        _bytes_or_none(place, "value", value),
        now_ms if (stamp := validate_timestamp(place, timestamp_ms)) is None else stamp,
        validate_headers(place, headers),
    )


# --- sizes --------------------------------------------------------------------------------------


def _nullable_size(data: bytes | None) -> int:
    return 1 if data is None else size_of_varint(len(data)) + len(data)


def record_body_size(record: ProducerRecord) -> int:
    """Bytes of ``record`` after its length prefix, its two delta varints aside (F-16, F-24)."""
    key, value, _, headers = record
    size = 2 if key is None else 1 + size_of_varint(len(key)) + len(key)  # attributes, key
    size += 1 if value is None else size_of_varint(len(value)) + len(value)
    if not headers:
        return size + 1  # header count 0
    size += size_of_varint(len(headers))
    for header_key, header_value in headers:
        size += _nullable_size(header_key.encode("utf-8")) + _nullable_size(header_value)
    return size


def record_size(body_size: int, offset_delta: int, timestamp_delta: int) -> int:
    """Bytes one record takes in a records section, its length prefix included (F-16, F-23)."""
    body = body_size + size_of_varint(offset_delta) + size_of_varint(timestamp_delta)
    return size_of_varint(body) + body


def records_section_size(records: list[ProducerRecord]) -> int:
    """Uncompressed bytes of ``records`` as one batch's records section (header excluded)."""
    if not records:
        return 0
    first = records[0].timestamp_ms
    return sum(
        record_size(record_body_size(record), index, record.timestamp_ms - first)
        for index, record in enumerate(records)
    )


def max_compressed_size(size: int, codec: Compression) -> int:
    """An upper bound on ``size`` bytes compressed with ``codec`` as ``record.compression``
    writes them: snappy's worst case (32 + n + n/6 per block) is the largest of the five, plus
    each format's framing per block and per stream."""
    if codec is Compression.NONE:
        return size
    return size + size // 6 + 64 * (size // _SMALLEST_BLOCK + 1) + 64
