"""``Producer``: KIP-98's idempotent and transactional producer on an embedded log (C-33..C-40).

Records are buffered per partition in the producer's ``RecordAccumulator``
(``record_accumulator``) and appended as one batch per partition when the buffer reaches
``batch_size`` bytes, on ``flush()``, and on ``commit_transaction()``. Each batch carries the
producer id, epoch and the partition's next sequence (P-08, P-09); a batch is appended whole or
not at all (F-08), and a retried append of the same bytes is answered with its original offsets
(P-10 step 5).

Without a transactional id the producer is idempotent within its session only (G-02, G-13):
a fresh producer id on the first send (P-06). With one, ``init_transactions()`` fences every
older instance (C-24), and the first write to each partition registers it with the coordinator
before any data is written (C-16, C-38).

``send()`` checks every field before it buffers the record (``producer_record``), and a
buffered record leaves its buffer only once the batch holding it was appended: a failed flush
loses none. Its common case (a known topic, bytes key and value, no headers, a partition
buffer with room) makes the same checks in one pass and sizes the record inline
(``RecordAccumulator.add_fast``), with no object per record; anything else takes the general
path, which raises the errors. A batch that compression grew past ``max.message.bytes`` is
split and appended in parts, in order, with consecutive sequences (Kafka's producer splits and
re-enqueues it).

``send_batch()`` takes whole Arrow record batches for one partition (the Spark sink's tasks
route rows to partitions themselves, vectorized) and goes through the same buffers, the same
drain, registration, sequences and split rule as ``send()``: there is one producer path. All
buffers together hold at most ``buffer_memory`` bytes (the accumulator appends the largest
first to make room), so a producer's memory is bounded whatever it is given to send.

``prepare_transaction()`` is KIP-939's first phase: everything is appended and durable and the
instance still owns its transactional id, but the transaction stays open for another party to
complete: the Spark sink's driver, which commits many task transactions as one atomic commit
of the coordinator (DESIGN §4 "Atomic commit").

The producer id, epoch and transaction state live in its ``TransactionManager``
(``transaction_manager``): a fatal error (fenced, out-of-order sequence) makes the producer
unusable (P-13, C-40), and any other failure of ``send()``, ``send_batch()``, ``flush()`` or
``send_offsets_to_transaction()`` inside a transaction leaves it *abortable only*, as Kafka's
ABORTABLE_ERROR, so a transaction that may lack a record never commits. Not thread-safe: one
thread drives one producer (C-39).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from txn_log.coordinator.transaction_coordinator import TransactionCoordinator
from txn_log.coordinator.transactional_append import txn_offset_commit
from txn_log.errors import ConfigError, UnknownTopicOrPartitionError
from txn_log.group.group_offsets import OFFSETS_PARTITION, GroupOffsetStore, OffsetAndMetadata
from txn_log.group.group_offsets_format import normalize_offsets, validate_group_id
from txn_log.log_dir.log_manager import LogManager
from txn_log.partitioner import partition_for_key
from txn_log.producer.batch_limits import check_record_fits, fits_alone_size
from txn_log.producer.producer_batch import ArrowBuffer, PartitionBuffer
from txn_log.producer.producer_record import (
    BytesLike,
    check_destination,
    record_body_size,
    record_size,
    validate_record,
)
from txn_log.producer.producer_record import RecordMetadata as RecordMetadata  # exported here
from txn_log.producer.record_accumulator import RecordAccumulator
from txn_log.producer.transaction_manager import (
    PartitionWrites,
    PreparedTxnState,
    State,
    TransactionManager,
)
from txn_log.record.batch_header import HEADER_SIZE, Compression
from txn_log.record.varint import INT64_MAX
from txn_log.topic_partition import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

DEFAULT_BATCH_SIZE = 512 * 1024
DEFAULT_BUFFER_MEMORY = 32 * 1024 * 1024  # Kafka's buffer.memory
ARROW_FILL = 15 / 16
"""Arrow batches leave their buffer below ``max.message.bytes`` by this margin: their size is
an estimate of the encoded one (a batch that still comes out too large is split)."""


@dataclass(frozen=True)
class _TopicMetadata:
    """What the producer knows of a topic (Kafka's producer metadata), with what ``send()``'s
    common case needs precomputed: the last clock reading at which it is fresh (when it
    was read plus metadata.max.age.ms), each partition's name, the fill limit of a batch, the
    size below which a record surely fits alone (``fits_alone_size``), and the accumulator's
    live list of the topic's record buffers by partition (``record_buffers``)."""

    partitions: int
    max_message_bytes: int
    fresh_until_ms: int
    names: tuple[TopicPartition, ...]
    batch_limit: int
    fits_alone: int
    buffers: list[PartitionBuffer | None]


class Producer:
    """Sends records to a log, idempotently, optionally in transactions: to the partitions of
    ``log_manager``, registering them with ``coordinator``, transactional offsets through
    ``group_offsets``."""

    def __init__(
        self,
        log_manager: LogManager,
        coordinator: TransactionCoordinator,
        group_offsets: GroupOffsetStore,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        *,
        compression: str | Compression = Compression.NONE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        buffer_memory: int = DEFAULT_BUFFER_MEMORY,
        metadata_max_age_ms: int = 300_000,
    ) -> None:
        if transactional_id is not None and (
            not isinstance(transactional_id, str) or not transactional_id
        ):
            raise ConfigError(
                f"transactional.id must be a non-empty string or None (idempotent producer), "
                f"got {transactional_id!r}"
            )
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch.size must be a positive integer, got {batch_size!r}")
        if not isinstance(buffer_memory, int) or buffer_memory < 1:
            raise ConfigError(f"buffer.memory must be a positive integer, got {buffer_memory!r}")
        self._log = log_manager
        self._coordinator = coordinator
        self._group_offsets = group_offsets
        self._txn = TransactionManager(
            coordinator, log_manager.clock, transactional_id, transaction_timeout_ms
        )
        self.transactional_id = transactional_id
        self.compression = (
            compression if isinstance(compression, Compression) else Compression.parse(compression)
        )
        self.batch_size = batch_size
        self._metadata_max_age_ms = metadata_max_age_ms
        self._accumulator = RecordAccumulator(
            log_manager, coordinator, self._txn, self.compression, buffer_memory
        )
        self._topics: dict[str, _TopicMetadata] = {}
        self._next_round_robin = 0  # the partition index of the next null-key record
        self._now_ms = log_manager.clock.time_ms

    # --- life cycle ------------------------------------------------------------------------------

    @property
    def producer_id(self) -> int:
        return self._txn.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._txn.producer_epoch

    @property
    def metadata_max_age_ms(self) -> int:
        """How long the partition count and max.message.bytes of a topic are used before they
        are read again (Kafka's metadata.max.age.ms); fixed at construction."""
        return self._metadata_max_age_ms

    @property
    def transaction_timeout_ms(self) -> int:
        return self._txn.transaction_timeout_ms

    @property
    def buffer_memory(self) -> int:
        """Bytes all buffers together may hold (Kafka's buffer.memory)."""
        return self._accumulator.buffer_memory

    @property
    def peak_buffered_bytes(self) -> int:
        """The most bytes the buffers held together so far."""
        return self._accumulator.peak_buffered_bytes

    def init_transactions(self) -> None:
        """Get a producer id and epoch; fence and finish older instances (C-14, C-33)."""
        self._txn.init_transactions()
        self._accumulator.reset_sequences()

    def begin_transaction(self) -> None:
        """Start a transaction (local only: the coordinator learns of it at the first write)."""
        self._txn.begin()

    def commit_transaction(self) -> None:
        """Flush (durably), then EndTxn(COMMIT) (C-36)."""
        self._txn.check_can_end(commit=True)
        self.flush()
        self._txn.end(commit=True)

    def abort_transaction(self) -> None:
        """Drop what is buffered, then EndTxn(ABORT) (C-37); the only call a transaction in
        the abortable error or prepared state allows, and it returns the producer to READY."""
        self._txn.check_can_end(commit=False)
        self._accumulator.clear()
        self._txn.end(commit=False)

    def prepare_transaction(self) -> PreparedTxnState:
        """KIP-939's prepareTransaction: append and fsync everything buffered, then confirm
        with the coordinator that this instance still owns its transactional id
        (ProducerFencedError otherwise: a newer instance or the transaction timeout fenced it,
        so the transaction can never commit). The transaction stays open: the returned state
        names it for whoever completes it (the coordinator's atomic commit of many
        transactions). Afterwards this producer allows only ``abort_transaction()`` and
        ``close()``."""
        self._txn.require(State.IN_TRANSACTION, "prepare_transaction()")
        self.flush()
        return self._txn.prepare()

    def transaction_writes(self) -> dict[TopicPartition, PartitionWrites]:
        """Records and batches appended per partition in the current transaction (what is
        still buffered is not counted), sorted by partition."""
        return self._txn.writes()

    def close(self) -> None:
        """Flush what is buffered outside a transaction; an open transaction is left to the
        coordinator's timeout or the next instance, as in Kafka."""
        if self._txn.state in (State.READY, State.UNINITIALIZED) and not self._txn.is_fatal:
            self.flush()
        self._txn.close()

    # --- sending ---------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: BytesLike | None,
        key: BytesLike | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, BytesLike | None]] | None = None,
        timestamp_ms: int | None = None,
    ) -> TopicPartition:
        """Buffer one record; returns the partition it goes to (murmur2 of the key, or
        round-robin for null keys, unless ``partition`` is given).

        Every field is checked before anything is buffered (``producer_record``): the topic
        must exist and not be internal, and the record alone must make a batch within the
        topic's max.message.bytes, compressed when the codec could grow it past that (F-09).
        A refused record raises a typed ConfigError naming the partition (or topic) and the
        field. A full buffer is appended first; if that fails it stays buffered and this
        record is not buffered. Inside a transaction any failure leaves the producer
        abortable only (see the module doc).
        """
        # The common case in one pass, no object per record: a topic sent to before (so it
        # passed check_destination) whose metadata is fresh, bytes or None key and value, no
        # headers, a valid timestamp and partition, a producer that may send now, and a record
        # that joins a partition's open buffer without filling it (``add_fast``). It checks
        # what the general path below checks; whenever one condition does not hold, the
        # general path decides, raises the error, or drains a full buffer.
        meta = self._topics.get(topic) if type(topic) is str else None
        if (
            meta is not None
            and headers is None
            and (key is None or type(key) is bytes)
            and (value is None or type(value) is bytes)
            and (now := self._now_ms()) <= meta.fresh_until_ms
            and now <= self._txn.send_until_ms
        ):
            if timestamp_ms is None:
                stamp = now
            elif type(timestamp_ms) is int and 0 <= timestamp_ms <= INT64_MAX:
                stamp = timestamp_ms
            else:
                stamp = -1
            if partition is not None:
                chosen = partition
            elif key is not None:
                chosen = partition_for_key(key, meta.partitions)
            else:  # taken only if the record is buffered here, as the general path does
                chosen = self._next_round_robin % meta.partitions
            if (
                stamp >= 0
                and type(chosen) is int
                and 0 <= chosen < meta.partitions
                and (buffer := meta.buffers[chosen]) is not None
                and self._accumulator.add_fast(
                    buffer, key, value, stamp, meta.batch_limit, meta.fits_alone
                )
            ):
                if partition is None and key is None:
                    self._next_round_robin += 1
                return meta.names[chosen]
        self._txn.require_open_transaction(f"send() to {topic!r}")
        try:
            return self._send(topic, value, key, partition, headers, timestamp_ms)
        except BaseException as error:
            self._txn.maybe_abortable(error)
            raise

    def _send(
        self,
        topic: object,
        value: object,
        key: object,
        partition: object,
        headers: object,
        timestamp_ms: object,
    ) -> TopicPartition:
        self._txn.maybe_check_transaction_timeout()
        name, chosen = (
            (topic, partition)  # a topic is cached only after it passed check_destination
            if type(topic) is str
            and topic in self._topics
            and (partition is None or type(partition) is int)
            else check_destination(topic, partition)
        )
        now_ms = self._log.clock.time_ms() if timestamp_ms is None else -1
        record = validate_record(name, chosen, key, value, timestamp_ms, headers, now_ms)
        tp = self._partition_for(name, record.key, chosen)
        body = record_body_size(record)
        max_bytes = self._topics[name].max_message_bytes  # fresh: _partition_for read it
        accumulator = self._accumulator
        buffer = accumulator.buffer(tp)
        if isinstance(buffer, ArrowBuffer):  # Arrow batches sent before: they go first
            accumulator.drain_before_buffering(tp, "record")
            buffer = None
        size = record_size(body, 0, 0) if buffer is None else buffer.next_size(record, body)
        check_record_fits(tp, record, body, size, max_bytes, self.compression, accumulator.encode)
        limit = min(self.batch_size, max_bytes - HEADER_SIZE)
        if buffer is not None and buffer.count and buffer.size + size > limit:
            accumulator.drain_before_buffering(tp, "record")
            size = record_size(body, 0, 0)
        accumulator.reserve(size, "record")
        accumulator.add_record(tp, record, body, size)
        return tp

    def send_batch(self, topic_partition: TopicPartition, records: Any) -> None:
        """Buffer an Arrow record batch (or table) for ``topic_partition``: columns ``value``
        (required), ``key``, ``timestamp`` (ms, or an Arrow timestamp), ``headers``, as the
        columnar codec takes them; rows keep their order. An empty batch is a no-op.

        The partition's buffer is appended as one record batch when the next batch would push
        it past ``batch_size`` (capped below the topic's max.message.bytes); a batch that
        encodes larger than max.message.bytes is split (F-09), a single row too large fails
        with RecordTooLargeError. Column problems surface as InvalidRecordError when the
        buffer is encoded. Inside a transaction any failure leaves the producer abortable
        only, as with ``send()``.
        """
        self._txn.require_open_transaction(f"send_batch() to {topic_partition}")
        try:
            self._send_batch(topic_partition, records)
        except BaseException as error:
            self._txn.maybe_abortable(error)
            raise

    def _send_batch(self, tp: TopicPartition, records: Any) -> None:
        self._txn.maybe_check_transaction_timeout()
        if not isinstance(tp, TopicPartition):
            raise ConfigError(f"send_batch() needs a TopicPartition, got {tp!r}")
        name, partition = check_destination(tp.topic, tp.partition)
        tp = self._partition_for(name, None, partition)
        if not hasattr(records, "num_rows") or not hasattr(records, "nbytes"):
            raise ConfigError(
                f"send_batch() to {tp} needs a pyarrow RecordBatch or Table, got "
                f"{type(records).__name__}"
            )
        if records.num_rows == 0:
            return
        size = int(records.nbytes)
        limit = min(self.batch_size, int(self._topics[name].max_message_bytes * ARROW_FILL))
        accumulator = self._accumulator
        buffer = accumulator.buffer(tp)
        if isinstance(buffer, ArrowBuffer) and not buffer.accepts(records):
            accumulator.drain_before_buffering(tp, "batch")  # other columns: a batch of their own
        elif buffer is not None and (
            isinstance(buffer, PartitionBuffer) or buffer.size + size > limit
        ):
            accumulator.drain_before_buffering(tp, "batch")
        accumulator.reserve(size, "batch")
        if accumulator.add_arrow(tp, records).size >= limit:
            self._txn.call(accumulator.drain, tp)

    def _metadata(self, topic: str, *, refresh: bool = False) -> _TopicMetadata:
        """Partition count and max batch size of ``topic``, cached like Kafka's producer
        metadata: re-read after ``metadata_max_age_ms`` or when a partition is out of range."""
        cached = self._topics.get(topic)
        now = self._log.clock.time_ms()
        if refresh or cached is None or now > cached.fresh_until_ms:
            partitions = len(self._log.partitions(topic))
            max_bytes = self._log.topic_config(topic).max_message_bytes
            cached = _TopicMetadata(
                partitions,
                max_bytes,
                now + self._metadata_max_age_ms,
                tuple(TopicPartition(topic, p) for p in range(partitions)),
                min(self.batch_size, max_bytes - HEADER_SIZE),
                fits_alone_size(max_bytes, self.compression),
                self._accumulator.record_buffers(topic, partitions),
            )
            self._topics[topic] = cached
        return cached

    def _partition_for(
        self, topic: str, key: bytes | None, partition: int | None
    ) -> TopicPartition:
        meta = self._metadata(topic)
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, meta.partitions)
            else:
                partition = self._next_round_robin % meta.partitions
                self._next_round_robin += 1
        elif not 0 <= partition < meta.partitions:
            meta = self._metadata(topic, refresh=True)
            if not 0 <= partition < meta.partitions:
                raise UnknownTopicOrPartitionError(
                    f"partition {partition} of topic {topic!r} does not exist; valid partitions "
                    f"are 0..{meta.partitions - 1}"
                )
        return meta.names[partition]  # one object per partition: dict lookups by identity

    def register_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for ``partitions`` now, in one request, ahead of their records
        (C-16, C-38); sends register the partitions they buffer on their own when their
        buffers are first appended. Inside a transaction only."""
        self._txn.require_open_transaction("register_partitions()")
        try:
            self._txn.call(self._txn.register_partitions, partitions)
        except BaseException as error:
            self._txn.maybe_abortable(error)
            raise

    def flush(self) -> list[RecordMetadata]:
        """Append every buffered record and make it durable (fsync) before returning.

        On an error, the records not appended yet stay buffered for the next flush, except a
        record that can never be written (``RecordAccumulator.drain``); inside a transaction
        the producer is then abortable only.
        """
        self._txn.check_usable()
        try:
            return self._accumulator.flush()
        except BaseException as error:
            self._txn.maybe_abortable(error)
            raise

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group_id: str,
    ) -> None:
        """Commit ``offsets`` (next offsets to read) for ``group_id`` inside the transaction:
        visible only if it commits (C-35, O-02..O-04)."""
        self._txn.require(State.IN_TRANSACTION, "send_offsets_to_transaction()")
        try:
            validate_group_id(group_id)
            normalized = normalize_offsets(offsets)
            self._txn.call(self._send_offsets, normalized, group_id)
        except BaseException as error:
            self._txn.maybe_abortable(error)
            raise

    def _send_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group_id: str
    ) -> None:
        self._txn.register_offsets(group_id)
        transaction = (self._txn_id(), self.producer_id, self.producer_epoch)
        plog = self._log.partition_log(OFFSETS_PARTITION)
        txn_offset_commit(
            self._coordinator, self._group_offsets, plog, transaction, group_id, offsets
        )
        self._accumulator.add_written(OFFSETS_PARTITION)

    def _txn_id(self) -> str:
        if self.transactional_id is None:  # send_offsets_to_transaction checked the state
            raise ConfigError("a transactional offset commit needs a transactional.id")
        return self.transactional_id
