"""The source's own rules for Kafka mode's options (DESIGN §6): which ``kafka.*`` client
settings it decides itself, and Spark's default poll timeout. Pure data, no Kafka import;
``options`` applies them (through ``datasource_options.location.parse_location``).
"""

from __future__ import annotations

DEFAULT_POLL_TIMEOUT_MS = 120_000
"""Spark's ``kafkaConsumer.pollTimeoutMs`` default (``spark.network.timeout``, 120 s)."""
REFUSED_KAFKA_OPTIONS = {
    "kafka.group.id": "the source reads with assigned consumers that join no group and commit "
    "nothing; its progress is the query's checkpoint (remove the option)",
    "kafka.auto.offset.reset": "set the source option 'startingOffsets' instead (earliest, "
    "latest or JSON offsets); offsets the log no longer holds follow 'failOnDataLoss'",
    "kafka.enable.auto.commit": "the source never commits offsets to Kafka; its progress is "
    "the query's checkpoint (remove the option)",
    "kafka.key.deserializer": "keys are always read as bytes (column 'key', binary); "
    "deserialize them with DataFrame operations such as CAST(key AS STRING)",
    "kafka.value.deserializer": "values are always read as bytes (column 'value', binary); "
    "deserialize them with DataFrame operations such as CAST(value AS STRING)",
    "kafka.interceptor.classes": "consumer interceptors are Java classes; the source's "
    "librdkafka consumers have none",
    "kafka.enable.partition.eof": "the source sets it itself: executors stop on their "
    "position reaching the planned end offset",
}
"""``kafka.*`` options the source decides itself (as Spark's Kafka source refuses them), each
with what to do instead."""
