"""Vectorized encoding of Arrow columns into a records section (the write hot path).

Every varint of every record (length, timestamp delta, offset delta, key and value lengths)
is computed with numpy and written into one ``(records, width)`` byte matrix; a mask selects
each row's used bytes, so ``matrix[mask]`` is all varint bytes in record order. Those bytes
become a binary array of per-record *pieces* (``length attributes ts_delta offset_delta
key_length`` | ``value_length`` | ``header_count``), and one Arrow ``take`` over the chunked
array ``[pieces, keys, values]`` interleaves them with the key and value bytes in C++: the
result's data buffer *is* the records section (F-16). Record headers (rare) are encoded per
record in Python and take the place of the third piece.

Input columns by name: ``value`` (binary/large_binary/string..., nullable, required), ``key``
(optional, nullable), ``timestamp`` (optional; int64 ms or an Arrow timestamp of any unit,
floored to ms; null or absent = ``now_ms``), ``headers`` (optional
``list<struct<key: string, value: binary>>``, null list = no headers, header value nullable).
Unusable input raises ``InvalidRecordError`` (a ``ValueError``). Pure, thread-safe.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa

from txn_log.errors import InvalidRecordError
from txn_log.record.varint import encode_varint, varint_sizes, zigzag_array

_AS_BINARY = ("string", "large_string", "large_binary", "binary_view", "string_view")
_UNIT_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


def _column(columns: Any, name: str) -> Any:
    column = columns.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _binary_input(array: Any, name: str) -> Any:
    """A binary array (``string`` and friends cast without copying bytes where Arrow can)."""
    if array.type == pa.binary():
        return array
    if str(array.type) in _AS_BINARY or pa.types.is_fixed_size_binary(array.type):
        return array.cast(pa.binary())
    raise InvalidRecordError(f"column {name!r} must be binary or string, got {array.type}")


def _lengths(array: Any) -> Any:
    """int64 byte lengths of a binary array's elements, -1 for nulls."""
    count = len(array)
    offsets = np.frombuffer(
        array.buffers()[1], dtype=np.int32, count=count + 1, offset=4 * array.offset
    )
    lengths = np.diff(offsets).astype(np.int64)
    if array.null_count:
        lengths[np.asarray(array.is_null())] = -1
    return lengths


def _timestamps_input(columns: Any, count: int, now_ms: int) -> Any:
    """int64 ms per record: int64 or Arrow timestamps (floored to ms); null or absent = now."""
    if "timestamp" not in columns.schema.names:
        return np.full(count, now_ms, dtype=np.int64)
    column = _column(columns, "timestamp")
    kind = column.type
    if not (pa.types.is_timestamp(kind) or pa.types.is_integer(kind)):
        raise InvalidRecordError(f"column 'timestamp' must be int64 ms or timestamp, got {kind}")
    scale, divisor = _UNIT_TO_MS[kind.unit] if pa.types.is_timestamp(kind) else (1, 1)
    millis = column.cast(pa.int64()).fill_null(0).to_numpy() * scale // divisor
    if column.null_count:
        millis = np.where(np.asarray(column.is_null()), np.int64(now_ms), millis)
    return millis.astype(np.int64, copy=False)


def _header_bytes(headers: Any) -> list[bytes] | None:
    """Each record's encoded header block (F-24), or None when no record has headers."""
    if headers.null_count == len(headers) or not len(headers.flatten()):
        return None
    blocks = []
    for row in headers.to_pylist():
        parts = [encode_varint(len(row or ()))]
        for header in row or ():
            if header["key"] is None:
                raise InvalidRecordError("a record header key must not be null")
            key = header["key"]
            key = key.encode("utf-8") if isinstance(key, str) else key
            value = header["value"]
            value = value.encode("utf-8") if isinstance(value, str) else value
            parts += [encode_varint(len(key)), key]
            parts += [encode_varint(-1)] if value is None else [encode_varint(len(value)), value]
        blocks.append(b"".join(parts))
    return blocks


@functools.cache
def _two_byte_encodings() -> Any:
    """Little-endian uint16 holding the 1-2 byte varint of every zigzag image below 2**14."""
    raw = np.arange(1 << 14, dtype=np.uint16)
    pairs = (raw & 0x7F) | ((raw >= 0x80).astype(np.uint16) << 7) | ((raw >> 7) << 8)
    return pairs.astype("<u2")  # byte order fixed: callers view the pairs as two bytes


def _write_varints(matrix: Any, mask: Any, column: int, raw: Any, sizes: Any, width: int) -> None:
    """Write one field's varints (zigzag images ``raw``, at most ``width`` bytes each) into
    ``matrix`` columns from ``column`` on, marking the bytes used in ``mask``."""
    if width == 1:
        matrix[:, column] = raw
        mask[:, column] = True
    elif width == 2:  # one gather from a table instead of two passes of bit arithmetic
        pairs = _two_byte_encodings().take(raw)
        matrix[:, column : column + 2] = pairs.view(np.uint8).reshape(-1, 2)
        mask[:, column] = True
        mask[:, column + 1] = sizes > 1
    else:
        for group in range(width):
            septet = (raw >> np.uint64(7 * group)).astype(np.uint8) & 0x7F
            matrix[:, column + group] = septet | ((sizes > group + 1).view(np.uint8) << 7)
            mask[:, column + group] = sizes > group


def _varint_pieces(values: Any, sizes: Any, splits: list[int]) -> Any:
    """Binary array of each record's varint fields, cut into pieces after ``splits`` fields.

    ``values`` (int64) and ``sizes`` are ``(fields, records)``; piece ``g`` of record ``i`` is
    element ``i * (len(splits) + 1) + g``. Each field's bytes go into columns of one byte
    matrix; ``matrix[mask]`` flattens the used bytes in record order (F-19).
    """
    fields, count = values.shape
    widths = sizes.max(axis=1).tolist()
    matrix = np.empty((count, sum(widths)), dtype=np.uint8)
    mask = np.zeros((count, sum(widths)), dtype=bool)
    column = 0
    for field, width in enumerate(widths):
        _write_varints(matrix, mask, column, zigzag_array(values[field]), sizes[field], width)
        column += width
    bounds = [0, *splits, fields]
    pieces = len(bounds) - 1
    lengths = np.empty((count, pieces), dtype=np.int64)
    for piece in range(pieces):  # np.add.reduceat is ~10x slower on this shape
        lengths[:, piece] = sizes[bounds[piece] : bounds[piece + 1]].sum(axis=0)
    offsets = np.zeros(count * pieces + 1, dtype=np.int32)
    np.cumsum(lengths.ravel(), out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), count * pieces, [None, pa.py_buffer(offsets), pa.py_buffer(matrix[mask])]
    )


_OFFSET_DELTAS: dict[int, tuple[Any, Any]] = {}


def _offset_deltas(count: int) -> tuple[Any, Any]:
    """Cached ``(0..count-1, their varint sizes)``: every batch we write numbers from 0."""
    cached = _OFFSET_DELTAS.get(count)
    if cached is None:
        deltas = np.arange(count, dtype=np.int64)
        cached = (deltas, varint_sizes(deltas))
        if len(_OFFSET_DELTAS) < 128:
            _OFFSET_DELTAS[count] = cached
    return cached


def _records_bytes(
    values: Any, keys: Any, timestamps: Any, header_blocks: list[bytes] | None
) -> tuple[Any, int]:
    """The uncompressed records section (F-16) and its size, offset deltas 0..n-1."""
    count = len(values)
    key_lengths = _lengths(keys) if keys is not None else np.full(count, -1, dtype=np.int64)
    value_lengths = _lengths(values)
    timestamp_deltas = timestamps - timestamps[0]  # signed (F-17)
    offset_deltas, offset_sizes = _offset_deltas(count)
    # fields: length, attributes (0), timestamp delta, offset delta, key length | value
    # length | header count (0, unless headers follow as their own chunk)
    fields = np.zeros((7 if header_blocks is None else 6, count), dtype=np.int64)
    fields[2] = timestamp_deltas
    fields[3] = offset_deltas
    fields[4] = key_lengths
    fields[5] = value_lengths
    sizes = np.ones_like(fields)
    sizes[2] = varint_sizes(timestamp_deltas)
    sizes[3] = offset_sizes
    sizes[4] = varint_sizes(key_lengths)
    sizes[5] = varint_sizes(value_lengths)
    body = sizes[1:].sum(axis=0) + np.maximum(key_lengths, 0) + np.maximum(value_lengths, 0)
    if header_blocks is not None:
        body += np.fromiter(map(len, header_blocks), dtype=np.int64, count=count)
    fields[0] = body
    sizes[0] = varint_sizes(body)
    splits = [5, 6] if header_blocks is None else [5]
    chunks = [_varint_pieces(fields, sizes, splits), values]
    chunks.insert(1, keys if keys is not None else pa.nulls(count, pa.binary()))
    if header_blocks is not None:
        chunks.append(pa.array(header_blocks, type=pa.binary()))
    taken = pa.chunked_array(chunks).take(_interleave_indices(count, len(splits) + 1))
    records = taken.chunk(0) if taken.num_chunks == 1 else pa.concat_arrays(taken.chunks)
    size = int(sizes[0].sum() + body.sum())
    return records.buffers()[2].slice(0, size), size


def _headers_input(columns: Any) -> Any:
    headers = _column(columns, "headers")
    kind = headers.type
    if (
        not (pa.types.is_list(kind) or pa.types.is_large_list(kind))
        or not pa.types.is_struct(kind.value_type)
        or {kind.value_type.field(i).name for i in range(kind.value_type.num_fields)}
        != {"key", "value"}
    ):
        raise InvalidRecordError(
            f"column 'headers' must be list<struct<key: string, value: binary>>, got {kind}"
        )
    return headers


_INTERLEAVE_INDICES: dict[tuple[int, int], Any] = {}


def _interleave_indices(count: int, pieces: int) -> Any:
    """Cached take indices over ``[pieces, keys, values, (header blocks)]`` putting each
    record's bytes in order: piece 0, key, piece 1, value, piece 2 or header block."""
    indices = _INTERLEAVE_INDICES.get((count, pieces))
    if indices is None:
        record = np.arange(count, dtype=np.int64)
        first, base = pieces * record, pieces * count
        trailer = first + 2 if pieces == 3 else base + 2 * count + record
        plan = np.stack([first, base + record, first + 1, base + count + record, trailer], axis=1)
        indices = pa.array(plan.ravel())
        if len(_INTERLEAVE_INDICES) < 128:
            _INTERLEAVE_INDICES[(count, pieces)] = indices
    return indices


def encode_columns(columns: Any, now_ms: int) -> tuple[Any, Any]:
    """``(records section buffer, int64 ms timestamps)`` of a RecordBatch or Table.

    Raises ``InvalidRecordError`` for no rows (Kafka never writes an empty data batch), a
    missing ``value`` column or unusable column types.
    """
    names = columns.schema.names
    if "value" not in names:
        raise InvalidRecordError(f"a batch needs a 'value' column; got columns {names}")
    count = columns.num_rows
    if count == 0:
        raise InvalidRecordError("a batch needs at least one record; Kafka writes none empty")
    values = _binary_input(_column(columns, "value"), "value")
    keys = _binary_input(_column(columns, "key"), "key") if "key" in names else None
    timestamps = _timestamps_input(columns, count, now_ms)
    blocks = _header_bytes(_headers_input(columns)) if "headers" in names else None
    records, _ = _records_bytes(values, keys, timestamps, blocks)
    return records, timestamps
