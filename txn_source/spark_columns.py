"""Decoded log batches as Arrow record batches with Spark's Kafka source columns (DESIGN §6).

The engine decodes each record batch into its own Arrow columns (``txn_log.record.codec``:
offset, timestamp in ms, key, value, headers); this module turns those into the source's
columns (``txn_source.schema``) whole-batch, without per-record Python objects, and cuts the
stream into batches of at most ``max_rows`` rows. Memory is bounded by one output batch plus
one decoded log batch, whatever the size of the range. Pure functions over Arrow data.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txn_log.record.batch_header import BatchHeader, TimestampType
from txn_log.topic_partition import TopicPartition
from txn_source.schema import arrow_kafka_schema

DEFAULT_MAX_ROWS = 65_536
DEFAULT_MIN_ROWS = 4_096
_MS_TO_US = pa.scalar(1000, pa.int64())
"""A typed scalar: a Python int given to ``pc.multiply`` is converted anew on every call,
and pyarrow's conversion tries to import ``dateutil`` each time (~50 us a batch here)."""


def to_spark_kafka(
    records: Any,
    topic: str,
    partition: int,
    timestamp_type: TimestampType,
    include_headers: bool = False,
) -> Any:
    """Turn the codec's decoded records into a batch of ``arrow_kafka_schema``."""
    n = records.num_rows
    timestamps = pc.multiply(records.column("timestamp"), _MS_TO_US).cast(
        pa.timestamp("us", tz="UTC")
    )
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
    return pa.RecordBatch.from_arrays(columns, schema=arrow_kafka_schema(include_headers))


def rebatch_spark_kafka(
    batches: Iterable[tuple[BatchHeader, Any]],
    topic_partition: TopicPartition,
    include_headers: bool = False,
    max_rows: int = DEFAULT_MAX_ROWS,
    min_rows: int = DEFAULT_MIN_ROWS,
) -> Iterator[Any]:
    """Turn decoded log batches into ``arrow_kafka_schema`` batches of at most ``max_rows``.

    Rows gather until there are at least ``min(min_rows, max_rows)``: a decoded log batch of
    that many rows or more leaves as it is (sliced to ``max_rows``, without copying its
    columns), smaller ones are concatenated into one batch. Every batch but the last has at
    least ``min(min_rows, max_rows)`` rows.
    """
    pending: list[Any] = []
    pending_rows = 0
    enough = min(min_rows, max_rows)
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
            if pending_rows >= enough:
                yield pa.concat_batches(pending) if len(pending) > 1 else pending[0]
                pending, pending_rows = [], 0
    if pending:
        yield pa.concat_batches(pending) if len(pending) > 1 else pending[0]
