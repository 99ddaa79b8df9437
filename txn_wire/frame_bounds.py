"""Bounds of a request frame, checked before ``kio`` reads it (issue 24, defect 3).

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
  that ends inside a field.

Invariant: a frame ``check_request`` accepts makes kio allocate at most a few pointers per byte
of the frame; a frame it refuses never reaches kio. The walk is one pass over the structure:
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
mutates exactly those bytes). Plans are compiled once per kio class and cached; the walk is
pure and thread-safe.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
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
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


class FrameBoundsError(ValueError):
    """A request frame whose lengths do not fit in it: the connection is closed unread."""


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


class Op(enum.IntEnum):
    """What one step of a plan reads."""

    FIXED = 0  # Step.size bytes
    COMPACT_BYTES = 1  # compact string, bytes or records
    INT16_STRING = 2  # legacy string
    INT32_BYTES = 3  # legacy bytes or records
    COMPACT_ARRAY = 4  # Step.element each; Step.size: an element's smallest size
    INT32_ARRAY = 5  # legacy array, as COMPACT_ARRAY
    ENTITY = 6  # Step.plan


@dataclass(frozen=True, slots=True)
class Step:
    """One field (or array element) to walk; consecutive fixed fields are merged into one."""

    op: Op
    where: str
    size: int = 0  # FIXED: bytes; arrays: an element's smallest size (at least 1)
    element: Step | None = None
    plan: EntityPlan | None = None

    @property
    def min_size(self) -> int:
        if self.op is Op.FIXED:
            return self.size
        if self.op in (Op.COMPACT_BYTES, Op.COMPACT_ARRAY):
            return 1
        if self.op is Op.INT16_STRING:
            return 2
        if self.op is Op.ENTITY and self.plan is not None:
            return self.plan.min_size
        return 4


@dataclass(frozen=True, slots=True)
class EntityPlan:
    """How to walk one kio class: its non-tagged steps, then (flexible) its tagged fields."""

    name: str
    steps: tuple[Step, ...]
    flexible: bool
    nullable: bool
    tagged: dict[int, Step]
    min_size: int


def check_request(schema: type[Any], frame: bytes) -> int:
    """Walk the header and body of a request ``frame`` (no length prefix) of kio class
    ``schema``; the offset where the body ends. FrameBoundsError if a length does not fit;
    SchemaWalkError if the schema has a field type the walker does not know."""
    pos = _walk_entity(plan_of(schema.__header_schema__), frame, 0, None)
    return _walk_entity(plan_of(schema), frame, pos, None)


def field_map(schema: type[Any], frame: bytes) -> list[LengthField]:
    """Every length, count and size field of a valid request ``frame``, in frame order."""
    found: list[LengthField] = []
    pos = _walk_entity(plan_of(schema.__header_schema__), frame, 0, found)
    _walk_entity(plan_of(schema), frame, pos, found)
    return found


# --- compiling a kio class into a plan -------------------------------------------------------

_PLANS: dict[tuple[type[Any], bool], EntityPlan] = {}


def plan_of(entity: type[Any], nullable: bool = False) -> EntityPlan:
    """The walk plan of a kio class (cached; a race compiles the same plan twice)."""
    plan = _PLANS.get((entity, nullable))
    if plan is None:
        plan = _compile(entity, nullable)
        _PLANS[(entity, nullable)] = plan
    return plan


def _compile(entity: type[Any], nullable: bool) -> EntityPlan:
    flexible = bool(entity.__flexible__)
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(entity):
        where = f"{entity.__name__}.{field.name}"
        tag = get_field_tag(field)
        # kio: the request header's client_id is a legacy string in every header version
        if entity.__name__ == "RequestHeader" and field.name == "client_id":
            step = Step(Op.INT16_STRING, where)
        else:
            step = _field_step(field, flexible, where)
        if tag is not None:
            tagged[int(tag)] = step
        elif step.op is Op.FIXED and steps and steps[-1].op is Op.FIXED:
            merged = f"{steps[-1].where}+{field.name}"
            steps[-1] = Step(Op.FIXED, merged, steps[-1].size + step.size)
        else:
            steps.append(step)
    body_min = sum(s.min_size for s in steps) + (1 if flexible else 0)
    return EntityPlan(
        entity.__name__, tuple(steps), flexible, nullable, tagged, 1 if nullable else body_min
    )


def _field_step(field: dataclasses.Field[Any], flexible: bool, where: str) -> Step:
    """The step kio's ``build_field_schema`` would read for ``field``."""
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField | EntityField):
        nested = plan_of(kind.type_, isinstance(kind, EntityField) and is_optional(field))
        inner = Step(Op.ENTITY, where, plan=nested)
    else:
        inner = _primitive_step(get_schema_field_type(field), flexible, where)
    if not isinstance(kind, EntityTupleField | PrimitiveTupleField):
        return inner
    op = Op.COMPACT_ARRAY if flexible else Op.INT32_ARRAY
    return Step(op, where, size=max(1, inner.min_size), element=inner)


def _primitive_step(kafka_type: str, flexible: bool, where: str) -> Step:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return Step(Op.FIXED, where, size)
    if kafka_type in ("string", "bytes", "records") and flexible:
        return Step(Op.COMPACT_BYTES, where)
    if kafka_type == "string":
        return Step(Op.INT16_STRING, where)
    if kafka_type in ("bytes", "records"):
        return Step(Op.INT32_BYTES, where)
    raise SchemaWalkError(f"{where}: kafka_type {kafka_type!r} has no known bounds")


# --- the walk --------------------------------------------------------------------------------


def _walk_entity(plan: EntityPlan, frame: bytes, pos: int, found: list[LengthField] | None) -> int:
    if plan.nullable:
        _need(frame, pos, 1, plan.name)
        pos += 1
        if frame[pos - 1] == _NULL_MARKER:
            return pos
    for step in plan.steps:
        pos = _walk_step(step, frame, pos, found)
    if plan.flexible:
        pos = _walk_tagged(plan, frame, pos, found)
    return pos


def _walk_step(step: Step, frame: bytes, pos: int, found: list[LengthField] | None) -> int:
    op = step.op
    if op is Op.FIXED:
        return _need(frame, pos, step.size, step.where)
    if op is Op.ENTITY:
        if step.plan is None:
            raise SchemaWalkError(f"{step.where}: an entity step without a plan")
        return _walk_entity(step.plan, frame, pos, found)
    start = pos
    if op is Op.COMPACT_BYTES or op is Op.COMPACT_ARRAY:
        raw, pos = _uvarint(frame, pos, step.where)
        count = raw - 1  # -1: null
        encoding = Encoding.COMPACT_LENGTH
    elif op is Op.INT16_STRING:
        _need(frame, pos, 2, step.where)
        (count,) = _INT16.unpack_from(frame, pos)
        pos += 2
        encoding = Encoding.INT16_LENGTH
    else:
        _need(frame, pos, 4, step.where)
        (count,) = _INT32.unpack_from(frame, pos)
        pos += 4
        encoding = Encoding.INT32_LENGTH
    if found is not None:
        found.append(LengthField(start, pos - start, encoding, step.where))
    if count == -1:
        return pos
    if op is Op.COMPACT_ARRAY or op is Op.INT32_ARRAY:
        return _walk_array(step, frame, pos, count, found)
    return _skip(frame, pos, count, step.where)


def _walk_array(
    step: Step, frame: bytes, pos: int, count: int, found: list[LengthField] | None
) -> int:
    """``count`` elements from ``pos``, once the smallest they could take fits."""
    left = len(frame) - pos
    if count < 0 or count * step.size > left:
        raise FrameBoundsError(
            f"{step.where}: an array of {count} elements (at least {step.size} bytes each) "
            f"at offset {pos}, with {left} bytes left in the frame"
        )
    element = step.element
    if element is None:
        raise SchemaWalkError(f"{step.where}: an array step without an element")
    if element.op is Op.FIXED:  # fixed-size elements: nothing inside to check
        return pos + count * element.size
    for _ in range(count):
        pos = _walk_step(element, frame, pos, found)
    return pos


def _walk_tagged(plan: EntityPlan, frame: bytes, pos: int, found: list[LengthField] | None) -> int:
    start = pos
    count, pos = _uvarint(frame, pos, f"{plan.name} tagged fields")
    if found is not None:
        found.append(LengthField(start, pos - start, Encoding.TAGGED_COUNT, plan.name))
    left = len(frame) - pos
    if count * MIN_TAGGED_FIELD_BYTES > left:
        raise FrameBoundsError(
            f"{plan.name}: {count} tagged fields at offset {pos}, with {left} bytes left"
        )
    for _ in range(count):
        tag, pos = _uvarint(frame, pos, f"{plan.name} tag")
        size_at = pos
        size, pos = _uvarint(frame, pos, f"{plan.name} tag {tag} size")
        where = f"{plan.name} tag {tag}"
        if found is not None:
            found.append(LengthField(size_at, pos - size_at, Encoding.TAGGED_SIZE, where))
        _skip(frame, pos, size, where)  # the size must fit, whatever the field reads
        step = plan.tagged.get(tag)
        # kio reads a known tag's field by its schema (not by its size), an unknown one not
        # at all; Kafka skips unknown tags by their size
        pos = _walk_step(step, frame, pos, found) if step is not None else pos + size
    return pos


def _uvarint(frame: bytes, pos: int, where: str) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at ``pos``, as kio reads one."""
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
