"""Vectorized encoding of Arrow columns into a records section (the write hot path).

Every varint of every record (length, timestamp delta, offset delta, key and value lengths)
is computed with numpy and written into one ``(records, width)`` byte matrix; a mask selects
each row's used bytes, so ``matrix[mask]`` is all varint bytes in record order. Those bytes
become a binary array of *pieces*, and one Arrow ``take`` over the chunked array ``[pieces,
keys, values]`` interleaves them with the key and value bytes in C++: the result's data
buffer *is* the records section (F-16). Without record headers the pieces are the bytes
between one value and the next (the previous record's header count 0, then ``length
attributes ts_delta offset_delta key_length`` | ``value_length``), cut at the key unless
every key is null: two take elements per record for null keys, four with keys. Record
headers (rare) are encoded per record in Python and follow each value as a chunk of their
own (pieces ``length .. key_length`` | ``value_length``, five elements per record).

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
import pyarrow.compute as pc

from txn_log.errors import InvalidRecordError
from txn_log.record.batch_header import HEADER_SIZE
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
    if array.null_count == count:
        return np.full(count, -1, dtype=np.int64)
    offsets = np.frombuffer(
        array.buffers()[1], dtype=np.int32, count=count + 1, offset=4 * array.offset
    )
    lengths = np.diff(offsets).astype(np.int64)
    if array.null_count:  # from the validity bitmap: is_null() builds an array to convert
        bits = np.frombuffer(array.buffers()[0], dtype=np.uint8)
        valid = np.unpackbits(bits, count=array.offset + count, bitorder="little")
        lengths[valid[array.offset :] == 0] = -1
    return lengths


def _timestamps_input(columns: Any, count: int, now_ms: int) -> Any:
    """int64 ms per record: int64 or Arrow timestamps (floored to ms); null or absent = now."""
    if "timestamp" not in columns.schema.names:
        return np.full(count, now_ms, dtype=np.int64)
    column = _column(columns, "timestamp")
    kind = column.type
    if kind == pa.int64() and not column.null_count:
        return column.to_numpy()  # ms already, no copy
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
    ``matrix`` columns from ``column`` on, marking the bytes used in ``mask`` (none where
    ``sizes`` is 0: a field a row does not have)."""
    if width == 1:
        matrix[:, column] = raw
        mask[:, column] = sizes > 0
    elif width == 2:  # one gather from a table instead of two passes of bit arithmetic
        pairs = _two_byte_encodings().take(raw)
        matrix[:, column : column + 2] = pairs.view(np.uint8).reshape(-1, 2)
        mask[:, column] = sizes > 0
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
    matrix; ``matrix[mask]`` flattens the used bytes in record order (F-19). A size of 0
    leaves the field out of that record's piece.
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
    """The uncompressed records section (F-16), offset deltas 0..n-1, after ``HEADER_SIZE``
    bytes of room (``_framed``), and its size."""
    count = len(values)
    key_lengths = _lengths(keys) if keys is not None else np.full(count, -1, dtype=np.int64)
    value_lengths = _lengths(values)
    if header_blocks is None:
        return _records_between_values(values, keys, key_lengths, value_lengths, timestamps)
    timestamp_deltas = timestamps - timestamps[0]  # signed (F-17)
    offset_deltas, offset_sizes = _offset_deltas(count)
    # fields: length, attributes (0), timestamp delta, offset delta, key length | value
    # length; the header block follows as its own chunk
    fields = np.zeros((6, count), dtype=np.int64)
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
    body += np.fromiter(map(len, header_blocks), dtype=np.int64, count=count)
    fields[0] = body
    sizes[0] = varint_sizes(body)
    chunks = [
        _varint_pieces(fields, sizes, [5]),
        keys if keys is not None else pa.nulls(count, pa.binary()),
        values,
        pa.array(header_blocks, type=pa.binary()),
    ]
    size = int(sizes[0].sum() + body.sum())
    return _framed(_take(chunks, _interleave_indices(count)), size), size


def _records_between_values(
    values: Any, keys: Any, key_lengths: Any, value_lengths: Any, timestamps: Any
) -> tuple[Any, int]:
    """``_records_bytes`` for records without headers, as the bytes between values: gap
    ``i`` is record ``i - 1``'s header count (0) and record ``i``'s fields up to its value,
    the key's bytes between its length and the value length unless every key is null; the
    last gap is the last header count alone. One ``take`` of gaps, keys and values, two
    (keyless) or four elements per record, lays out the section."""
    count = len(values)
    keyless = keys is None or keys.null_count == count
    timestamp_deltas = timestamps - timestamps[0]  # signed (F-17)
    offset_deltas, offset_sizes = _offset_deltas(count)
    # fields of gap i: header count of record i - 1 (none before the first), length,
    # attributes (0), timestamp delta, offset delta, key length | value length; gap ``count``
    # holds the last header count only
    fields = np.zeros((7, count + 1), dtype=np.int64)
    sizes = np.zeros_like(fields)
    sizes[0, 1:] = 1
    sizes[2, :count] = 1
    fields[3, :count] = timestamp_deltas
    sizes[3, :count] = varint_sizes(timestamp_deltas)
    fields[4, :count] = offset_deltas
    sizes[4, :count] = offset_sizes
    fields[5, :count] = key_lengths
    sizes[5, :count] = varint_sizes(key_lengths)
    fields[6, :count] = value_lengths
    sizes[6, :count] = varint_sizes(value_lengths)
    data = np.maximum(key_lengths, 0) + np.maximum(value_lengths, 0)
    body = sizes[2:, :count].sum(axis=0) + data + 1  # + the header count
    fields[1, :count] = body
    sizes[1, :count] = varint_sizes(body)
    pieces = _varint_pieces(fields, sizes, [] if keyless else [6])
    chunks = [pieces, values] if keyless else [pieces, keys, values]
    size = int(sizes.sum() + data.sum())
    return _framed(_take(chunks, _gap_indices(count, keyless)), size), size


_HEADER_ROOM = pa.array([bytes(HEADER_SIZE)], pa.binary())


def _take(chunks: list[Any], indices: Any) -> Any:
    """One binary array of ``HEADER_SIZE`` zero bytes (element 0, room for the batch header)
    and the elements of ``chunks`` (taken as one array, from element 1 on) at ``indices``."""
    taken = pc.take(pa.chunked_array([_HEADER_ROOM, *chunks]), indices)
    if taken.num_chunks == 1:
        return taken.chunk(0)
    return pa.concat_arrays(taken.chunks)


def _framed(taken: Any, size: int) -> memoryview:
    """A writable view of the header room and the ``size`` bytes of records ``_take`` laid
    out: its data buffer, which the take allocated and nothing else refers to (a copy, should
    an Arrow build hand it out read-only)."""
    view = memoryview(taken.buffers()[2]).cast("B")[: HEADER_SIZE + size]  # bytes, not chars
    return memoryview(bytearray(view)) if view.readonly else view


_INTERLEAVE_INDICES: dict[tuple[int, bool], Any] = {}


def _gap_indices(count: int, keyless: bool) -> Any:
    """Cached take indices over ``[room, gaps, values]`` (keyless: the room, gap ``i``,
    value ``i``, ..., gap ``count``) or ``[room, gaps, keys, values]`` (two gap pieces a
    record, split before the value length: the room, piece ``2i``, key ``i``, piece
    ``2i + 1``, value ``i``, ..., piece ``2 * count``); ``_take`` puts the room first."""
    indices = _INTERLEAVE_INDICES.get((count, keyless))
    if indices is None:
        record = np.arange(count, dtype=np.int64)
        if keyless:
            plan = np.empty(2 * count + 1, dtype=np.int64)
            plan[0::2] = 1 + np.arange(count + 1)
            plan[1::2] = 1 + count + 1 + record
        else:
            base = 2 * count + 2
            steps = np.stack([2 * record, base + record, 2 * record + 1, base + count + record])
            plan = 1 + np.append(steps.T.ravel(), 2 * count)
        indices = pa.array(np.append(0, plan))  # the header room first
        if len(_INTERLEAVE_INDICES) < 128:
            _INTERLEAVE_INDICES[(count, keyless)] = indices
    return indices


def _interleave_indices(count: int) -> Any:
    """Take indices over ``[room, pieces, keys, values, header blocks]`` (two pieces a
    record) putting the header room first, then each record's bytes in order: piece 0, key,
    piece 1, value, header block."""
    record = np.arange(count, dtype=np.int64)
    first, base = 2 * record, 2 * count
    plan = np.stack(
        [first, base + record, first + 1, base + count + record, base + 2 * count + record]
    )
    return pa.array(np.append(0, 1 + plan.T.ravel()))  # the header room first


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


def encode_columns(columns: Any, now_ms: int) -> tuple[memoryview, Any]:
    """``(framed, int64 ms timestamps)`` of a RecordBatch or Table: ``framed`` is a writable
    view of ``HEADER_SIZE`` zero bytes, room for the batch header, followed by the records
    section, in an Arrow buffer that nothing else refers to.

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
    framed, _ = _records_bytes(values, keys, timestamps, blocks)
    return framed, timestamps
