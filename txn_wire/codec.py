"""Kafka requests and responses through ``kio``, and the version-neutral layer over it.

``kio`` (Kafka's JSON message schemas, generated) has one frozen dataclass per API version.
Handlers never see those classes: ``decode_request`` turns a request into plain data (a dict
per struct, a list per array, ints for error codes, milliseconds for kio's timedeltas and
datetimes) and ``encode_response`` fits a handler's plain answer to the class of the request's
version, taking from it only the fields that version has and defaulting the others. Field
names are kio's (Kafka's JSON names in snake_case, ``max_wait`` for ``MaxWaitMs``).

Wire layout of one frame (Kafka's protocol guide)::

    request : int32 length | header (api_key int16, api_version int16, correlation_id int32,
              client_id nullable string, [tagged fields if flexible]) | body
    response: int32 length | header (correlation_id int32, [tagged fields if flexible,
              except ApiVersions, which always answers with header v0]) | body

Stateless; thread-safe (kio's readers and writers are pure and cached).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import types
import typing
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from txn_wire import frame_bounds

REQUEST_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
LENGTH = struct.Struct(">i")  # every frame's length prefix, excluding itself
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

Plain = dict[str, Any]


class MalformedRequestError(Exception):
    """A frame that is not a request this server can read: the connection is closed."""


@dataclass(frozen=True)
class Request:
    """One decoded request: its header fields and its body as plain data."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Plain


def peek_prefix(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame, read before anything else (the
    unsupported-ApiVersions answer needs the correlation id of any version)."""
    if len(frame) < REQUEST_PREFIX.size:
        raise MalformedRequestError(f"a request frame of {len(frame)} bytes has no header")
    api_key, api_version, correlation_id = REQUEST_PREFIX.unpack_from(frame)
    return api_key, api_version, correlation_id


def decode_request(frame: bytes) -> Request:
    """Parse one request frame (without its length prefix); MalformedRequestError if kio
    cannot read it (truncated, garbage, an API or version kio does not know), or if a length,
    count or size in it does not fit in the frame: that is checked first (``frame_bounds``),
    because kio's native readers allocate by a count before reading, and an allocation that
    fails aborts the process."""
    api_key, api_version, correlation_id = peek_prefix(frame)
    try:
        schema = load_request_schema(api_key, api_version)
    except Exception as error:  # kio's UnknownEntity and friends: no such API or version
        raise MalformedRequestError(
            f"api key {api_key} version {api_version}: {type(error).__name__}: {error}"
        ) from error
    try:
        frame_bounds.check_request(schema, frame)
    except (frame_bounds.FrameBoundsError, frame_bounds.SchemaWalkError) as error:
        raise MalformedRequestError(
            f"api key {api_key} version {api_version} refused before decoding: {error}"
        ) from error
    try:
        header, size = entity_reader(schema.__header_schema__)(frame, 0)
        body, _ = entity_reader(schema)(frame, size)
    except Exception as error:  # kio raises several families; all mean "unreadable"
        raise MalformedRequestError(
            f"api key {api_key} version {api_version}: {type(error).__name__}: {error}"
        ) from error
    return Request(api_key, api_version, correlation_id, header.client_id, to_plain(body))


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> bytes:
    """The length-prefixed response frame for ``body`` (plain data) at ``api_version``."""
    schema = load_response_schema(api_key, api_version)
    header_schema = schema.__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_schema)(buffer, header_schema(correlation_id=i32(correlation_id)))
    entity_writer(schema)(buffer, from_plain(schema, body))
    frame = buffer.getbuffer()
    LENGTH.pack_into(frame, 0, len(frame) - LENGTH.size)
    return bytes(frame)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: Mapping[str, Any],
    client_id: str | None = "txn_wire",
) -> bytes:
    """The length-prefixed request frame for ``body`` (plain data): the client side of
    ``decode_request``, for tests and tools."""
    schema = load_request_schema(api_key, api_version)
    header_schema = schema.__header_schema__
    header = header_schema(
        request_api_key=i16(api_key),
        request_api_version=i16(api_version),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_schema)(buffer, header)
    entity_writer(schema)(buffer, from_plain(schema, body))
    frame = buffer.getbuffer()
    LENGTH.pack_into(frame, 0, len(frame) - LENGTH.size)
    return bytes(frame)


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Plain]:
    """(correlation id, body as plain data) of a response frame without its length prefix:
    the client side of ``encode_response``, for tests and tools."""
    schema = load_response_schema(api_key, api_version)
    header, size = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, size)
    return header.correlation_id, to_plain(body)


# --- the version-neutral layer ---------------------------------------------------------------


def to_plain(value: Any) -> Any:
    """kio entity → dicts, lists, ints, strings and bytes (milliseconds for time values)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [to_plain(item) for item in value]
    if isinstance(value, ErrorCode):
        return int(value.value)
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return value


def from_plain(schema: type[Any], data: Mapping[str, Any]) -> Any:
    """Build ``schema`` (a kio entity class) from plain data: the fields ``data`` names are
    converted to kio's types; fields it omits take the schema's default, else a zero value
    (an empty array, 0, "", False, a nil UUID)."""
    values = {}
    for name, (kafka_type, nested, has_default) in _fields(schema).items():
        if name in data:
            values[name] = _convert(kafka_type, nested, data[name])
        elif not has_default:
            values[name] = _zero(kafka_type, nested)
    return schema(**values)


def _convert(kafka_type: str, nested: type[Any] | None, value: Any) -> Any:
    if value is None:
        return None
    if nested is not None:
        if isinstance(value, Mapping):
            return from_plain(nested, value)
        return tuple(from_plain(nested, item) for item in value)
    if kafka_type == "error_code":
        return ErrorCode(value)
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64":
        return _EPOCH + datetime.timedelta(milliseconds=value)
    if isinstance(value, list):
        return tuple(value)
    return value


def _zero(kafka_type: str, nested: type[Any] | None) -> Any:
    if nested is not None or kafka_type == "":
        return ()
    zeros: dict[str, Any] = {
        "error_code": ErrorCode.none,
        "string": "",
        "bool": False,
        "bytes": b"",
        "records": None,
        "uuid": uuid.UUID(int=0),
        "timedelta_i32": datetime.timedelta(0),
        "timedelta_i64": datetime.timedelta(0),
    }
    return zeros.get(kafka_type, 0)


_FIELDS: dict[type[Any], dict[str, tuple[str, type[Any] | None, bool]]] = {}


def _fields(schema: type[Any]) -> dict[str, tuple[str, type[Any] | None, bool]]:
    """name → (kafka_type, nested entity class or None, has a default), per kio class
    (cached; a race computes the same answer twice)."""
    cached = _FIELDS.get(schema)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(schema)
    out = {}
    for f in dataclasses.fields(schema):
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        out[f.name] = (f.metadata.get("kafka_type", ""), _nested(hints[f.name]), has_default)
    _FIELDS[schema] = out
    return out


def _nested(hint: Any) -> type[Any] | None:
    """The entity class inside ``X``, ``X | None`` or ``tuple[X, ...]``, if it is one."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        origin = typing.get_origin(hint)
    if origin is tuple:
        hint = typing.get_args(hint)[0]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    return None
