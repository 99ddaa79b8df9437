"""The producer's per-partition buffers and the batches made from them (Kafka's
``ProducerBatch``; F-09, F-16, F-17).

A buffer holds one partition's records in send order until a batch holding them is appended.
``PartitionBuffer`` holds validated records (``send()``) as columns: values in a list, keys
once a record has one, timestamps as runs of one millisecond, headers once a record has some;
they become Arrow arrays for the columnar encoder with no object per record. It knows their
exact encoded size, so the producer fills a batch up to ``batch.size`` or
``max.message.bytes`` without a guess.
``ArrowBuffer`` holds whole Arrow record batches (``send_batch()``), encoded by the columnar
codec; its size is the Arrow bytes, an estimate of the encoded size. Both offer the same
operations the accumulator's one drain loop uses (``count``, ``size``, ``encode_head``,
``remove_head``, and ``head_size``, ``head_key`` to name a record too large), so there is one
append path, one split rule and one memory bound for records and for Arrow batches
(``record_accumulator``). ``encode_producer_batch`` turns some records into one record batch,
``encode_columns_batch`` three columns of them.

Not thread-safe; the producer that owns the buffers serialises access (C-39).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from txn_log.producer.producer_record import (
    Header,
    ProducerRecord,
    record_body_size,
    record_size,
)
from txn_log.record.varint import size_of_varint


class PartitionBuffer:
    """One partition's records in send order, not yet appended, held as columns: the batch
    encoder takes them as Arrow arrays without a per-record object. ``values`` in a list;
    ``keys`` likewise once a record has one (None while every key is null); timestamps as
    runs, since records sent within one millisecond share one: ``run_starts`` (the index of
    each run's first record, 0 first) and ``run_timestamps``; ``headers`` once a record has
    some. ``size`` is their exact uncompressed records section as one batch (header
    excluded); ``first_timestamp`` is the first record's, the base of every timestamp delta
    (F-17); ``last_timestamp`` is the last record's (-1 with none) and ``last_delta_size``
    the size of its delta's varint, which the next record of the same run shares."""

    __slots__ = (
        "first_timestamp",
        "headers",
        "keys",
        "last_delta_size",
        "last_timestamp",
        "run_starts",
        "run_timestamps",
        "size",
        "values",
    )

    def __init__(self) -> None:
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] | None = None  # None: every key is null
        self.run_starts: list[int] = []
        self.run_timestamps: list[int] = []
        self.headers: list[tuple[Header, ...]] | None = None  # None: no record has headers
        self.size = 0
        self.first_timestamp = 0
        self.last_timestamp = -1  # timestamps are never negative (Kafka refuses them)
        self.last_delta_size = 1

    @property
    def count(self) -> int:
        return len(self.values)

    def timestamp(self, index: int) -> int:
        return self.run_timestamps[bisect_right(self.run_starts, index) - 1]

    def timestamps(self, count: int) -> Any:
        """The first ``count`` records' timestamps, an int64 numpy array."""
        import numpy as np

        bounds = np.array([*self.run_starts, len(self.values)], dtype=np.int64)
        lengths = bounds[1:] - bounds[:-1]
        return np.repeat(np.array(self.run_timestamps, dtype=np.int64), lengths)[:count]

    def record(self, index: int) -> ProducerRecord:
        key = self.keys[index] if self.keys is not None else None
        headers = self.headers[index] if self.headers is not None else ()
        return ProducerRecord(key, self.values[index], self.timestamp(index), headers)

    def encode_head(self, count: int, **settings: Any) -> bytes | memoryview:
        """One batch of the first ``count`` records (``settings`` as ``encode_batch``)."""
        if count <= SMALL_BATCH_RECORDS or (self.headers is not None and any(self.headers[:count])):
            return encode_producer_batch([self.record(i) for i in range(count)], **settings)
        whole = count == len(self.values)
        keys = self.keys if self.keys is None or whole else self.keys[:count]
        values = self.values if whole else self.values[:count]
        return encode_columns_batch(keys, values, self.timestamps(count), **settings)

    def head_key(self) -> bytes | None:
        return self.keys[0] if self.keys is not None else None

    def head_size(self) -> int:
        """The first record's size alone in a batch (header excluded)."""
        return record_size(record_body_size(self.record(0)), 0, 0)

    def next_size(self, record: ProducerRecord, body_size: int) -> int:
        """Bytes ``record`` would add as the next record of this batch (F-17 deltas)."""
        if not self.values:
            return record_size(body_size, 0, 0)
        return record_size(body_size, len(self.values), record.timestamp_ms - self.first_timestamp)

    def new_timestamp(self, index: int, timestamp: int) -> None:
        """Record ``index`` (the next) starts a run of records stamped ``timestamp``."""
        if not index:
            self.first_timestamp = timestamp
        self.run_starts.append(index)
        self.run_timestamps.append(timestamp)
        self.last_timestamp = timestamp
        self.last_delta_size = size_of_varint(timestamp - self.first_timestamp)

    def add_key(self, index: int, key: bytes | None) -> None:
        """The key of record ``index`` (the next), keeping ``keys`` None while all are."""
        if self.keys is not None:
            self.keys.append(key)
        elif key is not None:
            self.keys = [None] * index
            self.keys.append(key)

    def add(self, record: ProducerRecord, body_size: int, size: int) -> None:
        """Append ``record``; ``size`` is ``next_size(record, body_size)``."""
        key, value, timestamp, headers = record
        index = len(self.values)
        if not index or timestamp != self.last_timestamp:
            self.new_timestamp(index, timestamp)
        if headers and self.headers is None:
            self.headers = [()] * index
        if self.headers is not None:
            self.headers.append(headers)
        self.add_key(index, key)
        self.values.append(value)
        self.size += size

    def remove_head(self, count: int) -> None:
        """Forget the first ``count`` records (appended or dropped); the rest are re-sized as
        the batch they now start."""
        del self.values[:count]
        if self.keys is not None:
            del self.keys[:count]
        if self.headers is not None:
            del self.headers[:count]
        if not self.values:
            self.run_starts, self.run_timestamps = [], []
            self.first_timestamp, self.last_timestamp, self.size = 0, -1, 0
            return
        run = bisect_right(self.run_starts, count) - 1
        self.run_starts = [0, *(start - count for start in self.run_starts[run + 1 :])]
        del self.run_timestamps[:run]
        first = self.first_timestamp = self.run_timestamps[0]
        self.last_delta_size = size_of_varint(self.last_timestamp - first)
        self.size = sum(
            record_size(record_body_size(self.record(index)), index, timestamp - first)
            for index, timestamp in enumerate(self.timestamps(len(self.values)).tolist())
        )


@dataclass
class ArrowBuffer:
    """One partition's Arrow record batches (columns as ``encode_batch`` takes them) in send
    order, not yet appended. ``size`` is their Arrow bytes: an estimate of the encoded records
    section, close for uncompressed binary columns. Holds references to the sender's batches
    (zero-copy); they are combined, without copying the data, when a batch is encoded."""

    pieces: list[Any] = field(default_factory=list)
    size: int = 0
    count: int = 0

    def accepts(self, records: Any) -> bool:
        """Whether ``records`` has the schema of what is buffered, so that they can share a
        batch (Arrow concatenates only equal schemas)."""
        return not self.pieces or bool(self.pieces[0].schema.equals(records.schema))

    def add(self, records: Any) -> None:
        self.pieces.append(records)
        self.size += records.nbytes
        self.count += records.num_rows

    def _table(self) -> Any:
        import pyarrow as pa

        if len(self.pieces) > 1:
            self.pieces = [pa.Table.from_batches(self._batches())]
        return self.pieces[0]

    def _batches(self) -> list[Any]:
        batches: list[Any] = []
        for piece in self.pieces:
            batches.extend(piece.to_batches() if hasattr(piece, "to_batches") else [piece])
        return batches

    def encode_head(self, count: int, **settings: Any) -> bytes | memoryview:
        from txn_log.record.codec import encode_batch_buffer

        table = self._table()
        head = table if count == table.num_rows else table.slice(0, count)
        return encode_batch_buffer(head, **settings)

    def head_key(self) -> bytes | None:
        table = self._table()
        if "key" not in table.column_names:
            return None
        key = table.column("key")[0].as_py()
        return key.encode() if isinstance(key, str) else key

    def head_size(self) -> int:
        return int(self._table().slice(0, 1).nbytes)

    def remove_head(self, count: int) -> None:
        """Forget the first ``count`` rows (appended or dropped)."""
        table = self._table().slice(count)
        self.pieces = [table] if table.num_rows else []
        self.count = table.num_rows
        self.size = int(table.nbytes) if table.num_rows else 0


ProducerBuffer = PartitionBuffer | ArrowBuffer
"""What the accumulator's drain loop takes."""


SMALL_BATCH_RECORDS = 32
"""At most this many records are encoded record by record: building Arrow arrays costs about
0.25 ms a batch whatever its size, which for a few records is twenty times the per-record
encoder (the two cost the same near 100 records; a small transaction's commit encodes one
such batch per partition)."""


def encode_producer_batch(records: Sequence[ProducerRecord], **settings: Any) -> bytes | memoryview:
    """One batch of ``records`` (``settings`` as ``encode_batch`` takes them): the columnar
    encoder (whole-batch work on Arrow buffers) for more than ``SMALL_BATCH_RECORDS`` records
    without headers, the per-record one otherwise. Both write the same bytes."""
    from txn_log.record.codec import encode_records

    if len(records) <= SMALL_BATCH_RECORDS or any(record.headers for record in records):
        return encode_records(records, **settings)
    keys, values, timestamps, _ = zip(*records, strict=True)
    return encode_columns_batch(keys, values, timestamps, **settings)


def encode_columns_batch(
    keys: Sequence[bytes | None] | None,
    values: Sequence[bytes | None],
    timestamps: Any,
    **settings: Any,
) -> bytes | memoryview:
    """One batch of records given as equal-length columns, without headers, through the
    columnar encoder (``settings`` as ``encode_batch`` takes them): keys (None: all null),
    values, and timestamps (a sequence of ints or an int64 numpy array)."""
    import pyarrow as pa

    from txn_log.record.codec import encode_batch_buffer

    arrays = {
        "value": pa.array(values, pa.binary()),
        "timestamp": pa.array(timestamps, pa.int64()),
    }
    if keys is not None and keys.count(None) != len(keys):  # no key column: every key null
        arrays["key"] = pa.array(keys, pa.binary())
    return encode_batch_buffer(
        pa.record_batch(list(arrays.values()), names=list(arrays)), **settings
    )
