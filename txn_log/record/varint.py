"""Zigzag varints and varlongs as Kafka's record format v2 uses them (F-19).

Every integer inside a v2 record (length, timestamp delta, offset delta, key/value lengths,
header counts and lengths) is a protobuf base-128 varint of the *zigzag* transform of the
signed value, least significant group first, bit 7 set on every byte but the last:

    zigzag(v)  = (v << 1) ^ (v >> 63)            0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, ...
    unzigzag(u) = (u >> 1) ^ -(u & 1)

Decision (F-19 [CONFLICT]): the seeds call some of these fields unsigned; Kafka as shipped
zigzags all of them, and so do we, so that lengths of -1 (null key, value or header value)
fit in one byte and files stay readable by Kafka's tools.

Widths: a varint carries an int32 and takes at most 5 bytes; a varlong carries an int64 and
takes at most 10. Decoders reject longer encodings and values outside the type's range with
``CorruptRecordError`` (Kafka: "Varint is too long").

The scalar functions serve small paths (control records, headers, the producer's record
sizes); the ``*_array`` functions encode or decode a whole int64 column with numpy and no
per-element Python code. numpy is imported lazily so that importing this module stays cheap.
"""

from __future__ import annotations

import functools
from typing import Any

from txn_log.errors import CorruptRecordError

Buffer = bytes | bytearray | memoryview

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_U32_MASK = (1 << 32) - 1
_U64_MASK = (1 << 64) - 1


def zigzag(value: int) -> int:
    """The unsigned zigzag image of a signed int64."""
    return ((value << 1) ^ (value >> 63)) & _U64_MASK


def unzigzag(raw: int) -> int:
    """The signed value of an unsigned zigzag integer."""
    return (raw >> 1) ^ -(raw & 1)


_ONE_BYTE = tuple(bytes((value,)) for value in range(0x80))  # the encodings of 0..127


def _encode_unsigned(raw: int) -> bytes:
    if raw < 0x80:  # most lengths, deltas and counts of small records: one byte, no loop
        return _ONE_BYTE[raw]
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of an int32 (1-5 bytes); ``ValueError`` outside the int32 range."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} is outside int32 [{INT32_MIN}, {INT32_MAX}]")
    return _encode_unsigned(zigzag(value) & _U32_MASK)


def encode_varlong(value: int) -> bytes:
    """Zigzag varlong of an int64 (1-10 bytes); ``ValueError`` outside the int64 range."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong value {value} is outside int64 [{INT64_MIN}, {INT64_MAX}]")
    return _encode_unsigned(zigzag(value))


def size_of_varint(value: int) -> int:
    """Bytes ``encode_varint(value)`` or ``encode_varlong(value)`` takes, in O(1): 7 bits a
    byte of the zigzag image (the producer sizes every record with it, F-23)."""
    return (((value << 1) ^ (value >> 63)).bit_length() + 6) // 7 or 1


def _decode_unsigned(buf: Buffer, position: int, max_bytes: int) -> tuple[int, int]:
    if 0 <= position < len(buf) and buf[position] < 0x80:  # one byte, the common case
        return buf[position], position + 1
    view = memoryview(buf)
    raw = 0
    shift = 0
    for index in range(position, min(position + max_bytes, len(view))):
        byte = view[index]
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return raw, index + 1
        shift += 7
    if position + max_bytes > len(view):
        raise CorruptRecordError(f"truncated varint at position {position}")
    raise CorruptRecordError(
        f"varint at position {position} is longer than the {max_bytes} bytes allowed"
    )


def decode_varint(buf: Buffer, position: int = 0) -> tuple[int, int]:
    """``(int32 value, position after it)``; ``CorruptRecordError`` if truncated or too long."""
    raw, end = _decode_unsigned(buf, position, MAX_VARINT_BYTES)
    if raw > _U32_MASK:
        raise CorruptRecordError(f"varint at position {position} overflows int32")
    return unzigzag(raw), end


def decode_varlong(buf: Buffer, position: int = 0) -> tuple[int, int]:
    """``(int64 value, position after it)``; ``CorruptRecordError`` if truncated or too long."""
    raw, end = _decode_unsigned(buf, position, MAX_VARLONG_BYTES)
    if raw > _U64_MASK:
        raise CorruptRecordError(f"varlong at position {position} overflows int64")
    return unzigzag(raw), end


# --- numpy, whole columns at once ---------------------------------------------------------------


def zigzag_array(values: Any) -> Any:
    """uint64 zigzag images of an int64 array."""
    import numpy as np

    signed = np.asarray(values, dtype=np.int64)
    return ((signed << 1) ^ (signed >> 63)).view(np.uint64)


def varint_sizes(values: Any) -> Any:
    """int64 array: bytes each zigzag varint/varlong of ``values`` takes (1-10)."""
    import numpy as np

    raw = zigzag_array(values)
    sizes = np.ones(raw.shape, dtype=np.int64)
    for groups in range(1, MAX_VARLONG_BYTES):
        above = raw >= np.uint64(1 << (7 * groups))
        if not above.any():
            break
        sizes += above
    return sizes


def decode_varint_array(
    buf: Any, positions: Any, max_bytes: int = MAX_VARLONG_BYTES
) -> tuple[Any, Any]:
    """Decode the varints starting at each of ``positions`` in the uint8 array ``buf``.

    Returns ``(values int64, sizes)``; ``sizes`` is the int 1 when every varint took one byte
    (the common case, so callers add it without an array op), else an int64 array.

    Positions outside ``buf`` are *clipped*, never raised on: callers check afterwards that
    the fields they decoded add up to each record's length, which a clipped read cannot do.
    Raises ``CorruptRecordError`` when a varint takes more than ``max_bytes`` (5 for an int32
    varint, 10 for a varlong) or overflows its type. One pass per byte of the longest varint.
    """
    import numpy as np

    first = np.take(buf, positions, mode="clip")
    more = first >= 0x80
    if not more.any():
        small = first.astype(np.int64)
        return (small >> 1) ^ -(small & 1), 1
    raw = (first & 0x7F).astype(np.uint64)
    sizes = more.astype(np.int64) + 1
    for group in range(1, max_bytes):
        byte = np.take(buf, positions + group, mode="clip")
        raw |= ((byte & 0x7F).astype(np.uint64) << np.uint64(7 * group)) * more
        if group == MAX_VARLONG_BYTES - 1 and bool((more & (byte > 1)).any()):
            raise CorruptRecordError("varlong overflows int64")
        more &= byte >= 0x80
        if not more.any():
            break
        sizes += more
    else:
        raise CorruptRecordError(f"varint longer than the {max_bytes} bytes allowed")
    if max_bytes == MAX_VARINT_BYTES and bool((raw > np.uint64(_U32_MASK)).any()):
        raise CorruptRecordError("varint overflows int32")
    values = (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64)
    return values, sizes


@functools.cache
def _pair_tables() -> tuple[Any, Any]:
    """Value and size of the varint led by every little-endian byte pair ``b0 | b1 << 8``.

    Size 0 marks a pair whose varint is longer than two bytes.
    """
    import numpy as np

    pair = np.arange(1 << 16, dtype=np.int64)
    b0, b1 = pair & 0xFF, pair >> 8
    raw = np.where(b0 < 0x80, b0, (b0 & 0x7F) | (b1 << 7))
    sizes = np.where(b0 < 0x80, 1, np.where(b1 < 0x80, 2, 0))
    return (raw >> 1) ^ -(raw & 1), sizes


@functools.cache
def pair_spans() -> Any:
    """For every little-endian byte pair ``b0 | b1 << 8``: the bytes that the varint it leads
    and the length that varint declares span together (size + value), or -1 when the varint
    takes more than two bytes or is negative. A record's length varint at ``p`` thus gives
    the distance to the next record: ``pair_spans()[pairs[p]]`` (``columnar_decode``)."""
    import numpy as np

    values, sizes = _pair_tables()
    return np.where((sizes > 0) & (values >= 0), sizes + values, -1)


def pair_view(buf: Any) -> Any:
    """uint16 view of a uint8 array: element ``p`` is ``buf[p] | buf[p + 1] << 8`` (no copy)."""
    import numpy as np

    return np.ndarray(shape=(max(buf.shape[0] - 1, 0),), dtype="<u2", buffer=buf, strides=(1,))


def decode_short_varint_array(pairs: Any, positions: Any) -> tuple[Any, Any] | None:
    """Like ``decode_varint_array`` for the common case of 1-2 byte varints, in three gathers.

    ``pairs`` comes from ``pair_view``. Returns None when some varint is longer than two bytes
    or starts past the end of ``pairs``; ``decode_varint_array`` then decides.
    """
    short = _short_varints(pairs, positions)
    if short is None or (short[1].size and not short[1].min()):
        return None
    return short


def decode_mostly_short_varint_array(
    buf: Any, pairs: Any, positions: Any, max_bytes: int = MAX_VARLONG_BYTES
) -> tuple[Any, Any]:
    """``decode_varint_array``'s ``(values, sizes)`` (``sizes`` always an array), the 1-2 byte
    varints in three gathers and only the longer ones by the full decode: the offset deltas
    of a batch of more than 8,192 records take three bytes from there on, and decoding all of
    them byte by byte for those cost more than the gathers. Raises as ``decode_varint_array``
    does for the longer ones."""
    import numpy as np

    short = _short_varints(pairs, positions)
    if short is None:  # one starts on the last byte
        values, sizes = decode_varint_array(buf, positions, max_bytes)
        return values, np.broadcast_to(sizes, values.shape) if isinstance(sizes, int) else sizes
    values, sizes = short
    longer = np.flatnonzero(sizes == 0)
    if len(longer):
        values[longer], sizes[longer] = decode_varint_array(buf, positions[longer], max_bytes)
    return values, sizes


def _short_varints(pairs: Any, positions: Any) -> tuple[Any, Any] | None:
    """Values and sizes (0: longer than two bytes) of the varints at ``positions``, from the
    pair tables; None when one starts on the last byte (it has no pair)."""
    values, sizes = _pair_tables()
    try:
        pair = pairs[positions]  # fancy indexing: take() would copy the strided view first
    except IndexError:
        return None
    return values.take(pair), sizes.take(pair)
