"""Reading as Arrow batches with Spark's Kafka columns (DESIGN §6): ``txn_source.spark_columns``
over the engine's decoded batches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from txn_log.consumer.consumer import Consumer, ReadStats
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_source.schema import arrow_kafka_schema, kafka_schema
from txn_source.spark_columns import DEFAULT_MAX_ROWS, rebatch_spark_kafka

TP = TopicPartition("t", 1)


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
    isolation level, in offset order; re-reading a range yields exactly the same rows. The
    engine consumer's decoded batches through the source's column builder: an oracle for it
    (executors read a planned range's deliverable batches instead, ``txn_source.partition``)."""
    batches = consumer.iter_record_batches(topic_partition, start_offset, end_offset, stats)
    return rebatch_spark_kafka(batches, topic_partition, include_headers, max_rows)


def fill(log: Log) -> None:
    log.create_topic("t", partitions=2)
    producer = log.producer("w")
    producer.init_transactions()
    for txn in range(6):
        producer.begin_transaction()
        for i in range(50):
            producer.send(
                "t",
                b"v%d-%d" % (txn, i),
                key=b"k%d" % i,
                partition=1,
                headers=[("h", b"%d" % i)],
                timestamp_ms=1_000 + i,
            )
        if txn % 3 == 1:
            producer.flush()
            producer.abort_transaction()
        else:
            producer.commit_transaction()


def test_rows_match_the_record_reader_and_repeat_exactly(tmp_path: Path) -> None:
    log = Log.open(tmp_path)
    fill(log)
    consumer = log.consumer()
    stats = ReadStats()
    batches = list(
        read_spark_kafka_batches(consumer, TP, 0, include_headers=True, max_rows=64, stats=stats)
    )
    assert all(b.schema == arrow_kafka_schema(True) for b in batches)
    assert [b.num_rows for b in batches] == [64, 64, 64, 8]
    table = pa.Table.from_batches(batches)
    records = consumer.read(TP, 0)
    assert table.column("offset").to_pylist() == [r.offset for r in records]
    assert table.column("value").to_pylist() == [r.value for r in records]
    assert table.column("key").to_pylist() == [r.key for r in records]
    assert set(table.column("topic").to_pylist()) == {"t"}
    assert set(table.column("partition").to_pylist()) == {1}
    assert table.column("timestampType").to_pylist() == [0] * 200
    assert table.column("timestamp").cast(pa.int64()).to_pylist()[:2] == [1_000_000, 1_001_000]
    assert table.column("headers").to_pylist()[3] == [{"key": "h", "value": b"3"}]
    assert stats.records == 200 and stats.aborted_records_skipped == 100
    assert stats.control_records_skipped == 6
    again = pa.Table.from_batches(list(read_spark_kafka_batches(consumer, TP, 0, max_rows=64)))
    assert again.drop_columns([]) == table.drop_columns(["headers"])


def test_a_range_of_only_markers_and_aborted_records_yields_nothing(tmp_path: Path) -> None:
    log = Log.open(tmp_path)
    fill(log)
    consumer = log.consumer()
    # offsets 51..101 are the aborted second transaction and its marker
    assert list(read_spark_kafka_batches(consumer, TP, 51, 102)) == []
    uncommitted = log.consumer("read_uncommitted")
    rows = sum(b.num_rows for b in read_spark_kafka_batches(uncommitted, TP, 51, 102))
    assert rows == 50
    middle = pa.Table.from_batches(list(read_spark_kafka_batches(consumer, TP, 25, 60)))
    assert middle.column("offset").to_pylist() == list(range(25, 50))


def test_the_arrow_columns_are_the_spark_columns() -> None:
    """One definition (``txn_source.schema.COLUMNS``): Spark's own conversion of the executors'
    Arrow schema is the schema the driver declares, with and without headers."""
    from pyspark.sql.pandas.types import from_arrow_schema

    for include_headers in (False, True):
        arrow = arrow_kafka_schema(include_headers)
        assert from_arrow_schema(arrow) == kafka_schema(include_headers)


def decoded_batches(sizes: list[int]) -> list[tuple[Any, Any]]:
    """Decoded log batches of ``sizes`` records each, offsets following on."""
    from txn_log.record.codec import decode_batch, encode_records

    out, offset = [], 0
    for size in sizes:
        rows = [(b"k%d" % i, b"v%d" % i, 1_000, ()) for i in range(offset, offset + size)]
        decoded = decode_batch(encode_records(rows, now_ms=1_000, base_offset=offset))
        out.append((decoded.header, decoded.records))
        offset += size
    return out


def test_large_log_batches_leave_without_a_copy_and_small_ones_are_gathered() -> None:
    """A decoded log batch of at least ``min_rows`` rows is handed on as it is (its key and
    value buffers are the decoder's, sliced to ``max_rows``): concatenating it with others
    would copy every byte once more; smaller ones are gathered to at least ``min_rows``."""
    large = decoded_batches([5_000, 4_100, 9_000])
    out = list(rebatch_spark_kafka(large, TP, max_rows=8_192, min_rows=4_096))
    assert [b.num_rows for b in out] == [5_000, 4_100, 8_192, 808]
    for batch, (_, records) in zip(out, [large[0], large[1], large[2]], strict=False):
        for column in ("key", "value"):
            assert batch.column(column).buffers()[2].address == (
                records.column(column).buffers()[2].address
            )
    small = decoded_batches([1_000] * 10)
    gathered = list(rebatch_spark_kafka(small, TP, max_rows=65_536, min_rows=4_096))
    assert [b.num_rows for b in gathered] == [5_000, 5_000]
    table = pa.Table.from_batches(gathered)
    assert table.column("offset").to_pylist() == list(range(10_000))
