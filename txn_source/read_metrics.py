"""Per-task read metrics of the source (DESIGN §6).

Spark's Python data source API has no channel for custom source metrics (a Python stream is
not a ``ReportsSourceMetrics``), so every read task logs one record at INFO on the logger
``txnlog.source.metrics``, with the figures in its ``context`` (strings, as Spark's log schema
wants them):

    path, topic, partition, startOffset, endOffset       the range read, [start, end)
    recordsRead                                          records delivered to Spark
    abortedRecordsSkipped, controlRecordsSkipped         what read_committed left out

With ``spark.sql.pyspark.worker.logging.enabled=true`` Spark collects these records from its
Python workers: ``spark.tvf.python_worker_logs().where("logger = 'txnlog.source.metrics'")``.
Otherwise no handler takes them and they cost one formatted record per task. Records read per
micro-batch are also Spark's own ``numInputRows``; the lag behind the last stable offset is
``latestOffset`` (the LSO, from ``reportLatestOffset``) minus ``endOffset`` in the query's
progress.
"""

from __future__ import annotations

import logging

from txn_log.consumer.consumer import ReadStats
from txn_log.topic_partition import TopicPartition

METRICS_LOGGER = "txnlog.source.metrics"
metrics_logger = logging.getLogger(METRICS_LOGGER)
metrics_logger.setLevel(logging.INFO)  # the root's WARNING would drop them before any handler


def report_read(path: str, tp: TopicPartition, start: int, end: int, stats: ReadStats) -> None:
    """Log what one read task read of ``tp``'s offsets ``[start, end)``."""
    context = {
        "path": path,
        "topic": tp.topic,
        "partition": str(tp.partition),
        "startOffset": str(start),
        "endOffset": str(end),
        "recordsRead": str(stats.records),
        "abortedRecordsSkipped": str(stats.aborted_records_skipped),
        "controlRecordsSkipped": str(stats.control_records_skipped),
    }
    metrics_logger.info(
        "%s [%d, %d): %d records read, %d aborted records and %d control records skipped",
        tp, start, end, stats.records, stats.aborted_records_skipped,
        stats.control_records_skipped, extra={"context": context},
    )  # fmt: skip
