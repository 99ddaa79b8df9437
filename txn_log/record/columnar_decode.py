"""Vectorized decoding of a records section into Arrow columns (the read hot path).

Layout of one record is documented in ``codec``. Decoding runs in three steps:

1. **Record starts** (the only sequential step, F-18): records that come in runs of equal
   length (a producer's usually do: a length grows by a byte where the offset delta reaches
   64 or the timestamp delta 64 ms) are found a run at a time in numpy, each assumed start
   checked to declare exactly the run's length, which proves the chain; after a few short
   runs, a tight Python loop over the ``bytes`` takes the rest, reading each record's length
   varint (1-2 bytes for records under 8 KiB) through a 256 x 256 step table and jumping to
   the next record. Lengths of 3+ bytes, or anything odd, fall back to an exact loop that
   names the first bad record.
2. **Fields**: every other field of every record is decoded at once with numpy gathers
   (``varint.decode_mostly_short_varint_array``: three gathers per field for 1-2 byte
   varints, the full decode only for longer ones).
3. **Columns**: one Arrow ``take`` copies all keys and values out of the records buffer in
   C++; record headers (rare) use a per-record Python path that the no-header path never
   touches.

Invariant: no Arrow array is built over the buffer before every record's fields are shown
to add up exactly to its length and every record to end where the next starts, so spans
handed to Arrow are ordered and inside the buffer. Corrupt input raises
``CorruptRecordError``; it never reads out of bounds. Pure functions, thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from txn_log.errors import CorruptRecordError
from txn_log.record.varint import (
    MAX_VARINT_BYTES,
    MAX_VARLONG_BYTES,
    decode_mostly_short_varint_array,
    decode_varint,
    decode_varint_array,
    pair_spans,
    pair_view,
)

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(HEADER_TYPE)
MIN_RECORD_SIZE = 7  # length, attributes, timestamp/offset deltas, key/value lengths, count
Headers = tuple[tuple[str, bytes | None], ...]
Records = bytes | bytearray | memoryview
"""A records section: the client's bytes as the append holds them, or decoded from a file (a
contiguous byte view of the bytes a segment scan read, ``codec.decode_batch``)."""

# --- finding the records --------------------------------------------------------------------


def _build_length_steps() -> list[list[int]]:
    """``steps[b0][b1]``: bytes from a record start led by bytes b0, b1 to the next record.

    Covers length varints of 1 or 2 bytes (records under 8 KiB); anything else maps to a
    sentinel so large that the fast loop overshoots and the exact loop takes over. Assumes a
    non-negative length; ``_record_bounds`` checks that afterwards. Nested lists index faster
    than one list indexed by ``b0 | b1 << 8`` (measured: ~95 vs ~125 us per 1,000 records).
    """
    too_long = [1 << 40] * 128  # second byte has its continuation bit: 3+ byte varint
    one_byte = [[1 + (b0 >> 1)] * 256 for b0 in range(0x80)]
    two_bytes = [
        [2 + (((b0 & 0x7F) | (b1 << 7)) >> 1) for b1 in range(0x80)] + too_long
        for b0 in range(0x80, 0x100)
    ]
    return one_byte + two_bytes


_LENGTH_STEPS = _build_length_steps()


def _fast_starts(data: Records, position: int, end: int, count: int) -> list[int] | None:
    """Record starts via the step table, or None when any length needs the exact loop.

    The one sequential step of decoding (F-18: a record's start depends on the previous
    record's length), kept to two byte reads and two list lookups per record.
    """
    steps = _LENGTH_STEPS
    starts = [0] * count
    try:
        for index in range(count):
            starts[index] = position
            position += steps[data[position]][data[position + 1]]
    except IndexError:
        return None
    return starts if position == end else None


_SHORT_RUN = 32
"""A run of equal-length records shorter than this counts against ``_run_starts``' budget."""
_SHORT_RUNS_ALLOWED = 4
"""After this many short runs the loop takes the rest: its cost per record beats numpy's
fixed cost per run."""


def _run_starts(pairs: Any, position: int, end: int, count: int) -> tuple[list[Any], int, int]:
    """``(starts, found, position)``: where the leading records start while they come in runs
    of equal length, found in numpy a run at a time, and where the rest begins.

    A producer's records usually come in a few long runs (a length grows by a byte where the
    offset delta reaches 64 or the timestamp delta 64 ms). From a record start whose length
    takes ``stride`` bytes (varint included), the next records are assumed to start every
    ``stride`` bytes; each assumed start is read and accepted while it declares a length of
    exactly ``stride`` bytes too, so each accepted record ends where the next was assumed to
    start: the chain the loop would have followed (F-18). The window of assumed starts
    doubles with each full run; after a few short runs the caller's loop takes the rest.
    ``found`` < ``count`` when the records stop coming in runs (the caller continues from
    ``position``); the caller checks that the last record ends at ``end``.
    """
    steps = pair_spans()
    limit = len(pairs)
    chunks: list[Any] = []
    found = 0
    window = 64
    short_runs = 0
    while found < count and position < limit and short_runs < _SHORT_RUNS_ALLOWED:
        stride = int(steps[pairs[position]])
        if stride < MIN_RECORD_SIZE:
            break
        size = min(count - found, window, (end - position) // stride)
        if size < 1:
            break
        assumed = np.arange(position, position + size * stride, stride, dtype=np.int64)
        matches = steps[pairs[assumed]] == stride  # every assumed start is before ``end``
        run = size if bool(matches.all()) else int(matches.argmin())
        chunks.append(assumed[:run])
        found += run
        position += run * stride
        window = 2 * window if run == size else 64
        short_runs += run < _SHORT_RUN
    return chunks, found, position


def _exact_starts(data: Records, position: int, end: int, count: int) -> list[int]:
    """Record starts, decoding each length varint fully; names the first bad record."""
    starts = []
    for index in range(count):
        if position >= end:
            raise CorruptRecordError(f"records_count is {count} but the records end after {index}")
        starts.append(position)
        length, body = decode_varint(data, position)
        if length < MIN_RECORD_SIZE - 1 or body + length > end:
            raise CorruptRecordError(
                f"record {index} declares length {length}, outside the {end - body} bytes left"
            )
        position = body + length
    if position != end:
        raise CorruptRecordError(f"{end - position} bytes follow the last of {count} records")
    return starts


@dataclass(frozen=True, slots=True)
class RecordLayout:
    """Where every field of every record sits in the records buffer (absolute positions)."""

    ends: Any
    timestamp_delta: Any
    offset_delta: Any
    key_start: Any
    key_end: Any
    key_length: Any  # -1 (any negative) = null
    value_start: Any
    value_end: Any
    value_length: Any
    headers_start: Any
    header_count: Any


def _record_bounds(
    data: Records, buf: Any, pairs: Any, position: int, end: int, count: int
) -> tuple[Any, Any]:
    """``(body_starts, ends)``: where each record's attributes byte sits and where it ends."""
    chunks, found, resume = _run_starts(pairs, position, end, count)
    if found == count and resume == end:
        starts = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    elif (fast := _fast_starts(data, resume, end, count - found)) is not None:
        chunks.append(np.fromiter(fast, dtype=np.int64, count=count - found))
        starts = np.concatenate(chunks)
    else:
        starts = np.array(_exact_starts(data, position, end, count), dtype=np.int64)
    length, size = decode_mostly_short_varint_array(buf, pairs, starts, MAX_VARINT_BYTES)
    if length.min() < MIN_RECORD_SIZE - 1:  # the step table assumed non-negative lengths
        raise CorruptRecordError(f"a record declares length {int(length.min())}")
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = end
    return starts + size, ends


def record_layout(data: Records, position: int, end: int, count: int) -> RecordLayout:
    """Decode the fields of all records at once; positions are unchecked until the caller
    compares ``headers_start`` (plus headers) with ``ends`` (F-18)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    pairs = pair_view(buf)
    body, ends = _record_bounds(data, buf, pairs, position, end, count)
    at = body + 1  # skip the attributes byte (F-22)
    timestamp_delta, size = decode_mostly_short_varint_array(buf, pairs, at, MAX_VARLONG_BYTES)
    at = at + size
    offset_delta, size = decode_mostly_short_varint_array(buf, pairs, at, MAX_VARINT_BYTES)
    at = at + size
    key_length, size = decode_mostly_short_varint_array(buf, pairs, at, MAX_VARINT_BYTES)
    key_start = at + size
    key_end = key_start + np.maximum(key_length, 0)
    value_length, size = decode_mostly_short_varint_array(buf, pairs, key_end, MAX_VARINT_BYTES)
    value_start = key_end + size
    at = value_start + np.maximum(value_length, 0)
    header_count = buf.take(at, mode="clip")  # almost always a single 0 byte
    size = 1
    if header_count.any():
        header_count, size = decode_varint_array(buf, at, MAX_VARINT_BYTES)
    return RecordLayout(
        ends,
        timestamp_delta,
        offset_delta,
        key_start,
        key_end,
        key_length,
        value_start,
        at,
        value_length,
        at + size,
        header_count,
    )


# --- Arrow columns ----------------------------------------------------------------------------

_EMPTY_HEADERS = pa.array([], type=HEADER_TYPE)
_KEY_VALUE_INDICES: dict[int, Any] = {}


def _key_value_indices(count: int) -> Any:
    """Cached take indices: keys (spans 0, 4, 8, ...) then values (spans 2, 6, ...)."""
    indices = _KEY_VALUE_INDICES.get(count)
    if indices is None:
        plan = np.concatenate([np.arange(0, 4 * count, 4), np.arange(2, 4 * count, 4)])
        indices = pa.array(plan)
        if len(_KEY_VALUE_INDICES) < 128:
            _KEY_VALUE_INDICES[count] = indices
    return indices


def key_value_columns(data: Any, layout: RecordLayout) -> tuple[Any, Any]:
    """Keys and values as binary arrays copied out of ``data`` by one C++ ``take``.

    The spans ``[key_start, key_end)``, ``[value_start, value_end)`` of all records become
    the even elements of one binary array over ``data`` (odd elements are the bytes between);
    the caller has checked that they are in order and inside ``data``. Negative lengths are
    nulls (Kafka reads any negative length as null).
    """
    count = len(layout.key_start)
    offsets = np.empty((count, 4), dtype=np.int32)
    offsets[:, 0] = layout.key_start
    offsets[:, 1] = layout.key_end
    offsets[:, 2] = layout.value_start
    offsets[:, 3] = layout.value_end
    flat = np.append(offsets.ravel(), offsets[-1, 3])
    spans = pa.Array.from_buffers(pa.binary(), 4 * count, [None, pa.py_buffer(flat), data])
    both = spans.take(_key_value_indices(count))
    valid = np.concatenate([layout.key_length >= 0, layout.value_length >= 0])
    if not valid.all():
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
        nulls = 2 * count - int(np.count_nonzero(valid))
        both = pa.Array.from_buffers(
            pa.binary(), 2 * count, [bitmap, *both.buffers()[1:]], null_count=nulls
        )
    return both.slice(0, count), both.slice(count, count)


def read_headers(data: Records, position: int, count: int, end: int) -> tuple[Headers, int]:
    """``count`` headers from ``position`` (F-24); keys decode as UTF-8 with replacement."""
    headers = []
    for _ in range(count):
        key_length, position = decode_varint(data, position)
        if key_length < 0 or position + key_length > end:
            raise CorruptRecordError(f"header key length {key_length} at position {position}")
        key = str(data[position : position + key_length], "utf-8", "replace")
        value_length, position = decode_varint(data, position + key_length)
        value: bytes | None = None
        if value_length >= 0:
            if position + value_length > end:
                raise CorruptRecordError(f"header value length {value_length} overruns record")
            value = bytes(data[position : position + value_length])
            position += value_length
        headers.append((key, value))
    return tuple(headers), position


def headers_column(data: Records, layout: RecordLayout) -> Any:
    """The headers column; the slow per-record path runs only if some record has headers."""
    counts = layout.header_count
    if not counts.any():
        if not np.array_equal(layout.headers_start, layout.ends):
            raise CorruptRecordError("record fields do not add up to the record lengths")
        offsets = pa.py_buffer(np.zeros(len(counts) + 1, dtype=np.int32))
        return pa.Array.from_buffers(
            HEADERS_TYPE, len(counts), [None, offsets], children=[_EMPTY_HEADERS]
        )
    if (counts < 0).any():
        raise CorruptRecordError(f"negative header count {int(counts.min())}")
    rows = []
    for index, (position, count, end) in enumerate(
        zip(layout.headers_start.tolist(), counts.tolist(), layout.ends.tolist(), strict=True)
    ):
        headers, position = read_headers(data, position, count, end)
        if position != end:
            raise CorruptRecordError(f"record {index} fields do not add up to its length")
        rows.append([{"key": key, "value": value} for key, value in headers])
    return pa.array(rows, type=HEADERS_TYPE)
