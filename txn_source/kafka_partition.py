"""One read task in Kafka mode (DESIGN §6): ``KafkaInputPartition`` (planned on the
driver, pickled to an executor) and ``read_kafka_partition``, which reads its range with a
confluent-kafka consumer into Arrow batches of the embedded source's schema
(``txn_source.schema``).

The consumer is *assigned* the partition at ``start`` (no subscribe, no group membership, no
commits) with the planned isolation level, so read_committed filtering of aborted records and
control markers is the client's (KIP-98); it and the AdminClient of the topic-id checks are the
Python worker's, kept from one task to the next (``kafka_clients``). The read stops on the
consumer's *position* reaching ``end``, never on "the record at end-1 arrived": markers and
aborted records leave gaps in the offsets delivered (SPARK-25005). The position is the offset
after the last record delivered, or the fetch position a PARTITION_EOF event reports (past
markers and aborted batches); a record at or past ``end`` also proves the position passed it,
and is dropped.

A position that stops moving below ``end`` for ``poll_timeout_ms`` is data loss when the log no
longer holds the offsets (start moved past them, or the log ends before ``end``: truncation, a
re-created topic), reported by ``data_loss`` as in embedded mode; otherwise a
``KafkaClientError`` naming the topic, partition and offset: the range reaches into a
transaction still open (planning never does that: B-05), or the records never came.

Memory stays bounded by one output batch (``MAX_ROWS_PER_BATCH``) plus one consume call
(``CONSUME_BATCH`` records). Records are turned into columns a consume call at a time (list
comprehensions over confluent-kafka's messages), not record by record.

confluent-kafka is imported only when a task reads, so planning a log directory never needs it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from datasource_options.location import KafkaCluster
from offsets.offset_range import OffsetRange
from txn_log.consumer.consumer import ReadStats
from txn_log.consumer.read_committed import IsolationLevel
from txn_log.errors import UnknownTopicOrPartitionError
from txn_log.topic_partition import TopicPartition
from txn_source.data_loss import readable_range, report_partition_gone
from txn_source.partition import MAX_ROWS_PER_BATCH, PlannedRange
from txn_source.read_metrics import report_read

logger = logging.getLogger(__name__)

CONSUME_BATCH = 10_000
POLL_S = 1.0
"""One consume call's wait; the task waits up to ``poll_timeout_ms`` in all for progress."""
_TIMESTAMP_TYPES = {0: -1, 1: 0, 2: 1}
"""confluent-kafka's timestamp type (NOT_AVAILABLE, CREATE_TIME, LOG_APPEND_TIME) -> Kafka's
(-1, 0 CreateTime, 1 LogAppendTime), the ``timestampType`` column."""


@dataclass(frozen=True)
class KafkaInputPartition(PlannedRange):
    """Read offsets ``[start, end)`` of one partition of ``cluster``.

    ``topic_id`` is the id of the topic the range was planned on (KIP-516; None when the
    cluster reports none): the task checks it before it reads and again after, so a topic
    deleted and created again under the same name since is data loss, never a source of
    records for offsets planned on the old one (DESIGN §6, as the embedded source's
    ``TxnLogInputPartition``)."""

    cluster: KafkaCluster
    poll_timeout_ms: int
    topic_id: str | None = None


def read_kafka_partition(p: KafkaInputPartition) -> Iterator[Any]:
    """Arrow batches of the records of ``p`` its consumer delivers, in offset order. The
    consumer is the worker's idle one (``kafka_clients``), handed back once the whole range
    was read, closed if the read failed or stopped early."""
    from txn_source.kafka_clients import give_back, take_consumer

    isolation_level = IsolationLevel.parse(p.isolation_level)
    consumer = take_consumer(p.cluster, isolation_level)
    read_whole = False
    try:
        yield from _PartitionRead(p, consumer).batches()
        read_whole = True
    finally:
        if read_whole:
            give_back(p.cluster, isolation_level, consumer)
        else:
            consumer.close()


class _PartitionRead:
    """One task's read: the consumer, its position, the rows not yet emitted."""

    def __init__(self, p: KafkaInputPartition, consumer: Any) -> None:
        self.p = p
        self.consumer = consumer
        self.tp = p.topic_partition
        self.rows = _Rows(p.include_headers)
        self.records = 0

    def _watermarks(self) -> tuple[int, int]:
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        from txn_source.kafka_view import call

        p = self.p
        low, high = call(
            f"ListOffsets of {self.tp} in {p.cluster.describe()}",
            lambda: self.consumer.get_watermark_offsets(
                KafkaTopicPartition(p.topic, p.partition), timeout=p.poll_timeout_ms / 1000
            ),
        )
        return int(low), int(high)

    def _bounds(self) -> tuple[int, int] | None:
        """The log start and the end a read may reach now (from the log start to the high
        watermark, whatever the isolation level: ``data_loss``); None when the partition is
        gone."""
        try:
            low, high = self._watermarks()
            if high < self.p.end and self.p.isolation_level != "read_uncommitted":
                high = self._log_end()  # past the LSO: held back by an open transaction?
        except UnknownTopicOrPartitionError:
            return None
        return low, high

    def _readable(self, start: int, bounds: tuple[int, int] | None = None) -> OffsetRange | None:
        """What is left of ``[start, end)`` in the log (within ``bounds``, else the log's
        bounds now); None when the partition is gone (reported)."""
        bounds = self._bounds() if bounds is None else bounds
        if bounds is None:
            report_partition_gone(self.p.fail_on_data_loss, self.tp, start, self.p.end)
            return None
        low, high = bounds
        return readable_range(
            OffsetRange(self.tp, start, self.p.end),
            log_start=low,
            log_end=high,
            fail_on_data_loss=self.p.fail_on_data_loss,
        )

    def batches(self) -> Iterator[Any]:
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        p = self.p
        if p.start >= p.end:  # planned empty: what it had was lost, and reported (planning)
            return
        asked = self._ask_topic_id()  # answered while the log's bounds are asked
        bounds = self._bounds()
        if not self._same_topic(asked, p.fail_on_data_loss):
            return
        kept = self._readable(p.start, bounds)
        if kept is None or kept.start >= kept.end:
            return
        self.consumer.assign([KafkaTopicPartition(p.topic, p.partition, kept.start)])
        position = kept.start
        deadline = time.monotonic() + p.poll_timeout_ms / 1000
        while position < p.end:
            wait = max(0.0, min(POLL_S, deadline - time.monotonic()))
            moved_from = position
            taken: list[Any] = []
            for message in self._next_messages(wait):
                if message.error() is None:
                    offset = message.offset()
                    if offset >= p.end:  # the position passed the end: dropped
                        position = max(position, offset)
                        break
                    taken.append(message)
                    position = offset + 1
                else:
                    position = self._handle_error(message.error(), message.offset(), position)
                    if position < 0 or position >= p.end:
                        break
            self.rows.extend(taken)
            self.records += len(taken)
            if self.rows.count >= MAX_ROWS_PER_BATCH:
                yield from self.rows.flush(self.tp)
            if position < 0:  # the partition is gone, reported
                break
            if position != moved_from:
                deadline = time.monotonic() + p.poll_timeout_ms / 1000
            elif position < p.end and time.monotonic() >= deadline:
                position = self._stuck(position)
                if position < 0:
                    break
                deadline = time.monotonic() + p.poll_timeout_ms / 1000
        # re-created while being read? what was read may be the new topic's: the task fails
        # whatever failOnDataLoss says (its retry finds the new id first and skips); asked
        # before the last rows leave, answered after
        asked = self._ask_topic_id()
        if self.rows.count:
            yield from self.rows.flush(self.tp)
        self._same_topic(asked, p.fail_on_data_loss or self.records > 0)
        stats = ReadStats(records=self.records)
        report_read(p.cluster.describe(), self.tp, kept.start, p.end, stats)

    def _ask_topic_id(self) -> Any:
        """The topic-id check's request, sent now (None when the task has no id to check)."""
        from txn_source.kafka_clients import admin_for
        from txn_source.kafka_view import ask_topic_id

        p = self.p
        if p.topic_id is None:
            return None
        return ask_topic_id(admin_for(p.cluster), p.cluster, p.topic, p.poll_timeout_ms / 1000)

    def _same_topic(self, asked: Any, fail_on_data_loss: bool) -> bool:
        """Whether the partition's topic is still the one planned (its id unchanged, or no id
        known), by the answer to ``asked`` (``_ask_topic_id``); a vanished or re-created topic
        is reported as data loss."""
        from txn_source.kafka_view import topic_id_from

        p = self.p
        if asked is None:
            return True
        try:
            now = topic_id_from(asked, p.cluster, p.topic, p.poll_timeout_ms / 1000)
        except UnknownTopicOrPartitionError:
            report_partition_gone(fail_on_data_loss, self.tp, p.start, p.end)
            return False
        if now is None or now == p.topic_id:
            return True
        report_partition_gone(
            fail_on_data_loss,
            self.tp,
            p.start,
            p.end,
            cause=f"its topic was deleted and re-created: topic id {p.topic_id} is now {now}",
        )
        return False

    def _next_messages(self, wait: float) -> list[Any]:
        """What the consumer has: the first message waited for up to ``wait`` seconds, then
        whatever else is already fetched (``consume`` alone would wait for a full batch)."""
        first = self.consumer.poll(wait)
        if first is None:
            return []
        return [first, *self.consumer.consume(num_messages=CONSUME_BATCH, timeout=0)]

    def _handle_error(self, error: Any, offset: int, position: int) -> int:
        """The position after an error event at ``offset``; -1 when the partition is gone."""
        from confluent_kafka import KafkaError

        from txn_source.kafka_view import UNKNOWN_PARTITION_CODES

        code = error.code()
        if code == KafkaError._PARTITION_EOF:  # offset: the fetch position, past markers
            return max(position, int(offset))
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            return self._out_of_range(position)
        if code in UNKNOWN_PARTITION_CODES:
            report_partition_gone(self.p.fail_on_data_loss, self.tp, position, self.p.end)
            return -1
        if error.fatal() or not error.retriable():
            from txn_source.kafka_view import KafkaClientError

            raise KafkaClientError(
                f"reading {self.tp} of {self.p.cluster.describe()} at offset {position} "
                f"(planned range [{self.p.start}, {self.p.end})) failed: {error.str()}"
            )
        logger.warning("reading %s at offset %d: %s (retrying)", self.tp, position, error.str())
        return position

    def _out_of_range(self, position: int) -> int:
        """The fetch position left the log: report the loss and go on from the log start."""
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        kept = self._readable(position)
        if kept is None:
            return -1
        if kept.start >= kept.end:
            return self.p.end
        self.consumer.seek(KafkaTopicPartition(self.p.topic, self.p.partition, kept.start))
        return kept.start

    def _stuck(self, position: int) -> int:
        """The position has not moved for ``poll_timeout_ms``. Data loss when the log no
        longer holds ``[position, end)`` (reported; then the position to go on from, or -1 when
        nothing is left); KafkaClientError when the range reaches into a transaction still
        open (never planned so: B-05) or when the records are there but never came."""
        from txn_source.kafka_view import KafkaClientError

        try:
            low, readable_end = self._watermarks()
            log_end = self._log_end()
        except UnknownTopicOrPartitionError:
            report_partition_gone(self.p.fail_on_data_loss, self.tp, position, self.p.end)
            return -1
        where = f"reading {self.tp} of {self.p.cluster.describe()}: the consumer's position"
        if low <= position and readable_end < self.p.end <= log_end:
            raise KafkaClientError(
                f"{where} stopped at offset {position}, below the planned end {self.p.end}: "
                f"the offsets from the last stable offset {readable_end} on belong to a "
                "transaction still open, which read_committed never reads; plan the "
                "range from the source's offsets (latest is the last stable offset), or read "
                "with isolation.level=read_uncommitted"
            )
        kept = self._readable(position)
        if kept is None or kept.end <= position:
            return -1  # reported: the rest of the range is gone
        if kept.start > position:
            return self._out_of_range(position)
        raise KafkaClientError(
            f"{where} stayed at offset {position} for kafkaConsumer.pollTimeoutMs="
            f"{self.p.poll_timeout_ms} ms, below the planned end {self.p.end}, though the log "
            "holds those offsets; check that the cluster is reachable, or raise "
            "kafkaConsumer.pollTimeoutMs"
        )

    def _log_end(self) -> int:
        """The high watermark, from a read_uncommitted consumer (this one's is the LSO)."""
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        from txn_source.kafka_clients import give_back, take_consumer
        from txn_source.kafka_view import call

        p = self.p
        uncommitted = IsolationLevel.READ_UNCOMMITTED
        consumer = take_consumer(p.cluster, uncommitted)
        try:
            _, high = call(
                f"ListOffsets of {self.tp} in {p.cluster.describe()}",
                lambda: consumer.get_watermark_offsets(
                    KafkaTopicPartition(p.topic, p.partition), timeout=p.poll_timeout_ms / 1000
                ),
            )
        except BaseException:
            consumer.close()
            raise
        give_back(p.cluster, uncommitted, consumer)
        return int(high)


class _Rows:
    """Columns of the records read and not yet emitted as one Arrow batch."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self._clear()

    def _clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps_us: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[dict[str, Any]]] = []

    @property
    def count(self) -> int:
        return len(self.offsets)

    def extend(self, messages: list[Any]) -> None:
        """Add ``messages`` (records, no error events), column by column."""
        if not messages:
            return
        self.keys += [m.key() for m in messages]
        self.values += [m.value() for m in messages]
        self.offsets += [m.offset() for m in messages]
        stamps = [m.timestamp() for m in messages]
        self.timestamps_us += [ms * 1000 for _, ms in stamps]
        self.timestamp_types += [_TIMESTAMP_TYPES.get(kind, -1) for kind, _ in stamps]
        if self.include_headers:
            self.headers += [
                [{"key": k, "value": v} for k, v in m.headers() or ()] for m in messages
            ]

    def flush(self, tp: TopicPartition) -> list[Any]:
        """Every row held, as batches of at most ``MAX_ROWS_PER_BATCH`` rows."""
        import pyarrow as pa

        from txn_source.schema import arrow_kafka_schema

        n = self.count
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(tp.topic, pa.string()), n),
            pa.repeat(pa.scalar(tp.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps_us, pa.timestamp("us", tz="UTC")),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        schema = arrow_kafka_schema(self.include_headers)
        if self.include_headers:
            columns.append(pa.array(self.headers, schema.field("headers").type))
        self._clear()
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        size = MAX_ROWS_PER_BATCH
        return [batch.slice(i, size) for i in range(0, n, size)]
