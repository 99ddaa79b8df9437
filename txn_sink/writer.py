"""The Spark writers of ``format("txnlog")``: thin classes over the commit protocol (STYLE 12).

Spark builds a writer on the driver for every micro-batch (and again in the Python worker
that runs ``commit`` / ``abort``), pickles it to the tasks, and calls:

    write(iterator)             on executors: ``task_writer.write_task`` in the task's own
                                transaction ``<prefix>-<task partition id>``; returns a
                                ``TxnLogCommitMessage``; never commits
    commit(messages, batchId)   on the driver: one atomic batch commit with the consumed
                                source offsets of ``<checkpoint>/offsets/<batchId>``; a no-op
                                for a batch the ledger already holds
    abort(messages, batchId)    on the driver: aborts every task transaction of the batch

The commit protocol is the backend's (``commit_protocol.batch_commit``): the above is the
atomic batch commit of a log directory. In Kafka mode (``kafka.bootstrap.servers`` instead of a
path) the same calls run the per-task commit of a Kafka cluster: each task commits its
own transaction with its ledger record before ``write`` returns (exactly once per task, a
batch visible task by task), ``commit`` records the batch and commits the consumed offsets to
the group, and ``abort`` fences the tasks that did not commit; the checkpoint stays the
source of truth, as in Spark's Kafka connector.

Options and the input schema are validated in the constructor, on the driver, so a bad option
or column fails the query before any task runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from commit_protocol.backend import LogBackend
from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity
from commit_protocol.kafka_cluster import check_reachable
from commit_protocol.messages import TaskCommit
from commit_protocol.naming import batch_sink_id, streaming_sink_id
from commit_protocol.spark_checkpoint import read_query_id, read_source_offsets
from txn_log.errors import ConfigError, InvalidTxnStateError
from txn_log.fault_points import crash_point
from txn_sink.input_schema import InputColumns, validate_input_schema
from txn_sink.options import SinkOptions
from txn_sink.task_writer import write_task
from txn_sink.topics import ensure_topic, open_backend

BATCH_WRITE_BATCH_ID = 0
"""A ``df.write`` is one batch of its own sink (a fresh sink id per write)."""


@dataclass(frozen=True)
class TxnLogCommitMessage(WriterCommitMessage):
    """What a task returns to the driver: its ``TaskCommit``, the query id it saw, and the
    peak bytes it buffered (for monitoring the memory bound)."""

    commit: TaskCommit
    query_id: str | None = None
    peak_buffered_bytes: int = 0


@dataclass(frozen=True)
class TaskInfo:
    """The running task, from Spark's ``TaskContext`` (batch id and query id: streaming only)."""

    task_id: int
    attempt: int
    batch_id: int | None
    query_id: str | None

    @classmethod
    def current(cls) -> TaskInfo:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise InvalidTxnStateError("the txnlog writer's write() runs in Spark tasks only")
        batch_id = context.getLocalProperty("streaming.sql.batchId")
        return cls(
            context.partitionId(),
            context.attemptNumber(),
            None if batch_id is None else int(batch_id),
            context.getLocalProperty("sql.streaming.queryId") or None,
        )


def _prepare(
    options: dict[str, str] | Any, schema: Any
) -> tuple[SinkOptions, InputColumns, LogBackend]:
    """Driver-side validation: options, input schema, the log and the topic option."""
    parsed = SinkOptions.parse(options)
    columns = validate_input_schema(schema, parsed.topic)
    if parsed.cluster is not None:
        check_reachable(parsed.cluster)  # one line within seconds for a wrong address
    backend = open_backend(parsed)
    if parsed.topic is not None:
        ensure_topic(backend, parsed, parsed.topic)
    return parsed, columns, backend


def _commits(messages: Sequence[TxnLogCommitMessage | None]) -> list[TaskCommit | None]:
    return [None if m is None else m.commit for m in messages]


class TxnLogStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("txnlog")``: one atomic commit per micro-batch (DESIGN §5)."""

    def __init__(self, options: Any, schema: Any, overwrite: bool) -> None:
        # complete mode re-appends the whole result each batch, as Spark's Kafka sink does
        self._options, self._columns, backend = _prepare(options, schema)
        location = self._options.checkpoint_location
        self._query_id = read_query_id(location) if location else None
        if self._query_id is not None:  # before any task of the batch runs
            SinkCommitProtocol(backend, self._sink(self._query_id)).check_prefix()

    def write(self, iterator: Iterator[Any]) -> TxnLogCommitMessage:
        task = TaskInfo.current()
        query_id = self._query_id or task.query_id
        if task.batch_id is None or query_id is None:
            raise InvalidTxnStateError(
                "a streaming write task without streaming.sql.batchId / sql.streaming.queryId"
            )
        if task.query_id and task.query_id != query_id:
            raise InvalidTxnStateError(
                f"the task runs for query {task.query_id} but the checkpoint "
                f"{self._options.checkpoint_location} belongs to query {query_id}"
            )
        commit, peak = write_task(
            self._options,
            self._columns,
            self._sink(query_id),
            task.batch_id,
            (task.task_id, task.attempt),
            iterator,
        )
        return TxnLogCommitMessage(commit, query_id, peak)

    def commit(self, messages: list[Any], batchId: int) -> None:
        crash_point("sink.before_commit")  # every task finished, nothing committed yet
        sink = self._driver_sink(messages)
        if sink is None:
            return  # no checkpoint metadata and no task: nothing was written
        backend = open_backend(self._options)
        location = self._options.checkpoint_location
        consumed = read_source_offsets(location, batchId) if location else ()
        exists = {topic: backend.topic_exists(topic) for topic in {e[0] for e in consumed}}
        offsets = [entry for entry in consumed if exists[entry[0]]]
        protocol = SinkCommitProtocol(backend, sink, self._options.task_settings)
        protocol.commit(batchId, _commits(messages), offsets)
        crash_point("sink.after_commit")  # committed; Spark's commit log entry not yet written

    def abort(self, messages: list[Any], batchId: int) -> None:
        sink = self._driver_sink(messages)
        if sink is not None:
            backend = open_backend(self._options)
            SinkCommitProtocol(backend, sink).abort(batchId, _commits(messages))

    def _sink(self, query_id: str) -> SinkIdentity:
        return self._options.identity(streaming_sink_id(query_id), query_id)

    def _driver_sink(self, messages: Sequence[TxnLogCommitMessage | None]) -> SinkIdentity | None:
        """The sink of the checkpoint's query id, or of the tasks' when the options name no
        checkpoint (None when neither is known: then no task wrote anything)."""
        ids = {m.query_id for m in messages if m is not None and m.query_id}
        ids |= {self._query_id} if self._query_id else set()
        if len(ids) > 1:
            raise InvalidTxnStateError(
                f"one micro-batch with task messages of several queries {sorted(ids)}; "
                "nothing committed"
            )
        return self._sink(ids.pop()) if ids else None


class TxnLogBatchWriter(DataSourceArrowWriter):
    """``df.write.format("txnlog")``: the whole DataFrame commits as one atomic batch."""

    def __init__(self, options: Any, schema: Any, overwrite: bool) -> None:
        if overwrite:
            raise ConfigError(
                "a txnlog topic is append-only: save mode 'overwrite' is not supported; use "
                "mode('append')"
            )
        self._options, self._columns, backend = _prepare(options, schema)
        write_id = uuid.uuid4().hex
        # a fresh sink: nothing of it lies before the ledger's end now (a Kafka ledger is
        # then searched from there only, however long it grew)
        since = backend.ledger_end()
        self._sink = self._options.identity(batch_sink_id(write_id), write_id, since)

    def write(self, iterator: Iterator[Any]) -> TxnLogCommitMessage:
        task = TaskInfo.current()
        commit, peak = write_task(
            self._options,
            self._columns,
            self._sink,
            BATCH_WRITE_BATCH_ID,
            (task.task_id, task.attempt),
            iterator,
        )
        return TxnLogCommitMessage(commit, None, peak)

    def commit(self, messages: list[Any]) -> None:
        protocol = self._protocol()
        protocol.commit(BATCH_WRITE_BATCH_ID, _commits(messages))

    def abort(self, messages: list[Any]) -> None:
        self._protocol().abort(BATCH_WRITE_BATCH_ID, _commits(messages))

    def _protocol(self) -> SinkCommitProtocol:
        return SinkCommitProtocol(open_backend(self._options), self._sink)
