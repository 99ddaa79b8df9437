"""Executor side: one write task turns Spark's Arrow batches into record batches (DESIGN §5).

Each input batch is routed row by row without a Python loop: rows go to the topic of the
option or of their ``topic`` column, then to the partition of their ``partition`` column, else
to Kafka's murmur2 partition of their key, else round-robin (null keys). Each partition's rows
are taken into a compact Arrow batch and buffered; a partition's buffer leaves as one record
batch when the next piece would push it past ``batch.size`` (capped by the topic's
``max.message.bytes``), and the largest buffer leaves early whenever all buffers together pass
``buffer.memory``. So a task holds at most ``buffer.memory`` bytes of rows (plus one input
batch and one batch being encoded) whatever the size of the micro-batch. Rows keep their input
order within a partition. Not thread-safe: one task, one thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
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
MAX_MESSAGE_BYTES_FILL = 15 / 16
"""Leave room under ``max.message.bytes``: the buffered size is an estimate (Arrow bytes)."""


@dataclass(frozen=True)
class _TopicInfo:
    partitions: int
    flush_bytes: int


@dataclass
class _Buffer:
    pieces: list[Any] = field(default_factory=list)
    nbytes: int = 0


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

    def flush_bytes(self, topic: str) -> int:
        return self._topics[topic].flush_bytes

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
            max_bytes = int(self._backend.max_batch_bytes(topic) * MAX_MESSAGE_BYTES_FILL)
            info = _TopicInfo(
                self._backend.partition_count(topic), min(self._options.batch_size, max_bytes)
            )
            self._topics[topic] = info
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
    """Buffers routed pieces per partition and writes them into one task transaction."""

    def __init__(
        self, transaction: TaskTransaction, router: PartitionRouter, buffer_memory: int
    ) -> None:
        self._transaction = transaction
        self._router = router
        self._buffer_memory = buffer_memory
        self._buffers: dict[TopicPartition, _Buffer] = {}
        self._buffered = 0
        self.peak_buffered_bytes = 0

    def write_all(self, batches: Iterable[Any]) -> None:
        for batch in batches:
            for tp, piece in self._router.route(batch):
                self._add(tp, piece)
        for tp in list(self._buffers):
            self._flush(tp)

    def _add(self, tp: TopicPartition, piece: Any) -> None:
        size = piece.nbytes
        limit = self._router.flush_bytes(tp.topic)
        buffer = self._buffers.get(tp)
        if buffer is not None and buffer.nbytes + size > limit:
            self._flush(tp)
        buffer = self._buffers.setdefault(tp, _Buffer())
        buffer.pieces.append(piece)
        buffer.nbytes += size
        self._buffered += size
        self.peak_buffered_bytes = max(self.peak_buffered_bytes, self._buffered)
        if buffer.nbytes >= limit:
            self._flush(tp)
        while self._buffered > self._buffer_memory:
            self._flush(max(self._buffers, key=lambda t: self._buffers[t].nbytes))

    def _flush(self, tp: TopicPartition) -> None:
        buffer = self._buffers.pop(tp, None)
        if buffer is None:
            return
        self._buffered -= buffer.nbytes
        self._transaction.register([tp, *self._buffers])  # what will follow: one request
        pieces = buffer.pieces
        records = pieces[0] if len(pieces) == 1 else pa.Table.from_batches(pieces)
        self._transaction.write(tp, records)


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
    writer = TaskWriter(transaction, router, options.buffer_memory)
    try:
        writer.write_all(batches)
        if attempt == 0:  # the first attempt only, so that Spark's retry can succeed
            crash_point("sink.task_write")  # rows appended, the task not finished
        message = protocol.prepare_task(transaction, batch_id, task_id, attempt)
    except BaseException:
        transaction.abort()
        raise
    return message, writer.peak_buffered_bytes
