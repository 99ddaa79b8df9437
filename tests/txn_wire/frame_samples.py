"""Valid requests of every (api_key, version) the server advertises, built from kio's schema,
and the extreme values the frame tests write into their length fields.

``sample_frame`` fills every field of a request: each array gets one element, each string
"orders" (the tests' topic; "scratch", which no test log has, in the requests that delete or
change a topic, ``CHANGES_TOPICS``: the frame fuzz sends these to a server it then asks for
"orders"), bytes two bytes, records a real
batch, integers 0, and every tagged field a value other than its default (so that it is
written). So the frame has a length
field of every kind the schema has, at every depth. ``mutations`` rewrites one length field
(``frame_bounds.field_map``) with each extreme value: what no client library would send.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Iterator
from typing import Any

from kio.index import load_request_schema
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)

from txn_log.record.codec import encode_records
from txn_wire.api_versions import SASL, SUPPORTED
from txn_wire.codec import LENGTH, encode_request
from txn_wire.frame_bounds import Encoding, LengthField, field_map

NOW = 1_700_000_000_000
RECORDS = encode_records([(None, b"fuzz", NOW, ())], now_ms=NOW)
_VALUES: dict[str, Any] = {
    "string": "orders",
    "bytes": b"ab",
    "records": RECORDS,
    "bool": True,
    "uuid": uuid.UUID(int=7),
}


def advertised(*, sasl: bool = True) -> list[tuple[int, int]]:
    """Every (api_key, version) the server advertises (with SASL: its two APIs too)."""
    ranges = {**SUPPORTED, **SASL} if sasl else SUPPORTED
    return [(key, v) for key, (low, high) in sorted(ranges.items()) for v in range(low, high + 1)]


def has_schema(api_key: int, version: int) -> bool:
    """Whether kio has this request (it dropped the versions Kafka 4 removed, KIP-896)."""
    try:
        load_request_schema(api_key, version)
    except Exception:
        return False
    return True


CHANGES_TOPICS = frozenset({20, 21, 33, 37, 44})
"""DeleteTopics, DeleteRecords, AlterConfigs, CreatePartitions, IncrementalAlterConfigs: their
samples name "scratch", so that a fuzzed one cannot change the topic the fuzz then asks for."""


def sample_body(schema: type[Any], string: str = "orders") -> dict[str, Any]:
    """Plain data for every field of kio class ``schema`` (see the module docstring)."""
    body: dict[str, Any] = {}
    for field in dataclasses.fields(schema):
        kind = classify_field(field)
        if isinstance(kind, EntityField | EntityTupleField):
            value: Any = sample_body(kind.type_, string)
        else:
            value = {**_VALUES, "string": string}.get(field.metadata.get("kafka_type", ""), 0)
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            value = [value]
        body[field.name] = value
    return body


def sample_frame(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    """A valid length-prefixed request with every field filled."""
    schema = load_request_schema(api_key, version)
    body = sample_body(schema, "scratch" if api_key in CHANGES_TOPICS else "orders")
    return encode_request(api_key, version, correlation_id, body, "fuzz")


def extremes(encoding: Encoding, left: int) -> list[int]:
    """The values written into a length field with ``left`` bytes after it: null, negative,
    2**31-1, 2**32-2, the largest a 5-byte varint holds, and one more than fits."""
    if encoding is Encoding.COMPACT_LENGTH:  # N as declared; written N+1
        return [-1, -2, 2**31 - 1, 2**32 - 2, 2**35 - 2, left + 1]
    if encoding in (Encoding.TAGGED_COUNT, Encoding.TAGGED_SIZE):  # written as is
        return [2**31 - 1, 2**32 - 2, 2**32 - 1, 2**35 - 1, left + 1]
    if encoding is Encoding.INT16_LENGTH:
        return [-1, -2, -(2**15), 2**15 - 1, *([left + 1] if left < 2**15 - 1 else [])]
    return [-1, -2, -(2**31), 2**31 - 1, left + 1]


def encode_length(encoding: Encoding, value: int) -> bytes:
    """``value`` written as ``encoding`` writes it; a compact -2 is Kafka's reading of the
    varint 0xFFFFFFFF as a signed int32 (the same bytes as 2**32-2 in kio's unsigned view)."""
    if encoding is Encoding.INT16_LENGTH:
        return struct.pack(">h", value)
    if encoding is Encoding.INT32_LENGTH:
        return struct.pack(">i", value)
    raw = value + 1 if encoding is Encoding.COMPACT_LENGTH else value
    return uvarint(raw % 2**35 if raw < 0 else raw)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


OVERLONG_VARINT = b"\x80\x80\x80\x80\x80\x01"  # six bytes: kio reads five at most


@dataclasses.dataclass(frozen=True)
class Mutation:
    api_key: int
    version: int
    field: LengthField
    value: int | None  # None: the overlong varint
    frame: bytes  # length-prefixed

    def describe(self) -> str:
        value = "overlong varint" if self.value is None else str(self.value)
        where = f"{self.field.where} at offset {self.field.offset}"
        return f"api {self.api_key} v{self.version} {where} = {value}"


def mutations(api_key: int, version: int) -> Iterator[Mutation]:
    """The sample request of (api_key, version) with one length field set to each extreme."""
    frame = sample_frame(api_key, version)[LENGTH.size :]
    schema = load_request_schema(api_key, version)
    for found in field_map(schema, frame):
        after = found.offset + found.width
        left = len(frame) - after
        values: list[int | None] = [*extremes(found.encoding, left)]
        if found.encoding not in (Encoding.INT16_LENGTH, Encoding.INT32_LENGTH):
            values.append(None)
        for value in values:
            written = OVERLONG_VARINT if value is None else encode_length(found.encoding, value)
            body = frame[: found.offset] + written + frame[after:]
            yield Mutation(api_key, version, found, value, LENGTH.pack(len(body)) + body)
