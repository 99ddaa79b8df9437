"""The producer's per-partition buffers and the batches made from them (Kafka's
``ProducerBatch``; F-09, F-16, F-17).

A buffer holds one partition's records in send order until a batch holding them is appended.
``PartitionBuffer`` holds validated ``ProducerRecord``s (``send()``); it knows their exact
encoded size, so the producer fills a batch up to ``batch.size`` or ``max.message.bytes``
without a guess. ``ArrowBuffer`` holds whole Arrow record batches (``send_batch()``), encoded
by the columnar codec; its size is the Arrow bytes, an estimate of the encoded size. Both offer
the same operations the accumulator's one drain loop uses (``count``, ``size``,
``encode_head``, ``remove_head``, and ``head_size``, ``head_key`` to name a record too large),
so there is one append path, one split rule and one memory bound for records and for Arrow
batches (``record_accumulator``). ``encode_producer_batch`` turns some records into one record
batch.

Not thread-safe; the producer that owns the buffers serialises access (C-39).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from txn_log.producer.producer_record import ProducerRecord, record_size


@dataclass
class PartitionBuffer:
    """One partition's records in send order, not yet appended. ``size`` is their exact
    uncompressed records section as one batch (header excluded); ``body_sizes`` caches each
    record's ``record_body_size``."""

    records: list[ProducerRecord] = field(default_factory=list)
    body_sizes: list[int] = field(default_factory=list)
    size: int = 0

    @property
    def count(self) -> int:
        return len(self.records)

    def encode_head(self, count: int, **settings: Any) -> bytes:
        """One batch of the first ``count`` records (``settings`` as ``encode_batch``)."""
        return encode_producer_batch(self.records[:count], **settings)

    def head_key(self) -> bytes | None:
        return self.records[0].key

    def head_size(self) -> int:
        """The first record's size alone in a batch (header excluded)."""
        return record_size(self.body_sizes[0], 0, 0)

    def next_size(self, record: ProducerRecord, body_size: int) -> int:
        """Bytes ``record`` would add as the next record of this batch (F-17 deltas)."""
        if not self.records:
            return record_size(body_size, 0, 0)
        delta = record.timestamp_ms - self.records[0].timestamp_ms
        return record_size(body_size, len(self.records), delta)

    def add(self, record: ProducerRecord, body_size: int, size: int) -> None:
        """Append ``record``; ``size`` is ``next_size(record, body_size)``."""
        self.records.append(record)
        self.body_sizes.append(body_size)
        self.size += size

    def remove_head(self, count: int) -> None:
        """Forget the first ``count`` records (appended or dropped); the rest are re-sized as
        the batch they now start."""
        del self.records[:count], self.body_sizes[:count]
        first = self.records[0].timestamp_ms if self.records else 0
        self.size = sum(
            record_size(body, index, record.timestamp_ms - first)
            for index, (record, body) in enumerate(zip(self.records, self.body_sizes, strict=True))
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

    def encode_head(self, count: int, **settings: Any) -> bytes:
        from txn_log.record.codec import encode_batch

        table = self._table()
        return encode_batch(table if count == table.num_rows else table.slice(0, count), **settings)

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


def encode_producer_batch(records: Sequence[ProducerRecord], **settings: Any) -> bytes:
    """One batch of ``records`` (``settings`` as ``encode_batch`` takes them): the columnar
    encoder (whole-batch work on Arrow buffers) for more than ``SMALL_BATCH_RECORDS`` records
    without headers, the per-record one otherwise. Both write the same bytes."""
    from txn_log.record.codec import encode_batch, encode_records

    if len(records) <= SMALL_BATCH_RECORDS or any(record.headers for record in records):
        return encode_records(records, **settings)
    import pyarrow as pa

    keys, values, timestamps, _ = zip(*records, strict=True)
    columns = pa.record_batch(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(timestamps, pa.int64()),
        ],
        names=["key", "value", "timestamp"],
    )
    return encode_batch(columns, **settings)
