"""One read task: ``TxnLogInputPartition`` (planned on the driver, pickled to an executor) and
``read_partition``, which turns it into Arrow record batches with Spark's Kafka columns.

The driver planned everything an executor needs (DESIGN §6): the range ``[start, end)`` (under
read_committed ``end`` ≤ the LSO when planned) and the aborted transactions overlapping it, so
the executor reads segment files directly, drops control batches and the batches of those
transactions, and never scans for markers or consults producer state. The partition is opened
with ``open_partition_reader``: no lock, no recovery, O(segments) to open.

Memory stays bounded by one output batch (``MAX_ROWS_PER_BATCH`` rows) plus one decoded log
batch, whatever the size of the range. Reading the same partition twice yields the same rows:
nothing here depends on anything but the partition and the files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import InputPartition

from offsets.offset_range import OffsetRange
from txn_log.consumer.consumer import ReadStats, iter_deliverable_batches
from txn_log.errors import UnknownTopicOrPartitionError
from txn_log.storage.partition_reader import PartitionReader, open_partition_reader
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition
from txn_source.data_loss import readable_range, report_partition_gone
from txn_source.read_metrics import report_read
from txn_source.spark_columns import rebatch_spark_kafka

MAX_ROWS_PER_BATCH = 65_536
MIN_ROWS_PER_BATCH = 4_096
"""Decoded log batches of at least this many rows go to Spark as they are; smaller ones are
gathered (``spark_columns.rebatch_spark_kafka``). A batch of the producer's default 512 KiB
or the sink's 1 MB holds 4,000-8,000 records of ~130 bytes: concatenating them into batches
of ``MAX_ROWS_PER_BATCH`` copied every byte once more, for nothing Spark gains."""


@dataclass(frozen=True)
class PlannedRange(InputPartition):
    """What every read task is planned with, in either mode: offsets ``[start, end)`` of one
    partition, read at ``isolation_level`` (``read_committed`` / ``read_uncommitted``)."""

    topic: str
    partition: int
    start: int
    end: int
    isolation_level: str
    include_headers: bool
    fail_on_data_loss: bool

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def offset_range(self) -> OffsetRange:
        return OffsetRange(self.topic_partition, self.start, self.end)


@dataclass(frozen=True)
class TxnLogInputPartition(PlannedRange):
    """Read offsets ``[start, end)`` of one partition of the log at ``path``.

    ``aborted_txns`` holds every aborted transaction overlapping the range (empty under
    read_uncommitted, which delivers aborted records too). ``topic_id`` is the id of the topic
    the range was planned on: a topic deleted and created again under the same name since is
    data loss, never a source of records for offsets planned on the old one.
    """

    path: str
    aborted_txns: tuple[AbortedTxn, ...] = ()
    topic_id: str | None = None


def read_partition(partition: InputPartition) -> Iterator[Any]:
    """Arrow batches of ``partition``'s deliverable records, in offset order.

    Spark hands a batch read with nothing to read a plain ``InputPartition(None)``: no rows.
    """
    if not isinstance(partition, TxnLogInputPartition):
        return iter(())
    return _read(partition)


def _read(p: TxnLogInputPartition) -> Iterator[Any]:
    tp = p.topic_partition
    if p.start >= p.end:  # planned empty: what it had was lost, and reported (planning)
        return
    plog = _open(p)
    if plog is None:
        return
    try:
        start, end = _readable_range(p, plog)
        if start >= end:
            return
        stats = ReadStats()
        batches = iter_deliverable_batches(plog, start, end, p.aborted_txns, stats)
        yield from rebatch_spark_kafka(
            batches, tp, p.include_headers, MAX_ROWS_PER_BATCH, MIN_ROWS_PER_BATCH
        )
        report_read(p.path, tp, start, end, stats)
    finally:
        plog.close()


def _open(p: TxnLogInputPartition) -> PartitionReader | None:
    """The partition, opened to read only; None (after reporting data loss) when it is gone."""
    directory = Path(p.path) / p.topic_partition.directory_name
    config = TopicConfig()  # reading needs no topic config: segment files describe themselves
    try:
        plog = open_partition_reader(directory, p.topic_partition, config)
    except UnknownTopicOrPartitionError:
        report_partition_gone(p.fail_on_data_loss, p.topic_partition, p.start, p.end)
        return None
    if p.topic_id is not None and plog.topic_id != p.topic_id:
        plog.close()
        report_partition_gone(
            p.fail_on_data_loss,
            p.topic_partition,
            p.start,
            p.end,
            cause=f"its topic was deleted and re-created: topic id {p.topic_id} is now "
            f"{plog.topic_id}",
        )
        return None
    return plog


def _readable_range(p: TxnLogInputPartition, plog: PartitionReader) -> tuple[int, int]:
    """The planned range, less what retention deleted since planning (data loss)."""
    kept = readable_range(
        p.offset_range,
        log_start=plog.log_start_offset,
        log_end=plog.log_end_offset,
        fail_on_data_loss=p.fail_on_data_loss,
    )
    return kept.start, kept.end
