"""Sink options and input columns, validated on the driver (no JVM needed)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
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

from txn_log.errors import ConfigError
from txn_sink.input_schema import validate_input_schema
from txn_sink.options import DEFAULT_BATCH_SIZE, SinkOptions

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def schema(**columns: object) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])  # type: ignore[arg-type]


def test_defaults_and_case_insensitive_keys(tmp_path: Path) -> None:
    options = SinkOptions.parse(
        {"PATH": str(tmp_path), "Topic": "t", "createTopic": "TRUE", "checkpointLocation": "/ck"}
    )
    assert options.path == str(tmp_path.resolve())
    assert (options.topic, options.create_topic, options.checkpoint_location) == ("t", True, "/ck")
    assert options.batch_size == DEFAULT_BATCH_SIZE
    assert options.transaction_timeout_ms == 900_000
    assert options.compression_type == "none"
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(AttributeError):
        options.topic = "u"  # type: ignore[misc]


def test_identity_defaults_derive_from_the_run(tmp_path: Path) -> None:
    plain = SinkOptions.parse({"path": str(tmp_path)})
    sink = plain.identity("spark-query-q", "q")
    assert (sink.sink_id, sink.prefix, sink.group_id) == ("spark-query-q", "txnlog-q", "txnlog-q")
    explicit = SinkOptions.parse(
        {"path": str(tmp_path), "transactional.id.prefix": "orders", "group.id": "g"}
    )
    sink = explicit.identity("spark-query-q", "q")
    assert (sink.sink_id, sink.prefix, sink.group_id) == ("spark-query-q", "orders", "g")
    assert explicit.task_settings.compression == "none"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "option 'path' is required"),
        ({"path": "hdfs://nn/log"}, "must be a local directory"),
        ({"topic": "a/b"}, "option 'topic'.*contains '/'"),
        ({"transaction.timeout.ms": "0"}, "'transaction.timeout.ms' must be from 1 to 900000"),
        ({"transaction.timeout.ms": "soon"}, "must be an integer, got 'soon'"),
        ({"batch.size": "-1"}, "'batch.size' must be from 1"),
        ({"buffer.memory": "0"}, "'buffer.memory' must be from 1"),
        ({"compression.type": "brotli"}, "none, gzip, snappy, lz4, zstd, got 'brotli'"),
        ({"createTopic": "yes"}, "'createTopic' must be true or false"),
        ({"createTopic.partitions": "0"}, "'createTopic.partitions' must be from 1"),
        ({"transactional.id.prefix": " "}, "transactional.id.prefix must be a non-empty"),
        ({"group.id": ""}, "group id must be a non-empty string"),
        ({"kafka.bootstrap.servers": "h:1"}, "'path'.*'kafka.bootstrap.servers'.*exactly one"),
        ({"kafka.client.id": "x"}, "'kafka.client.id' configure.*txnlog directory does not"),
    ],
)
def test_bad_options_name_the_option_and_valid_values(
    tmp_path: Path, options: dict[str, str], message: str
) -> None:
    given = {"path": str(tmp_path), **options} if "path" not in options else options
    if options == {}:
        given = {}
    with pytest.raises(ConfigError, match=message):
        SinkOptions.parse(given)


def test_compression_names_are_normalised(tmp_path: Path) -> None:
    assert (
        SinkOptions.parse({"path": str(tmp_path), "compression.type": "ZSTD"}).compression_type
        == "zstd"
    )


def test_every_sink_column_with_an_accepted_type() -> None:
    columns = validate_input_schema(
        schema(
            key=StringType(),
            value=BinaryType(),
            topic=StringType(),
            partition=IntegerType(),
            headers=HEADERS,
            timestamp=TimestampType(),
            extra=LongType(),
        ),
        None,
    )
    assert columns.record_columns == ("value", "key", "timestamp", "headers")
    assert columns.has_key and columns.has_topic and columns.has_partition
    only_value = validate_input_schema(schema(value=StringType(), topic=StringType()), "t")
    assert only_value.names == ("value",)  # the topic option overrides the column


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (
            {"key": BinaryType()},
            r"required column 'value' \(binary or string\) not found; input columns: key binary",
        ),
        (
            {"value": LongType()},
            "column 'value' has unsupported type bigint; 'value' must be binary or string",
        ),
        ({"value": BinaryType(), "key": IntegerType()}, "'key' must be binary or string"),
        ({"value": BinaryType(), "partition": LongType()}, "'partition' must be int"),
        ({"value": BinaryType(), "timestamp": LongType()}, "'timestamp' must be timestamp"),
        (
            {"value": BinaryType(), "headers": ArrayType(StringType())},
            "array<struct<key:string,value:binary>>",
        ),
    ],
)
def test_bad_columns_name_the_column_and_accepted_types(
    columns: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_input_schema(schema(**columns), "t")


def test_no_topic_column_and_no_option() -> None:
    with pytest.raises(ConfigError, match="set the topic option"):
        validate_input_schema(schema(value=BinaryType()), None)
    with pytest.raises(ConfigError, match="'topic' must be string"):
        validate_input_schema(schema(value=BinaryType(), topic=IntegerType()), None)
