"""The source's output schema: exactly Spark's Kafka source columns, defined once.

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key string, value binary>>]   with includeHeaders=true

``COLUMNS`` gives each column's Spark type (``kafka_schema``, what the driver declares) and
Arrow type (``arrow_kafka_schema``, what the executors' batches carry, built by
``txn_source.spark_columns``) side by side: Spark checks that the two agree on every first
batch of a task. The engine knows nothing of these columns: it decodes records into its own
Arrow schema (``txn_log.record.codec.RECORD_SCHEMA``), whose ``headers`` type is used as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from txn_log.record.codec import HEADERS_TYPE
from txn_source.options import check_location, parse_source_options

COLUMNS: tuple[tuple[str, DataType, Any], ...] = (
    ("key", BinaryType(), pa.binary()),
    ("value", BinaryType(), pa.binary()),
    ("topic", StringType(), pa.string()),
    ("partition", IntegerType(), pa.int32()),
    ("offset", LongType(), pa.int64()),
    ("timestamp", TimestampType(), pa.timestamp("us", tz="UTC")),
    ("timestampType", IntegerType(), pa.int32()),
)
"""Spark's ``KafkaRecordToRowConverter.kafkaSchema``: name, Spark type, Arrow type."""
HEADERS_COLUMN: tuple[str, DataType, Any] = (
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
    HEADERS_TYPE,
)
"""The column ``includeHeaders=true`` adds, last."""


def _columns(include_headers: bool) -> tuple[tuple[str, DataType, Any], ...]:
    return (*COLUMNS, HEADERS_COLUMN) if include_headers else COLUMNS


def kafka_schema(include_headers: bool) -> StructType:
    """The Spark schema of Spark's Kafka source (``headers`` only with ``includeHeaders``)."""
    return StructType([StructField(name, spark) for name, spark, _ in _columns(include_headers)])


def arrow_kafka_schema(include_headers: bool = False) -> Any:
    """The same columns as an Arrow schema: the executors' record batches."""
    return pa.schema([pa.field(name, arrow) for name, _, arrow in _columns(include_headers)])


def source_schema(options: Mapping[str, str]) -> StructType:
    """The schema for ``options``; validates them first, so that ``load()`` fails fast on a bad
    option or a path that is not a log, before any query starts (a Kafka cluster is first
    reached when a query plans, as with Spark's Kafka source)."""
    parsed = parse_source_options(options)
    check_location(parsed)
    return kafka_schema(parsed.include_headers)
