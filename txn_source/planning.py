"""From two positions to read tasks: the ranges of a batch, checked against what the log still
holds, split by ``minPartitions`` / ``maxRecordsPerPartition``, each with the aborted
transactions it overlaps (DESIGN §6).

A partition in ``end`` but not in ``start`` appeared after ``start`` was taken (a partition
added to a topic, a new topic matching ``subscribePattern``): it is read from offset 0, its
first offset.

The plan's SHAPE (how many tasks, which range of which partition each covers, in which order)
depends only on the two positions and the options, never on the log's state when it is
planned (DESIGN §6). Kafka mode's sink identifies a task in its ledger by its position in
this plan ("task *i* of batch *N* committed": Spark gives a write task the partition id of the
read task it follows, and the sink cannot see what that task read), and Spark re-plans a batch
whose driver died from the same checkpointed positions. Were deleted offsets trimmed before
splitting, or a vanished partition or an emptied range dropped, the tasks after it would shift
down onto positions that other work committed: a task found "committed" and skipped would lose
records still in the log, a committed one re-run in another position would duplicate them.
So the ranges of ``[start, end)`` are split first, exactly as planned the first time; then each
task's range is cut to what the log still holds (``data_loss``: offsets the log no longer holds
are data loss, raised under ``failOnDataLoss=true``, logged under ``false``), and a task left
with nothing (its partition gone, or every offset of it deleted) stays in its position as an
empty range that reads nothing. A task that committed ``[0, 10)`` keeps position *i* when the
re-plan cuts it to ``[3, 10)``, and the ledger skips it (no duplicate); one that had not
committed reads ``[3, 10)``, losing only the deleted offsets, as ``failOnDataLoss=false``
permits. The alternatives, a task identity made of what it reads (the sink cannot see it) or a
plan persisted per batch (the source has no access to the checkpoint), are not open here.
The embedded sink commits a batch atomically and does not depend on positions; the same
deterministic shape only makes it more robust.

The view is either mode's (``source_view``); the tasks are ``TxnLogInputPartition`` for a log
directory and ``KafkaInputPartition`` for a Kafka cluster.
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
    """The read tasks for offsets ``[start, end)``, in (topic, partition, offset) order; the
    same tasks in the same positions on every re-plan from the same positions (see the module
    doc), each cut to what the log holds now."""
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
        since = start.get(tp, NEW_PARTITION_START)
        if until < since:
            report_data_loss(
                options.fail_on_data_loss, f"the offset of {tp} went back from {since} to {until}"
            )
            continue
        ranges.append(OffsetRange(tp, since, until))
    tasks = plan_ranges(
        ranges,
        min_partitions=options.min_partitions,
        max_records_per_partition=options.max_records_per_partition,
    )
    logger.info("planned %d tasks over %s", len(tasks), ", ".join(map(str, ranges)) or "nothing")
    bounds = _LogBounds(view, [r.topic_partition for r in ranges])
    for empty in (r for r in ranges if r.size == 0):  # no task, but a vanished partition is
        bounds.readable(options, empty)  # reported all the same
    return [_input_partition(view, options, bounds, bounds.readable(options, r)) for r in tasks]


class _LogBounds:
    """What the log holds of each partition of a plan now, and each topic's id: the ids first,
    then every partition's bounds in one ``log_bounds`` call, when the first is needed."""

    def __init__(self, view: SourceView, partitions: list[TopicPartition]) -> None:
        self._view = view
        self._partitions = partitions
        self._known: dict[TopicPartition, tuple[int, int] | None] | None = None
        self._topic_ids: dict[str, str | None] = {}

    def topic_id(self, tp: TopicPartition) -> str | None:
        """The id of ``tp``'s topic now (None where the view does not know ids)."""
        if tp.topic not in self._topic_ids:
            self._topic_ids[tp.topic] = self._view.topic_id(tp)
        return self._topic_ids[tp.topic]

    def _of(self, tp: TopicPartition) -> tuple[int, int] | None:
        """``(log start, log end)``; None when the partition is gone. The topics' ids are
        taken first: a topic re-created after it cannot lend its bounds to a task that names
        the old id's successor, so the executor sees the change and reports it."""
        if self._known is None:
            for planned in self._partitions:
                if planned.topic not in self._topic_ids and self._view.exists(planned):
                    self.topic_id(planned)
            self._known = self._view.log_bounds(self._partitions)
        return self._known.get(tp)

    def readable(self, options: SourceOptions, planned: OffsetRange) -> OffsetRange:
        """``planned`` cut to what the log holds (the loss reported); an empty range at
        ``planned.end`` when nothing is left of it or its partition is gone."""
        tp = planned.topic_partition
        bounds = self._of(tp)
        if bounds is None:
            report_partition_gone(options.fail_on_data_loss, tp, planned.start, planned.end)
            return OffsetRange(tp, planned.end, planned.end)
        log_start, log_end = bounds
        return readable_range(
            planned,
            log_start=log_start,
            log_end=log_end,
            fail_on_data_loss=options.fail_on_data_loss,
        )


def _input_partition(
    view: SourceView, options: SourceOptions, bounds: _LogBounds, offset_range: OffsetRange
) -> InputPartition:
    """The read task of ``offset_range``, with the topic id it was planned on (DESIGN §6:
    the executor checks it, so a topic re-created since is data loss, never a source of
    records for offsets planned on the old one); an empty range needs no lookups."""
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
    topic_id = bounds.topic_id(tp) if offset_range.size else None
    if options.kafka is not None:
        return KafkaInputPartition(
            **planned,
            cluster=options.kafka,
            poll_timeout_ms=options.poll_timeout_ms,
            topic_id=topic_id,
        )
    if offset_range.size == 0:  # nothing left to read: nothing to look up either
        return TxnLogInputPartition(**planned, path=options.path)
    # the topic id was asked first: a topic re-created before the aborted transactions are
    # collected is then seen as gone by the executor (``log_view.aborted_txns``)
    return TxnLogInputPartition(
        **planned,
        path=options.path,
        aborted_txns=view.aborted_txns(offset_range),
        topic_id=topic_id,
    )
