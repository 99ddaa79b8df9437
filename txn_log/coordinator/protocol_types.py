"""Kafka's non-flexible protocol types, as the state log's records use them (C-05, C-06).

All integers are big-endian; ``string`` is an int16 byte length then UTF-8 (-1 = null, only
where nullable); ``array`` is an int32 element count then the elements (-1 = null, only where
nullable). These are Kafka's *non-flexible* encodings: no varints, no tagged fields.

Every record kind of ``__transaction_state`` is built from them: Kafka's
``TransactionLogKey``/``TransactionLogValue`` (``state_log_format``) and txnlog's atomic commit
record (``atomic_commit_format``). ``FieldReader`` decodes strictly: a truncated field, trailing
bytes, an unknown version or status, or a negative length where null is not allowed raise
``CorruptRecordError`` naming the record kind, the field and the byte position. Pure functions.
"""

from __future__ import annotations

import struct

from txn_log.coordinator.transaction_state import TransactionState
from txn_log.errors import ConfigError, CorruptRecordError

MAX_STRING_BYTES = (1 << 15) - 1
"""Kafka's limit for a non-compact string: its length is an int16."""

VERSION = struct.Struct(">h")  # version of a key or value
STRING_LENGTH = struct.Struct(">h")  # byte length of a string, -1 = null
ARRAY_COUNT = struct.Struct(">i")  # element count of an array, -1 = null


def encode_string(value: str, what: str) -> bytes:
    """``value`` as a Kafka string; ConfigError naming ``what`` if it does not fit an int16."""
    raw = value.encode("utf-8")
    if len(raw) > MAX_STRING_BYTES:
        raise ConfigError(f"{what} is {len(raw)} bytes, at most {MAX_STRING_BYTES} fit")
    return STRING_LENGTH.pack(len(raw)) + raw


def encode_nullable_string(value: str | None, what: str) -> bytes:
    """A nullable Kafka string: length -1 for ``None``."""
    return STRING_LENGTH.pack(-1) if value is None else encode_string(value, what)


class FieldReader:
    """A cursor over one key or value; every short read names the record kind and field."""

    def __init__(self, data: bytes, kind: str) -> None:
        self._data = data
        self._kind = kind
        self._pos = 0

    def corrupt(self, problem: str) -> CorruptRecordError:
        return CorruptRecordError(
            f"{self._kind}: {problem} (at byte {self._pos} of {len(self._data)})"
        )

    def unpack(self, layout: struct.Struct, field: str) -> tuple[int, ...]:
        end = self._pos + layout.size
        if end > len(self._data):
            raise self.corrupt(
                f"truncated {field}: needs {layout.size} bytes, {len(self._data) - self._pos} left"
            )
        values = layout.unpack_from(self._data, self._pos)
        self._pos = end
        return tuple(values)

    def string(self, field: str, nullable: bool = False) -> str | None:
        (length,) = self.unpack(STRING_LENGTH, f"{field} length")
        if length < 0:
            if nullable and length == -1:
                return None
            raise self.corrupt(f"{field} has length {length}; it is not nullable")
        if self._pos + length > len(self._data):
            raise self.corrupt(
                f"truncated {field}: needs {length} bytes, {len(self._data) - self._pos} left"
            )
        raw = self._data[self._pos : self._pos + length]
        self._pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.corrupt(f"{field} is not UTF-8: {exc}") from exc

    def required_string(self, field: str) -> str:
        value = self.string(field)
        if value is None:  # unreachable: string() without nullable never returns None
            raise self.corrupt(f"{field} is null")
        return value

    def count(self, field: str, nullable: bool = False) -> int | None:
        (count,) = self.unpack(ARRAY_COUNT, f"{field} count")
        if count == -1 and nullable:
            return None
        if count < 0:
            raise self.corrupt(f"{field} has count {count}; it is not nullable")
        return int(count)

    def version(self, expected: int, what: str) -> None:
        """Read an int16 version; anything but ``expected`` is corrupt (unknown to this build)."""
        (version,) = self.unpack(VERSION, f"{what} version")
        if version != expected:
            raise self.corrupt(f"unknown {what} version {version}; this build reads {expected}")

    def state(self, status: int, allowed: frozenset[TransactionState]) -> TransactionState:
        """The TransactionState with id ``status``, if it is one of ``allowed`` (C-07)."""
        for state in allowed:
            if state == status:
                return state
        raise self.corrupt(
            f"unknown status {status}; expected one of {sorted(int(s) for s in allowed)}"
        )

    def finish(self) -> None:
        if self._pos != len(self._data):
            raise self.corrupt(f"{len(self._data) - self._pos} trailing bytes")
