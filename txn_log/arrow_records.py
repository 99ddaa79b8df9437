"""Reading a partition as Arrow record batches with Spark's Kafka source columns.

    key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us, UTC], timestampType int32 [, headers list<struct<key string,
    value binary>>]

This is the engine half of the Spark source (DESIGN §6): columns are built whole-batch from the
codec's Arrow output; no per-record Python objects. Memory is bounded by one output batch
(``max_rows``) plus one decoded log batch, whatever the size of the range.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from txn_log.record.batch_header import BatchHeader, TimestampType

if TYPE_CHECKING:
    from txn_log.consumer import Consumer, ReadStats
    from txn_log.topic_partition import TopicPartition

DEFAULT_MAX_ROWS = 65_536


def spark_kafka_schema(include_headers: bool = False) -> Any:
    """The Arrow schema of Spark's Kafka source (``headers`` only with ``includeHeaders``)."""
    import pyarrow as pa

    from txn_log.record.codec import HEADERS_TYPE

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


def to_spark_kafka(
    records: Any,
    topic: str,
    partition: int,
    timestamp_type: TimestampType,
    include_headers: bool = False,
) -> Any:
    """Turn the codec's decoded records into a batch of ``spark_kafka_schema``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = records.num_rows
    timestamps = pc.multiply(records.column("timestamp"), 1000).cast(pa.timestamp("us", tz="UTC"))
    columns = [
        records.column("key"),
        records.column("value"),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        records.column("offset"),
        timestamps,
        pa.repeat(pa.scalar(int(timestamp_type), pa.int32()), n),
    ]
    if include_headers:
        columns.append(records.column("headers"))
    return pa.RecordBatch.from_arrays(columns, schema=spark_kafka_schema(include_headers))


def read_spark_kafka_batches(
    consumer: Consumer,
    topic_partition: TopicPartition,
    start_offset: int,
    end_offset: int | None = None,
    *,
    include_headers: bool = False,
    max_rows: int = DEFAULT_MAX_ROWS,
    stats: ReadStats | None = None,
) -> Iterator[Any]:
    """Batches of at most ``max_rows`` rows for [start_offset, end_offset) at the consumer's
    isolation level, in offset order. Re-reading a range yields exactly the same rows."""
    batches = consumer.iter_record_batches(topic_partition, start_offset, end_offset, stats)
    return rebatch_spark_kafka(batches, topic_partition, include_headers, max_rows)


def rebatch_spark_kafka(
    batches: Iterable[tuple[BatchHeader, Any]],
    topic_partition: TopicPartition,
    include_headers: bool = False,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> Iterator[Any]:
    """Turn decoded log batches into ``spark_kafka_schema`` batches of at most ``max_rows``."""
    import pyarrow as pa

    pending: list[Any] = []
    pending_rows = 0
    tp = topic_partition
    for header, records in batches:
        batch = to_spark_kafka(
            records, tp.topic, tp.partition, header.timestamp_type, include_headers
        )
        while batch.num_rows:
            take = min(batch.num_rows, max_rows - pending_rows)
            pending.append(batch.slice(0, take))
            pending_rows += take
            batch = batch.slice(take)
            if pending_rows == max_rows:
                yield pa.concat_batches(pending) if len(pending) > 1 else pending[0]
                pending, pending_rows = [], 0
    if pending:
        yield pa.concat_batches(pending) if len(pending) > 1 else pending[0]
