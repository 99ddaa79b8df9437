"""Helpers for the sink's Spark tests in Kafka mode (``test_sink_kafka.py``): the counter
stream written with ``kafka.bootstrap.servers`` instead of a path, a confluent-kafka
read_committed read-back, and a driver process of its own for the crash tests:

    python -m integration.kafka_sink_helpers BOOTSTRAP CHECKPOINT LIMIT_FILE

runs the stream once (Trigger.AvailableNow) in a ``local[2,3]`` session (a failed task attempt
is retried) and exits 0 when it ended."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition

from integration.sink_helpers import OUT, CounterSource, stop

GROUP = "g-kafka-sink"


def run_kafka_stream(spark: Any, bootstrap: str, checkpoint: str, limit: Path) -> None:
    spark.dataSource.register(CounterSource)
    query = (
        spark.readStream.format("txnlog_test_counter")
        .option("limitFile", str(limit))
        .option("rowsPerBatch", "40")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("txnlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("checkpointLocation", checkpoint)
        .option("topic", OUT)
        .option("group.id", GROUP)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        stop(spark, query)


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, str, str]]:
    """Every committed record of ``topic``: ``(partition, key, value)``, each partition read
    from 0 until the consumer's position reaches its last stable offset."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "read-back",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    out: list[tuple[int, str, str]] = []
    try:
        for partition in range(partitions):
            _, end = consumer.get_watermark_offsets(KafkaPartition(topic, partition), 30)
            consumer.assign([KafkaPartition(topic, partition, 0)])
            position = 0
            while position < end:
                for message in consumer.consume(500, 1.0):
                    if message.error() is None and message.offset() < end:
                        out.append((partition, message.key().decode(), message.value().decode()))
                position = consumer.position([KafkaPartition(topic, partition)])[0].offset
    finally:
        consumer.close()
    return out


def main(argv: list[str]) -> None:
    from integration.conftest import build_session

    bootstrap, checkpoint, limit = argv
    spark = build_session()
    try:
        run_kafka_stream(spark, bootstrap, checkpoint, Path(limit))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
