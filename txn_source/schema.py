"""The source's output schema: exactly Spark's Kafka source columns.

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key string, value binary>>]   with includeHeaders=true

The executors' Arrow batches (``txn_log.arrow_records.spark_kafka_schema``) have exactly this
shape; Spark checks the two agree on every first batch of a task.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from txn_source.options import check_log_path, parse_source_options


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's ``KafkaRecordToRowConverter.kafkaSchema``."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def source_schema(options: Mapping[str, str]) -> StructType:
    """The schema for ``options``; validates them first, so that ``load()`` fails fast on a bad
    option or a path that is not a log, before any query starts."""
    parsed = parse_source_options(options)
    check_log_path(parsed.path)
    return kafka_schema(parsed.include_headers)
