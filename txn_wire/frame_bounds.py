"""Bounds of a request frame, checked before ``kio`` reads it (DESIGN §1, what stays at the edge).

Why: ``kio``'s native readers size an array from its count before reading any element (Rust's
``Vec::with_capacity(count)``). A 23-byte Metadata request whose compact array declares
2**32-2 topics asks for 34 GB; the allocator aborts the process and Python cannot catch an
abort. So no length from the wire may reach kio before it is checked against the bytes
actually in the frame. ``check_request`` walks a frame once, along the kio schema of its
(api_key, api_version), reading exactly what kio's readers read and where they read it, and
refuses (``FrameBoundsError``):

- an array count whose elements, at their smallest (``EntityPlan.min_size``, at least one
  byte), cannot fit in the bytes left in the frame;
- a string, bytes or records length longer than the bytes left;
- a tagged-field section whose count cannot fit (each field takes at least two bytes), or a
  tagged field whose size is longer than the bytes left;
- a negative length or count other than -1 (null), a varint longer than 5 bytes, a frame
  that ends inside a field;
- a null array where the schema has no null (kio reads one anyway; Kafka refuses it).

Invariant: a frame ``check_request`` accepts makes kio allocate no more than a pointer and an
object per byte of the frame (every array element takes a byte at least); a frame it refuses
never reaches kio. The walk is one pass over the structure:
``records`` are skipped by their length, never walked (Produce's hot path costs per field, not
per byte). It is no validator beyond bounds: a bad boolean, bad UTF-8 or an unknown tag is
left for kio to refuse.

Layout walked (Kafka's protocol guide; KIP-482 for flexible versions; as kio 0.6 reads it)::

    frame    : header | body                     (trailing bytes are not looked at, as kio)
    header   : request_api_key int16 | request_api_version int16 | correlation_id int32 |
               client_id legacy nullable string (int16 length, in every header version) |
               [tagged fields: header v2]
    entity   : [int8 marker, only for a nullable struct (KIP-893): -1 = null, then nothing] |
               fields in declaration order | [tagged fields: flexible versions]
    tagged   : count uvarint | count x (tag uvarint | size uvarint | the field, read by its
               schema; an unknown tag's size bytes are skipped)
    fixed    : int8 uint8 bool 1 | int16 uint16 error_code 2 | int32 uint32 timedelta_i32 4 |
               int64 uint64 float64 timedelta_i64 datetime_i64 8 | uuid 16
    string, bytes, records   flexible: uvarint N+1 (0 = null) | N bytes
    string                   legacy  : int16 N (-1 = null) | N bytes
    bytes, records           legacy  : int32 N (-1 = null) | N bytes
    array                    flexible: uvarint N+1 (0 = null) | N elements
    array                    legacy  : int32 N (-1 = null) | N elements
    uvarint  : 7 bits a byte, least significant first, high bit = more; at most 5 bytes

``field_map`` reports where every length, count and size field of a frame is (the frame fuzz
mutates exactly those bytes). Each kio class is compiled once into closures (a fixed run of
fields is one bounds check, a one-byte varint one comparison) and cached; the walk is pure
and thread-safe.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.serial._introspect import (  # kio's own reading of its schema classes: the walk
    EntityField,  # must interpret every field exactly as kio's readers do
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

MAX_UVARINT_BYTES = 5  # kio reads 5 bytes at most (35 bits); a 6th is an error, as here
MIN_TAGGED_FIELD_BYTES = 2  # a tag and a size, one byte each at least
_NULL_MARKER = 0xFF  # int8 -1: a null nullable struct
_INT16 = struct.Struct(">h")  # a legacy string's length
_INT32 = struct.Struct(">i")  # a legacy bytes' length or a legacy array's count

_FIXED_SIZES = {
    **dict.fromkeys(("int8", "uint8", "bool"), 1),
    **dict.fromkeys(("int16", "uint16", "error_code"), 2),
    **dict.fromkeys(("int32", "uint32", "timedelta_i32"), 4),
    **dict.fromkeys(("int64", "uint64", "float64", "timedelta_i64", "datetime_i64"), 8),
    "uuid": 16,
}


class FrameBoundsError(ValueError):
    """A request frame whose lengths do not fit in it (or a null array where the schema has
    none): the connection is closed, the request unread."""


class SchemaWalkError(TypeError):
    """A kio schema field this walker does not know how to bound (a kio upgrade added a
    type): requests of that schema are refused rather than handed to kio unchecked."""


class Encoding(enum.Enum):
    """How a length, count or size field is written (what ``field_map`` reports)."""

    COMPACT_LENGTH = "uvarint N+1"  # compact string/bytes/array: 0 is null
    INT16_LENGTH = "int16 N"  # legacy string: -1 is null
    INT32_LENGTH = "int32 N"  # legacy bytes and arrays: -1 is null
    TAGGED_COUNT = "uvarint N"  # number of tagged fields of a flexible struct
    TAGGED_SIZE = "uvarint size"  # size of one tagged field


@dataclass(frozen=True)
class LengthField:
    """One length, count or size field of a frame: ``offset`` (from the frame's first byte,
    after its length prefix) and ``width`` in bytes of the value as written, and where it is
    (``Entity.field``)."""

    offset: int
    width: int
    encoding: Encoding
    where: str


Found = list[LengthField] | None
"""Where ``field_map`` collects the length fields it passes; None on the hot path."""
Walk = Callable[[bytes, int, Found], int]
"""Walks one field (or struct) of ``frame`` from ``pos``; returns the position after it."""


@dataclass(frozen=True, slots=True)
class EntityPlan:
    """A kio class compiled for the walk: ``walk`` reads one struct of it (its fields in
    declaration order, then, if flexible, its tagged fields); ``min_size`` is the fewest
    bytes one can take (an array count is checked against it)."""

    name: str
    walk: Walk
    min_size: int


def check_request(schema: type[Any], frame: bytes) -> int:
    """Walk the header and body of a request ``frame`` (no length prefix) of kio class
    ``schema``; the offset where the body ends. FrameBoundsError if a length does not fit;
    SchemaWalkError if the schema has a field type the walker does not know."""
    pos = plan_of(schema.__header_schema__).walk(frame, 0, None)
    return plan_of(schema).walk(frame, pos, None)


def field_map(schema: type[Any], frame: bytes) -> list[LengthField]:
    """Every length, count and size field of a valid request ``frame``, in frame order."""
    found: list[LengthField] = []
    pos = plan_of(schema.__header_schema__).walk(frame, 0, found)
    plan_of(schema).walk(frame, pos, found)
    return found


# --- compiling a kio class into walks --------------------------------------------------------

_PLANS: dict[tuple[type[Any], bool], EntityPlan] = {}


def plan_of(entity: type[Any], nullable: bool = False) -> EntityPlan:
    """The compiled walk of a kio class (cached; a race compiles the same plan twice)."""
    plan = _PLANS.get((entity, nullable))
    if plan is None:
        plan = _compile(entity, nullable)
        _PLANS[(entity, nullable)] = plan
    return plan


def _compile(entity: type[Any], nullable: bool) -> EntityPlan:
    name = entity.__name__
    flexible = bool(entity.__flexible__)
    walks: list[Walk] = []
    tagged: dict[int, Walk] = {}
    fixed = 0  # fixed-size fields not yet emitted: consecutive ones are walked as one
    min_size = 0
    for field in dataclasses.fields(entity):
        where = f"{name}.{field.name}"
        # kio: the request header's client_id is a legacy string in every header version
        if name == "RequestHeader" and field.name == "client_id":
            walk, size, is_fixed = _int16_string(where), 2, False
        else:
            walk, size, is_fixed = _field_walk(field, flexible, where)
        tag = get_field_tag(field)
        if tag is not None:
            tagged[int(tag)] = walk
            continue
        min_size += size
        if is_fixed:
            fixed += size
            continue
        if fixed:
            walks.append(_fixed(fixed, name))
            fixed = 0
        walks.append(walk)
    if fixed:
        walks.append(_fixed(fixed, name))
    if flexible:
        walks.append(_tagged_fields(name, tagged))
        min_size += 1
    walk = _struct(tuple(walks))
    if nullable:  # KIP-893: an int8 marker first; -1 and nothing more is null
        return EntityPlan(name, _nullable_struct(name, walk), 1)
    return EntityPlan(name, walk, min_size)


def _field_walk(
    field: dataclasses.Field[Any], flexible: bool, where: str
) -> tuple[Walk, int, bool]:
    """(walk, smallest size, whether always that size) of what kio's ``build_field_schema``
    would read for ``field``."""
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField | EntityField):
        nested = plan_of(kind.type_, isinstance(kind, EntityField) and is_optional(field))
        inner, inner_size, inner_fixed = nested.walk, nested.min_size, False
    else:
        inner, inner_size, inner_fixed = _primitive_walk(
            get_schema_field_type(field), flexible, where
        )
    if not isinstance(kind, EntityTupleField | PrimitiveTupleField):
        return inner, inner_size, inner_fixed
    # kio reads null for any array; Kafka's generated readers refuse it for an array whose
    # schema has no null ("non-nullable field ... was serialized as null"), and handlers rely
    # on that
    element = _Element(inner, max(1, inner_size), inner_size if inner_fixed else None)
    if flexible:
        return _compact_array(where, element, is_optional(field)), 1, False
    return _int32_array(where, element, is_optional(field)), 4, False


def _primitive_walk(kafka_type: str, flexible: bool, where: str) -> tuple[Walk, int, bool]:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return _fixed(size, where), size, True
    if kafka_type in ("string", "bytes", "records") and flexible:
        return _compact_bytes(where), 1, False
    if kafka_type == "string":
        return _int16_string(where), 2, False
    if kafka_type in ("bytes", "records"):
        return _legacy_bytes(where, _INT32, Encoding.INT32_LENGTH), 4, False
    raise SchemaWalkError(f"{where}: kafka_type {kafka_type!r} has no known bounds")


@dataclass(frozen=True, slots=True)
class _Element:
    """An array's element: its walk, its smallest size (at least 1), and its size if fixed."""

    walk: Walk
    min_size: int
    fixed_size: int | None


# --- the walks -------------------------------------------------------------------------------


def _struct(walks: tuple[Walk, ...]) -> Walk:
    def walk(frame: bytes, pos: int, found: Found) -> int:
        for field_walk in walks:
            pos = field_walk(frame, pos, found)
        return pos

    return walk


def _nullable_struct(name: str, inner: Walk) -> Walk:
    def walk(frame: bytes, pos: int, found: Found) -> int:
        _need(frame, pos, 1, name)
        if frame[pos] == _NULL_MARKER:
            return pos + 1
        return inner(frame, pos + 1, found)

    return walk


def _fixed(size: int, where: str) -> Walk:
    def walk(frame: bytes, pos: int, found: Found) -> int:
        return _need(frame, pos, size, where)

    return walk


def _compact_bytes(where: str) -> Walk:
    """A compact string, bytes or records: skipped by its length, never looked into."""

    def walk(frame: bytes, pos: int, found: Found) -> int:
        start = pos
        raw, pos = _uvarint(frame, pos, where)
        if found is not None:
            found.append(LengthField(start, pos - start, Encoding.COMPACT_LENGTH, where))
        return pos if raw == 0 else _skip(frame, pos, raw - 1, where)

    return walk


def _legacy_bytes(where: str, prefix: struct.Struct, encoding: Encoding) -> Walk:
    """A legacy string (int16 length) or bytes / records (int32 length), -1 for null:
    skipped by its length, never looked into."""
    width = prefix.size

    def walk(frame: bytes, pos: int, found: Found) -> int:
        _need(frame, pos, width, where)
        if found is not None:
            found.append(LengthField(pos, width, encoding, where))
        (length,) = prefix.unpack_from(frame, pos)
        return pos + width if length == -1 else _skip(frame, pos + width, length, where)

    return walk


def _int16_string(where: str) -> Walk:
    return _legacy_bytes(where, _INT16, Encoding.INT16_LENGTH)


def _compact_array(where: str, element: _Element, nullable: bool) -> Walk:
    def walk(frame: bytes, pos: int, found: Found) -> int:
        start = pos
        raw, pos = _uvarint(frame, pos, where)
        if found is not None:
            found.append(LengthField(start, pos - start, Encoding.COMPACT_LENGTH, where))
        if raw == 0:
            return _null_array(pos, nullable, start, where)
        return _elements(frame, pos, raw - 1, element, found, where)

    return walk


def _int32_array(where: str, element: _Element, nullable: bool) -> Walk:
    def walk(frame: bytes, pos: int, found: Found) -> int:
        _need(frame, pos, 4, where)
        if found is not None:
            found.append(LengthField(pos, 4, Encoding.INT32_LENGTH, where))
        (count,) = _INT32.unpack_from(frame, pos)
        if count == -1:
            return _null_array(pos + 4, nullable, pos, where)
        return _elements(frame, pos + 4, count, element, found, where)

    return walk


def _null_array(pos: int, nullable: bool, start: int, where: str) -> int:
    if not nullable:
        raise FrameBoundsError(f"{where}: null at offset {start}, not a nullable array")
    return pos


def _elements(
    frame: bytes, pos: int, count: int, element: _Element, found: Found, where: str
) -> int:
    """``count`` elements from ``pos``, once the smallest they could take fits."""
    left = len(frame) - pos
    if count < 0 or count * element.min_size > left:
        raise FrameBoundsError(
            f"{where}: an array of {count} elements (at least {element.min_size} bytes each) "
            f"at offset {pos}, with {left} bytes left in the frame"
        )
    if element.fixed_size is not None:  # nothing inside to check
        return pos + count * element.fixed_size
    element_walk = element.walk
    for _ in range(count):
        pos = element_walk(frame, pos, found)
    return pos


def _tagged_fields(name: str, tagged: dict[int, Walk]) -> Walk:
    """A flexible struct's tagged fields: a count, then each tag, size and field."""

    where = f"{name} tagged fields"

    def walk(frame: bytes, pos: int, found: Found) -> int:
        start = pos
        count, pos = _uvarint(frame, pos, where)
        if found is not None:
            found.append(LengthField(start, pos - start, Encoding.TAGGED_COUNT, name))
        if count == 0:  # the usual case
            return pos
        left = len(frame) - pos
        if count * MIN_TAGGED_FIELD_BYTES > left:
            raise FrameBoundsError(
                f"{name}: {count} tagged fields at offset {pos}, with {left} bytes left"
            )
        for _ in range(count):
            pos = _tagged_field(frame, pos, found, name, tagged)
        return pos

    return walk


def _tagged_field(frame: bytes, pos: int, found: Found, name: str, tagged: dict[int, Walk]) -> int:
    tag, pos = _uvarint(frame, pos, f"{name} tag")
    where = f"{name} tag {tag}"
    size_at = pos
    size, pos = _uvarint(frame, pos, f"{where} size")
    if found is not None:
        found.append(LengthField(size_at, pos - size_at, Encoding.TAGGED_SIZE, where))
    _skip(frame, pos, size, where)  # the size must fit, whatever the field reads
    field_walk = tagged.get(tag)
    # kio reads a known tag's field by its schema (not by its size) and refuses an unknown
    # tag; Kafka skips an unknown tag by its size
    return pos + size if field_walk is None else field_walk(frame, pos, found)


def _uvarint(frame: bytes, pos: int, where: str) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at ``pos``, as kio reads one."""
    if pos < len(frame) and frame[pos] < 0x80:  # one byte: nearly every length on the wire
        return frame[pos], pos + 1
    value = 0
    for shift in range(0, 7 * MAX_UVARINT_BYTES, 7):
        if pos >= len(frame):
            raise FrameBoundsError(f"{where}: the frame ends inside a varint at offset {pos}")
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    raise FrameBoundsError(f"{where}: a varint longer than {MAX_UVARINT_BYTES} bytes")


def _need(frame: bytes, pos: int, size: int, where: str) -> int:
    """The position after ``size`` fixed bytes at ``pos``, if the frame has them."""
    end = pos + size
    if end > len(frame):
        raise FrameBoundsError(
            f"{where}: {size} bytes at offset {pos}, with {len(frame) - pos} bytes left"
        )
    return end


def _skip(frame: bytes, pos: int, length: int, where: str) -> int:
    """The position after a ``length``-byte string, bytes or tagged field at ``pos``."""
    left = len(frame) - pos
    if length < 0 or length > left:
        raise FrameBoundsError(
            f"{where}: a length of {length} at offset {pos}, with {left} bytes left"
        )
    return pos + length
