"""From two positions to read tasks: the ranges of a batch, checked against what the log still
holds, split by ``minPartitions`` / ``maxRecordsPerPartition``, each with the aborted
transactions it overlaps (DESIGN §6).

A partition in ``end`` but not in ``start`` appeared after ``start`` was taken (a partition
added to a topic, a new topic matching ``subscribePattern``): it is read from offset 0, its
first offset, so a plan depends only on its two positions and re-planning a batch reads the
same records. Offsets the log no longer holds are data loss (``data_loss``).

The view is either mode's (``source_view``); the tasks are ``TxnLogInputPartition`` for a log
directory and ``KafkaInputPartition`` for a Kafka cluster (issue 16).
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql.datasource import InputPartition

from offsets.offset_range import OffsetRange, plan_ranges
from offsets.partition_offsets import PartitionOffsets
from txn_log.topic_partition import TopicPartition
from txn_source.data_loss import readable_range, report_data_loss, report_partition_gone
from txn_source.kafka_partition import KafkaInputPartition
from txn_source.options import SourceOptions
from txn_source.partition import TxnLogInputPartition
from txn_source.source_view import SourceView

logger = logging.getLogger(__name__)

NEW_PARTITION_START = 0


def plan_input_partitions(
    view: SourceView, options: SourceOptions, start: PartitionOffsets, end: PartitionOffsets
) -> list[InputPartition]:
    """The read tasks for offsets ``[start, end)``, in (topic, partition, offset) order."""
    for tp in start.partitions:
        if tp not in end:
            report_partition_gone(
                options.fail_on_data_loss,
                tp,
                start[tp],
                cause="its topic was deleted or is no longer subscribed",
            )
    ranges = []
    for tp, until in end.entries:
        offset_range = _checked_range(view, options, tp, start.get(tp, NEW_PARTITION_START), until)
        if offset_range is not None:
            ranges.append(offset_range)
    tasks = plan_ranges(
        ranges,
        min_partitions=options.min_partitions,
        max_records_per_partition=options.max_records_per_partition,
    )
    logger.info("planned %d tasks over %s", len(tasks), ", ".join(map(str, ranges)) or "nothing")
    return [_input_partition(view, options, r) for r in tasks]


def _checked_range(
    view: SourceView, options: SourceOptions, tp: TopicPartition, start: int, end: int
) -> OffsetRange | None:
    if not view.exists(tp):
        report_partition_gone(options.fail_on_data_loss, tp, start, end)
        return None
    if end < start:
        report_data_loss(
            options.fail_on_data_loss, f"the offset of {tp} went back from {start} to {end}"
        )
        return None
    return readable_range(
        OffsetRange(tp, start, end),
        log_start=view.earliest(tp),
        log_end=view.log_end(tp),
        fail_on_data_loss=options.fail_on_data_loss,
    )


def _input_partition(
    view: SourceView, options: SourceOptions, offset_range: OffsetRange
) -> InputPartition:
    tp = offset_range.topic_partition
    planned: dict[str, Any] = {
        "topic": tp.topic,
        "partition": tp.partition,
        "start": offset_range.start,
        "end": offset_range.end,
        "isolation_level": options.isolation_level.name.lower(),
        "include_headers": options.include_headers,
        "fail_on_data_loss": options.fail_on_data_loss,
    }
    if options.kafka is not None:
        return KafkaInputPartition(
            **planned, cluster=options.kafka, poll_timeout_ms=options.poll_timeout_ms
        )
    topic_id = view.topic_id(tp)  # first: a topic re-created meanwhile is then seen as gone
    return TxnLogInputPartition(
        **planned,
        path=options.path,
        aborted_txns=view.aborted_txns(offset_range),
        topic_id=topic_id,
    )
