"""The producer's per-partition buffers and the batches made from them (Kafka's
``ProducerBatch``; F-09, F-16, F-17).

A buffer holds one partition's records in send order until a batch holding them is appended.
``PartitionBuffer`` holds validated records (``send()``) as columns, keys, values and
timestamps in lists (headers only once a record has some), which become Arrow arrays for the
columnar encoder with no object per record; it knows their exact encoded size, so the
producer fills a batch up to ``batch.size`` or ``max.message.bytes`` without a guess.
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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from txn_log.producer.producer_record import (
    Header,
    ProducerRecord,
    record_body_size,
    record_size,
)


class PartitionBuffer:
    """One partition's records in send order, not yet appended, held as columns (keys,
    values, timestamps, and headers once a record has some): the batch encoder takes them as
    Arrow arrays without a per-record object. ``size`` is their exact uncompressed records
    section as one batch (header excluded); ``first_timestamp`` is the first record's, the
    base of every timestamp delta (F-17)."""

    __slots__ = ("first_timestamp", "headers", "keys", "size", "timestamps", "values")

    def __init__(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.headers: list[tuple[Header, ...]] | None = None  # None: no record has headers
        self.size = 0
        self.first_timestamp = 0

    @property
    def count(self) -> int:
        return len(self.values)

    def record(self, index: int) -> ProducerRecord:
        headers = self.headers[index] if self.headers is not None else ()
        return ProducerRecord(self.keys[index], self.values[index], self.timestamps[index], headers)

    def encode_head(self, count: int, **settings: Any) -> bytes | memoryview:
        """One batch of the first ``count`` records (``settings`` as ``encode_batch``)."""
        if count <= SMALL_BATCH_RECORDS or (self.headers is not None and any(self.headers[:count])):
            return encode_producer_batch([self.record(i) for i in range(count)], **settings)
        whole = count == len(self.values)
        return encode_columns_batch(
            self.keys if whole else self.keys[:count],
            self.values if whole else self.values[:count],
            self.timestamps if whole else self.timestamps[:count],
            **settings,
        )

    def head_key(self) -> bytes | None:
        return self.keys[0]

    def head_size(self) -> int:
        """The first record's size alone in a batch (header excluded)."""
        return record_size(record_body_size(self.record(0)), 0, 0)

    def next_size(self, record: ProducerRecord, body_size: int) -> int:
        """Bytes ``record`` would add as the next record of this batch (F-17 deltas)."""
        if not self.values:
            return record_size(body_size, 0, 0)
        return record_size(body_size, len(self.values), record.timestamp_ms - self.first_timestamp)

    def add(self, record: ProducerRecord, body_size: int, size: int) -> None:
        """Append ``record``; ``size`` is ``next_size(record, body_size)``."""
        key, value, timestamp, headers = record
        if not self.values:
            self.first_timestamp = timestamp
        if headers and self.headers is None:
            self.headers = [()] * len(self.values)
        if self.headers is not None:
            self.headers.append(headers)
        self.keys.append(key)
        self.values.append(value)
        self.timestamps.append(timestamp)
        self.size += size

    def remove_head(self, count: int) -> None:
        """Forget the first ``count`` records (appended or dropped); the rest are re-sized as
        the batch they now start."""
        del self.keys[:count], self.values[:count], self.timestamps[:count]
        if self.headers is not None:
            del self.headers[:count]
        first = self.first_timestamp = self.timestamps[0] if self.timestamps else 0
        self.size = sum(
            record_size(record_body_size(self.record(index)), index, timestamp - first)
            for index, timestamp in enumerate(self.timestamps)
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
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    timestamps: Sequence[int],
    **settings: Any,
) -> bytes | memoryview:
    """One batch of records given as three equal-length columns, without headers, through the
    columnar encoder (``settings`` as ``encode_batch`` takes them)."""
    import pyarrow as pa

    from txn_log.record.codec import encode_batch_buffer

    arrays = {
        "value": pa.array(values, pa.binary()),
        "timestamp": pa.array(timestamps, pa.int64()),
    }
    if keys.count(None) != len(keys):  # no key column: every key null
        arrays["key"] = pa.array(keys, pa.binary())
    return encode_batch_buffer(
        pa.record_batch(list(arrays.values()), names=list(arrays)), **settings
    )
