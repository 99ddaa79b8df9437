"""One Spark write task's transaction on a Kafka cluster (the ``kafka`` backend's
``TaskTransaction``, DESIGN §5).

A confluent-kafka transactional ``Producer`` created for the task's transactional id,
``init_transactions()`` (fencing every earlier attempt, aborting its open transaction), then
``begin_transaction()``. ``write`` produces each row of an Arrow batch (columns ``value`` and
optionally ``key``, ``timestamp`` (ms or an Arrow timestamp; null: the time of the write),
``headers``) to the routed partition; ``commit_with`` flushes, adds the task's ledger record
and commits the transaction: the task's rows and its ledger record become visible together,
or not at all.

Errors: a record larger than the topic's ``max.message.bytes`` is refused before it is sent
(``RecordTooLargeError`` naming the partition) and leaves the transaction abortable only
(``TransactionAbortableError`` naming the cause on every later call), as Kafka's producer
does after a failed send; a fenced attempt raises ``ProducerFencedError``; other client errors
are ``InvalidTxnStateError`` or ``ConfigError`` with librdkafka's message. Crash points
(``txn_log.fault_points``): ``kafka_task.before_commit`` (rows and ledger record sent, the
transaction open) and ``kafka_task.after_commit`` (committed, the task not yet returned).
librdkafka does not report producer ids, epochs or the record batches it built:
``producer_id`` and ``producer_epoch`` are -1 and ``PartitionWrite.batch_count`` is 0.
Not thread-safe: one task, one thread.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer

from commit_protocol.kafka_cluster import FENCED_CODES, client_error, fenced_producer
from commit_protocol.messages import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, PartitionWrite
from txn_log.errors import (
    InvalidTxnStateError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortableError,
    TxnLogError,
)
from txn_log.fault_points import crash_point
from txn_log.topic_partition import TopicPartition

RECORD_OVERHEAD = 61 + 21
"""A record batch header and the most a record's framing adds (varints, attributes)."""


class TaskBackend(Protocol):
    """What a task transaction asks of its backend (``KafkaBackend``): how long a request may
    take, a topic whose metadata it may fetch before fencing, and each topic's
    ``max.message.bytes``."""

    @property
    def timeout_s(self) -> float: ...

    @property
    def ledger_topic(self) -> str: ...

    def max_batch_bytes(self, topic: str) -> int: ...


class KafkaTaskTransaction:
    """One task attempt's open transaction on a Kafka cluster (see the module doc)."""

    def __init__(self, transactional_id: str, backend: TaskBackend) -> None:
        self._transactional_id = transactional_id
        self._backend = backend
        self._producer: Producer | None = None
        self._counts: Counter[TopicPartition] = Counter()
        self._failed: TxnLogError | None = None
        self._deliveries = _FirstFailure()
        self._sent_records = 0
        self._sent_bytes = 0
        self._peak = 0
        self._done = False
        self._began = time.monotonic()
        self._timeout_ms: int | None = None

    @classmethod
    def begin(
        cls, config: dict[str, Any], transactional_id: str, backend: TaskBackend
    ) -> KafkaTaskTransaction:
        """A producer for ``config``, fenced in (``init_transactions``), in a transaction.
        Deliveries report failures only (``delivery.report.only.error``)."""
        transaction = cls(transactional_id, backend)
        try:
            producer = fenced_producer(  # fences every earlier attempt (C-24)
                {**config, "delivery.report.only.error": True},
                backend.timeout_s,
                backend.ledger_topic,
            )
            producer.begin_transaction()
        except KafkaException as error:
            raise client_error(error, f"starting transaction {transactional_id!r}") from None
        transaction._producer = producer
        timeout = config.get("transaction.timeout.ms")
        transaction._timeout_ms = None if timeout is None else int(timeout)
        return transaction

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            raise InvalidTxnStateError(f"transaction {self._transactional_id!r} never began")
        return self._producer

    @property
    def transactional_id(self) -> str:
        return self._transactional_id

    @property
    def producer_id(self) -> int:
        return NO_PRODUCER_ID

    @property
    def producer_epoch(self) -> int:
        return NO_PRODUCER_EPOCH

    @property
    def peak_buffered_bytes(self) -> int:
        """An estimate: the most records librdkafka held unacknowledged after a ``write``,
        times the mean record size sent."""
        return self._peak

    def register(self, partitions: Iterable[TopicPartition]) -> None:
        """A no-op: librdkafka adds a partition to the transaction when it first sends to it."""

    def write(self, topic_partition: TopicPartition, records: Any) -> None:
        """One ``produce()`` per row to the routed partition, with as little Python per row as
        confluent-kafka allows: positional arguments (topic, value, key, partition, delivery
        callback: keyword arguments cost more than the call itself, 1.1 against 0.4 us a row),
        keywords only for the timestamps and headers of a batch that has such columns. Rows
        keep their order; a full queue is waited out and the row sent again. (A callback set
        once on the producer instead, ``on_delivery`` in its config, is no faster. Either way,
        a fenced producer that reports its failed records raises confluent-kafka's
        SystemError around the fatal KafkaException from ``poll``/``flush``: ``_serve``
        raises the typed error instead.)"""
        self._check_usable()
        columns = _Columns.of(records)
        self._check_sizes(topic_partition, columns)
        producer = self.producer
        topic, partition = topic_partition.topic, topic_partition.partition
        try:
            if columns.headers is None and not columns.timed:
                self._produce_plain(producer, topic, partition, columns)
            else:
                self._produce_each(producer, topic, partition, columns)
        except KafkaException as error:
            self._failed = self._error(error, f"producing to {topic_partition}")
            raise self._failed from None
        self._counts[topic_partition] += records.num_rows
        self._sent_records += records.num_rows
        self._sent_bytes += columns.total_bytes
        self._serve(producer.poll, 0)
        if self._sent_records:
            held = len(producer) * self._sent_bytes // self._sent_records
            self._peak = max(self._peak, held)
        self._check_delivery()

    def _produce_plain(
        self, producer: Producer, topic: str, partition: int, columns: _Columns
    ) -> None:
        """Values and keys only (the records take the time of the write)."""
        produce, delivered = producer.produce, self._deliveries
        rows = zip(columns.values, columns.keys, strict=True)
        value = key = None
        retry = False
        while True:
            try:
                if retry:
                    produce(topic, value, key, partition, delivered)
                    retry = False
                for value, key in rows:
                    produce(topic, value, key, partition, delivered)
                return
            except BufferError:  # queue.buffering.max.kbytes reached: wait for deliveries
                retry = True
                self._wait_for_room(producer)

    def _produce_each(
        self, producer: Producer, topic: str, partition: int, columns: _Columns
    ) -> None:
        """Rows with a timestamp column or headers."""
        produce = producer.produce
        headers = columns.headers
        index, count = 0, columns.count
        while index < count:
            try:
                produce(
                    topic,
                    columns.values[index],
                    columns.keys[index],
                    partition,
                    self._deliveries,
                    timestamp=columns.timestamps[index],
                    headers=headers[index] if headers is not None else None,
                )
                index += 1
            except BufferError:
                self._wait_for_room(producer)

    def _wait_for_room(self, producer: Producer) -> None:
        self._serve(producer.poll, 0.05)
        self._check_delivery()

    def _serve(self, call: Callable[[float], int], timeout_s: float) -> int:
        """``producer.poll`` or ``producer.flush``, with a fatal error the producer raises
        while it serves the delivery reports (a fenced producer does, around the failed
        records' callbacks) as the typed error, not confluent-kafka's SystemError around it."""
        try:
            return call(timeout_s)
        except SystemError as error:
            if not isinstance(error.__cause__, KafkaException):
                raise
            failed = error.__cause__
            error.__traceback__ = None
        except KafkaException as error:
            failed = error
        # confluent-kafka keeps these exceptions out of the garbage collector's sight: their
        # tracebacks would keep this frame, the transaction and its producer alive for good
        failed.__traceback__ = None
        self._failed = self._error(failed, f"transaction {self._transactional_id!r}")
        raise self._failed from None

    def _check_sizes(self, topic_partition: TopicPartition, columns: _Columns) -> None:
        """RecordTooLargeError for a record over the topic's ``max.message.bytes``, before
        any of the batch is sent; the transaction is then abortable only."""
        limit = self._backend.max_batch_bytes(topic_partition.topic) - RECORD_OVERHEAD
        if columns.largest_bound() <= limit:
            return
        size = max(columns.sizes())
        if size > limit:
            self._failed = RecordTooLargeError(
                f"a record of {size} bytes for {topic_partition} is larger than the topic's "
                f"max.message.bytes {limit + RECORD_OVERHEAD}; nothing of this task commits"
            )
            raise self._failed

    def flush(self) -> None:
        """Every record sent so far acknowledged (acks=all); the transaction stays open."""
        self._check_usable()
        remaining = self._serve(self.producer.flush, self._backend.timeout_s)
        self._check_delivery()
        if remaining:
            raise InvalidTxnStateError(
                f"transaction {self._transactional_id!r}: {remaining} records not acknowledged "
                f"within {self._backend.timeout_s:.0f} s"
            )

    def commit_with(self, ledger_topic: str, key: bytes, value: bytes) -> None:
        """Flush, add the ledger record, commit the transaction (see the module doc)."""
        self.flush()
        try:
            self.producer.produce(ledger_topic, value, key, partition=0)
            self._serve(self.producer.flush, self._backend.timeout_s)
            crash_point("kafka_task.before_commit")  # rows and ledger record sent, still open
            self.producer.commit_transaction(self._backend.timeout_s)
        except KafkaException as error:
            self._failed = self._error(error, f"committing transaction {self._transactional_id!r}")
            raise self._failed from None
        self._done = True
        crash_point("kafka_task.after_commit")  # committed; the task has not returned yet

    def written(self) -> tuple[PartitionWrite, ...]:
        return tuple(
            PartitionWrite(tp.topic, tp.partition, count, 0)
            for tp, count in sorted(self._counts.items())
        )

    def abort(self) -> None:
        """Abort with this attempt's own epoch; a no-op if it was fenced or ended meanwhile."""
        if self._done:
            return
        self._done = True
        with contextlib.suppress(KafkaException):
            self.producer.abort_transaction(self._backend.timeout_s)

    def _check_usable(self) -> None:
        if self._done:
            raise InvalidTxnStateError(
                f"transaction {self._transactional_id!r} already ended (committed or aborted)"
            )
        if self._failed is not None:
            raise TransactionAbortableError(
                f"transaction {self._transactional_id!r} can only abort after "
                f"{type(self._failed).__name__}: {self._failed}"
            ) from self._failed

    def _error(self, error: KafkaException, doing: str) -> TxnLogError:
        """``client_error``, with a fence told apart by ``_fenced``."""
        kafka_error = error.args[0]
        if isinstance(kafka_error, KafkaError) and kafka_error.code() in FENCED_CODES:
            return self._fenced(f"{doing}: {kafka_error}")
        return client_error(error, doing)

    def _fenced(self, what: str) -> ProducerFencedError:
        """The fence of this attempt: by a newer attempt, or, once the transaction was open
        longer than its timeout, the likelier cause: the coordinator aborted it by bumping
        the epoch (C-25), which the client sees as any other fence."""
        open_ms = (time.monotonic() - self._began) * 1000
        if self._timeout_ms is None or open_ms < self._timeout_ms:
            return ProducerFencedError(f"{what}; a newer attempt took over the transactional id")
        return ProducerFencedError(
            f"{what}; the transaction was open {open_ms / 1000:.1f} s, longer than its "
            f"transaction.timeout.ms={self._timeout_ms}, so the coordinator aborted it: "
            "bound each micro-batch's work with maxOffsetsPerTrigger, or raise the sink option "
            "transaction.timeout.ms (at most 900000)"
        )

    def _check_delivery(self) -> None:
        error = self._deliveries.error
        if error is None:
            return
        if error.code() in FENCED_CODES or error.fatal():
            self._failed = self._fenced(f"transaction {self._transactional_id!r}: {error}")
        else:
            self._failed = TransactionAbortableError(
                f"transaction {self._transactional_id!r}: a record was not delivered: {error}"
            )
        raise self._failed


class _FirstFailure:
    """The delivery callback of a task's records: keeps the first failure, and points at
    nothing else on purpose. librdkafka holds each record's callback until its report is
    served; a transaction dropped with records unreported (left open, never flushed) kept,
    through a callback bound to it, itself and its producer (threads, connections) alive for
    the rest of the process, out of the garbage collector's sight."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None and self.error is None:
            self.error = error


_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}
"""Arrow timestamp unit -> (multiply, divide) to milliseconds."""


class _Columns:
    """The record columns of an Arrow batch as Python lists, read through the batch's own
    methods (the commit protocol does not import pyarrow): ``values``, ``keys`` (bytes or
    None), ``timestamps`` (ms; 0: the time of the write) and ``headers`` (None when the batch
    has no such column)."""

    def __init__(self, records: Any) -> None:
        self._records = records
        self.names = set(records.schema.names)
        self.count = records.num_rows
        self.values = self._binary("value")
        self.keys = self._binary("key")
        self.timed = "timestamp" in self.names
        self.timestamps = self._timestamps()
        self.value_lengths = self._lengths(self.values)
        self.key_lengths = self._lengths(self.keys)
        self.headers: list[list[tuple[str, bytes]]] | None = None
        if "headers" in self.names:
            self.headers = [
                [(h["key"] or "", h["value"] or b"") for h in row or []]
                for row in records.column("headers").to_pylist()
            ]

    @classmethod
    def of(cls, records: Any) -> _Columns:
        return cls(records)

    def _column(self, name: str) -> Any:
        column = self._records.column(name)
        if str(column.type) in ("string", "large_string"):
            column = column.cast("binary")
        return column

    def _binary(self, name: str) -> list[Any]:
        if name not in self.names:
            return [None] * self.count
        return list(self._column(name).to_pylist())

    def _timestamps(self) -> list[int]:
        if "timestamp" not in self.names:
            return [0] * self.count
        column = self._records.column("timestamp")
        unit = getattr(column.type, "unit", None)
        times, divide = _TO_MS[unit] if unit is not None else (1, 1)
        return [0 if t is None else t * times // divide for t in column.cast("int64").to_pylist()]

    @staticmethod
    def _lengths(column: list[bytes | None]) -> list[int]:
        return [0 if item is None else len(item) for item in column]

    def _header_sizes(self) -> list[int]:
        if self.headers is None:
            return [0] * self.count
        return [sum(len(k.encode()) + len(v) for k, v in row) for row in self.headers]

    @property
    def total_bytes(self) -> int:
        return sum(self.value_lengths) + sum(self.key_lengths)

    def largest_bound(self) -> int:
        """At least the largest record's payload (value, key and headers), cheaply."""
        if not self.count:
            return 0
        return max(self.value_lengths) + max(self.key_lengths) + max(self._header_sizes())

    def sizes(self) -> list[int]:
        """Each record's payload bytes (value, key and headers)."""
        return [
            v + k + h
            for v, k, h in zip(
                self.value_lengths, self.key_lengths, self._header_sizes(), strict=True
            )
        ]
