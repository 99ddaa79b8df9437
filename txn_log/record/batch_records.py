"""The records section of a batch, inflated within a bound, and the structural checks Kafka's
``LogValidator`` makes of it before an append (DESIGN §1; F-05, F-16..F-19, F-24).

``records_section`` is the one place a batch's records are reached: the header is in the clear
(61 bytes, ``batch_header``), the records follow it, compressed as one stream when the codec
bits say so (F-13), and inflating them is bounded (``compression.decompress``). Decoding
(``codec``), the cleaner's rewriting (``batch_rewriter``) and validation all go through it.

``check_records`` walks every record once, the way decoding does (``columnar_decode``: one
sequential step to find record starts, numpy for the fields), without building any column:

- exactly ``records_count`` records, each one's fields adding up to its declared length, the
  last one ending where the section ends (else ``CorruptRecordError``, CORRUPT_MESSAGE);
- offset deltas 0, 1, ..., n-1: a reader computes each record's offset as base offset plus
  delta, so any other delta would give records offsets outside their batch, or twice
  (``InvalidRecordError``, INVALID_RECORD; Kafka's clients always write 0..n-1, KIP-31);
- how many records have no key (a compacted topic refuses them: ``log_validator``).

Pure functions, thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from txn_log.errors import CorruptRecordError, InvalidRecordError
from txn_log.record.batch_header import HEADER_SIZE, BatchHeader, Compression
from txn_log.record.columnar_decode import (
    MIN_RECORD_SIZE,
    Records,
    headers_column,
    read_headers,
    record_layout,
)
from txn_log.record.compression import MAX_RECORDS_BYTES, decompress
from txn_log.record.varint import decode_varint, decode_varlong

_Batch = TypeVar("_Batch", bytes, bytearray, memoryview)
SMALL_BATCH_RECORDS = 16
"""Up to this many records a batch is walked record by record (``_walk_records``), above it
all at once with numpy (``record_layout``): the same checks, whichever is faster."""


def records_section(
    batch: _Batch, header: BatchHeader, max_size: int = MAX_RECORDS_BYTES
) -> tuple[_Batch | bytes, int]:
    """``(buffer, position)`` of a whole batch's uncompressed records, which run from
    ``position`` to the buffer's end. A compressed section is inflated to at most ``max_size``
    bytes (``RecordTooLargeError`` beyond); an unknown codec raises
    UnsupportedCompressionTypeError."""
    codec = header.compression
    if codec is Compression.NONE:
        return batch, HEADER_SIZE
    return decompress(memoryview(batch)[HEADER_SIZE:], codec, max_size), 0


def check_count(header: BatchHeader, records_bytes: int) -> None:
    """``records_count`` records can fit in ``records_bytes`` bytes, and none means none;
    CorruptRecordError naming the batch otherwise."""
    count = header.records_count
    if count < 0 or count * MIN_RECORD_SIZE > records_bytes or (count == 0) != (records_bytes == 0):
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} declares {count} records in "
            f"{records_bytes} bytes of records"
        )


@dataclass(frozen=True, slots=True)
class RecordsSummary:
    """What validation needs to know of a batch's records once they are shown well formed."""

    records: int
    null_keys: int
    """How many records have no key."""
    keyless: Any
    """Which records have no key: a tuple of their indexes, or a numpy bool per record (the
    indexes are listed only when asked for: a compacted topic refuses such a batch)."""

    @property
    def null_key_indexes(self) -> tuple[int, ...]:
        """Where in the batch (0-based) the records without a key are."""
        if isinstance(self.keyless, tuple):
            return self.keyless
        return tuple(np.flatnonzero(self.keyless).tolist())


def check_records(
    batch: _Batch,
    header: BatchHeader,
    max_size: int = MAX_RECORDS_BYTES,
    *,
    stored: bool = False,
) -> RecordsSummary:
    """Walk every record of a whole batch (its CRC already checked): the checks above.
    Raises CorruptRecordError, InvalidRecordError or RecordTooLargeError; changes nothing.

    ``stored`` checks a batch already in the log (``txnlog verify``) rather than one about to
    be appended: the cleaner removes records from batches and keeps the survivors' offsets
    (F-06), so its deltas need only rise within ``[0, last_offset_delta]``."""
    records, position = records_section(batch, header, max_size)
    end = len(records)
    check_count(header, end - position)
    count = header.records_count
    if count == 0:
        return RecordsSummary(0, 0, ())
    if count <= SMALL_BATCH_RECORDS:  # numpy's fixed cost outweighs a loop over a few records
        deltas, null_keys = _walk_records(records, position, end, count)
        if deltas != list(range(count)) or (stored and count - 1 > header.last_offset_delta):
            _check_offset_deltas(np.array(deltas, dtype=np.int64), header, stored=stored)
        return RecordsSummary(count, len(null_keys), null_keys)
    layout = record_layout(records, position, end, count)
    headers_column(records, layout)  # every record's fields add up to its length (F-18)
    _check_offset_deltas(layout.offset_delta, header, stored=stored)
    keyless = layout.key_length < 0
    return RecordsSummary(count, int(np.count_nonzero(keyless)), keyless)


def _walk_records(
    data: Records, position: int, end: int, count: int
) -> tuple[list[int], tuple[int, ...]]:
    """(offset deltas, indexes of the records without a key) of ``count`` records from
    ``position``, one record at a time; the same checks as ``record_layout`` and
    ``headers_column``."""
    deltas = []
    null_keys: list[int] = []
    for index in range(count):
        if position >= end:
            raise CorruptRecordError(f"records_count is {count} but the records end after {index}")
        length, body = decode_varint(data, position)
        record_end = body + length
        if length < MIN_RECORD_SIZE - 1 or record_end > end:
            raise CorruptRecordError(f"record {index} declares length {length}")
        _, cursor = decode_varlong(data, body + 1)  # after the attributes byte: timestamp delta
        offset_delta, cursor = decode_varint(data, cursor)
        for field in ("key", "value"):
            field_length, cursor = decode_varint(data, cursor)
            if field == "key" and field_length < 0:
                null_keys.append(index)
            cursor += max(field_length, 0)
            if cursor > record_end:
                raise CorruptRecordError(f"record {index}: its {field} overruns the record")
        header_count, cursor = decode_varint(data, cursor)
        if header_count < 0:
            raise CorruptRecordError(f"record {index}: negative header count {header_count}")
        _, cursor = read_headers(data, cursor, header_count, record_end)
        if cursor != record_end:
            raise CorruptRecordError(f"record {index}: its fields do not add up to its length")
        deltas.append(offset_delta)
        position = record_end
    if position != end:
        raise CorruptRecordError(f"{end - position} bytes follow the last of {count} records")
    return deltas, tuple(null_keys)


def _check_offset_deltas(deltas: Any, header: BatchHeader, *, stored: bool) -> None:
    count = len(deltas)
    if stored:
        rising = bool((np.diff(deltas) > 0).all())
        if rising and deltas[0] >= 0 and deltas[-1] <= header.last_offset_delta:
            return
        raise InvalidRecordError(
            f"batch at offset {header.base_offset}: its records' offset deltas do not rise "
            f"within 0..{header.last_offset_delta} (first {int(deltas[0])}, last "
            f"{int(deltas[-1])})"
        )
    expected = np.arange(count, dtype=deltas.dtype)
    if not np.array_equal(deltas, expected):
        wrong = int(np.flatnonzero(deltas != expected)[0])
        raise InvalidRecordError(
            f"record {wrong} of the batch has offset delta {int(deltas[wrong])}, expected "
            f"{wrong}: a batch's records must have offset deltas 0..{count - 1}"
        )
