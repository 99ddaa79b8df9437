"""Executor side: one write task routes Spark's Arrow batches to partitions (DESIGN §5).

Each input batch is routed row by row without a Python loop: rows go to the topic of the
option or of their ``topic`` column, then to the partition of their ``partition`` column, else
to Kafka's murmur2 partition of their key, else round-robin (null keys). Each partition's rows
are taken into a compact Arrow batch and sent to the task's transaction, whose producer
buffers them (the engine's ``Producer.send_batch``): a partition's buffer leaves as one record
batch when the next piece would push it past ``batch.size`` (capped by the topic's
``max.message.bytes``), and the largest buffers leave early so that all of them together stay
within ``buffer.memory``. So a task holds at most ``buffer.memory`` bytes of rows (plus one
input batch and one batch being encoded) whatever the size of the micro-batch. Rows keep their
input order within a partition. Not thread-safe: one task, one thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from commit_protocol.backend import LogBackend, TaskTransaction
from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity
from commit_protocol.messages import TaskCommit
from txn_log.errors import InvalidRecordError, UnknownTopicOrPartitionError
from txn_log.fault_points import crash_point
from txn_log.topic_partition import TopicPartition
from txn_sink.input_schema import InputColumns
from txn_sink.key_partitioner import NO_PARTITION, partitions_for_keys
from txn_sink.options import SinkOptions
from txn_sink.topics import ensure_topic, open_backend

SCAN_PARTITIONS = 16
"""Up to this many partitions, rows are grouped by one scan per partition instead of a sort."""


@dataclass(frozen=True)
class _TopicInfo:
    partitions: int


class PartitionRouter:
    """Splits input batches into ``(partition, record columns)`` pieces (see module doc)."""

    def __init__(
        self, backend: LogBackend, options: SinkOptions, columns: InputColumns, task_id: int
    ) -> None:
        self._backend = backend
        self._options = options
        self._columns = columns
        self._topics: dict[str, _TopicInfo] = {}
        self._next_round_robin = task_id  # tasks start apart, spreading null keys

    def route(self, batch: Any) -> Iterator[tuple[TopicPartition, Any]]:
        if batch.num_rows == 0:
            return
        for topic, rows in self._by_topic(batch):
            yield from self._by_partition(topic, rows)

    def _by_topic(self, batch: Any) -> Iterator[tuple[str, Any]]:
        if not self._columns.has_topic:
            yield self._topic_option(), batch
            return
        topics = batch.column("topic")
        if topics.null_count:
            raise InvalidRecordError(
                "null topic present in the data (column 'topic'); set the topic option or fill "
                "the column"
            )
        encoded = topics.dictionary_encode()
        names = encoded.dictionary.to_pylist()
        if len(names) == 1:
            yield names[0], batch
            return
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        for index, name in enumerate(names):
            yield name, batch.filter(pa.array(indices == index))

    def _topic_option(self) -> str:
        if self._options.topic is None:  # the driver checked the schema; keep the error clear
            raise InvalidRecordError("no topic option and no 'topic' column")
        return self._options.topic

    def _info(self, topic: str) -> _TopicInfo:
        info = self._topics.get(topic)
        if info is None:
            ensure_topic(self._backend, self._options, topic)
            info = self._topics[topic] = _TopicInfo(self._backend.partition_count(topic))
        return info

    def _by_partition(self, topic: str, batch: Any) -> Iterator[tuple[TopicPartition, Any]]:
        count = self._info(topic).partitions
        parts = self._assign(topic, batch, count)
        records = batch.select(list(self._columns.record_columns))
        if (parts == parts[0]).all():  # one partition: no copy
            yield TopicPartition(topic, int(parts[0])), records
            return
        if count <= SCAN_PARTITIONS:  # a few comparisons beat a sort
            for partition in range(count):
                rows = np.flatnonzero(parts == partition)
                if len(rows):
                    yield TopicPartition(topic, partition), records.take(rows)
            return
        order = np.argsort(parts, kind="stable")  # stable: input order within a partition
        counts = np.bincount(parts, minlength=count)
        start = 0
        for partition in np.flatnonzero(counts):
            stop = start + int(counts[partition])
            yield TopicPartition(topic, int(partition)), records.take(order[start:stop])
            start = stop

    def _assign(self, topic: str, batch: Any, count: int) -> Any:
        parts = np.full(batch.num_rows, NO_PARTITION, dtype=np.int64)
        if self._columns.has_partition:
            self._explicit_partitions(topic, batch.column("partition"), count, parts)
        unassigned = parts == NO_PARTITION
        if self._columns.has_key and unassigned.any():
            by_key = partitions_for_keys(batch.column("key"), count)
            parts[unassigned] = by_key[unassigned]
            unassigned = parts == NO_PARTITION
        missing = int(unassigned.sum())
        if missing:
            first = self._next_round_robin
            parts[unassigned] = (first + np.arange(missing, dtype=np.int64)) % count
            self._next_round_robin = (first + missing) % count
        return parts

    @staticmethod
    def _explicit_partitions(topic: str, column: Any, count: int, parts: Any) -> None:
        """Copy the ``partition`` column's non-null values into ``parts``, checking them."""
        present = ~np.asarray(column.is_null())
        given = column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        wrong = present & ((given < 0) | (given >= count))
        if wrong.any():
            raise UnknownTopicOrPartitionError(
                f"column 'partition' holds {int(given[np.argmax(wrong)])} for topic {topic!r}, "
                f"which has partitions 0..{count - 1}; use a valid partition or null (then the "
                "key decides)"
            )
        parts[present] = given[present]


class TaskWriter:
    """Sends routed pieces into one task transaction, whose producer buffers and batches
    them."""

    def __init__(self, transaction: TaskTransaction, router: PartitionRouter) -> None:
        self._transaction = transaction
        self._router = router

    @property
    def peak_buffered_bytes(self) -> int:
        return self._transaction.peak_buffered_bytes

    def write_all(self, batches: Iterable[Any]) -> None:
        for batch in batches:
            pieces = list(self._router.route(batch))
            # the partitions new to the transaction, in one request (C-16)
            self._transaction.register(tp for tp, _ in pieces)
            for tp, piece in pieces:
                self._transaction.write(tp, piece)


def write_task(
    options: SinkOptions,
    columns: InputColumns,
    sink: SinkIdentity,
    batch_id: int,
    task: tuple[int, int],
    batches: Iterable[Any],
) -> tuple[TaskCommit, int]:
    """Write one task's rows in its own transaction: ``(message, peak buffered bytes)``.

    ``task`` is ``(task partition id, attempt number)``. A batch the ledger already holds is
    skipped (its input drained, nothing written). On any error the attempt aborts its own
    transaction (with its own epoch: a no-op if a newer attempt fenced it) and re-raises.
    """
    task_id, attempt = task
    backend = open_backend(options)
    protocol = SinkCommitProtocol(backend, sink, options.task_settings)
    transaction = protocol.begin_task(batch_id, task_id)
    if transaction is None:
        for _ in batches:
            pass
        return protocol.skipped_task(batch_id, task_id, attempt), 0
    router = PartitionRouter(backend, options, columns, task_id)
    writer = TaskWriter(transaction, router)
    try:
        writer.write_all(batches)
        if attempt == 0:  # the first attempt only, so that Spark's retry can succeed
            crash_point("sink.task_write")  # rows appended, the task not finished
        message = protocol.prepare_task(transaction, batch_id, task_id, attempt)
    except BaseException:
        transaction.abort()
        raise
    return message, writer.peak_buffered_bytes
