"""A Kafka-mode copy query whose re-planned batches the tests change under it (issue 29 item 1):

    python -m integration.kafka_replan BOOTSTRAP CHECKPOINT OUT TOPIC[,TOPIC...] [MIN_PARTITIONS]

reads the topics through ``kafka.bootstrap.servers`` (``failOnDataLoss=false``, earliest) and
writes ``key`` and ``value`` unchanged to ``OUT`` through the Kafka-mode sink, Trigger.
AvailableNow, in a driver of its own (``local[2,3]``) that a test starts in a session of its
own and kills with ``TXNLOG_CRASH_POINT`` (``TXNLOG_CRASH_SCOPE=group``). ``copy_query`` is the
same query in the test's own SparkSession, for the restart."""

from __future__ import annotations

import sys
from typing import Any


def copy_query(
    spark: Any,
    bootstrap: str,
    checkpoint: str,
    out: str,
    topics: str,
    min_partitions: int | None = None,
) -> Any:
    """Start the copy query (see the module doc); returns the StreamingQuery."""
    reader = (
        spark.readStream.format("txnlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topics)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "false")
        .option("kafkaConsumer.pollTimeoutMs", "30000")
    )
    if min_partitions is not None:
        reader = reader.option("minPartitions", str(min_partitions))
    return (
        reader.load()
        .selectExpr("key", "value")
        .writeStream.format("txnlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def main(argv: list[str]) -> None:
    from integration.conftest import build_session

    bootstrap, checkpoint, out, topics, *rest = argv
    spark = build_session()
    try:
        query = copy_query(spark, bootstrap, checkpoint, out, topics, *map(int, rest[:1]))
        query.awaitTermination()
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
