"""The producer's record accumulator: its buffers within ``buffer.memory``, and the drain that
appends them as batches (Kafka's and aiokafka's ``RecordAccumulator``; F-08, F-09, P-08, P-09).

``RecordAccumulator`` keeps one buffer per partition (``producer_batch``) and the bytes they
hold together: before a record or batch is buffered past ``buffer_memory``, the largest
buffers are appended (where Kafka's producer blocks ``send()`` until batches leave), so a
producer's memory is bounded whatever it is given to send; ``peak_buffered_bytes`` says how
high it went.

Its drain is also the synchronous half of Kafka's ``Sender``: a partition's buffer leaves as
record batches stamped with the producer id, epoch and the partition's next sequence (P-08,
P-09), each appended whole through ``append_client_batch`` (F-08); a record leaves its buffer
only once the batch holding it was appended, so a failed append loses none. A batch that
came out larger than ``max.message.bytes``, which only compression can cause (the
uncompressed size is exact), is split (``batch_limits.split_count``): Kafka's producer
likewise splits a batch the broker refused as too large and re-enqueues the parts, in order;
a record that no longer fits even alone is dropped with an error that names it
(``batch_limits.drop_too_large``).

Not thread-safe; the producer that owns the accumulator serialises access (C-39).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from txn_log.coordinator.transaction_coordinator import TransactionCoordinator
from txn_log.coordinator.transactional_append import (
    VerifiedTransaction,
    append_client_batch,
    verified_transaction_starts,
)
from txn_log.errors import TxnLogError, UnknownTopicOrPartitionError
from txn_log.fault_points import crash_point
from txn_log.log_dir.log_manager import LogManager
from txn_log.producer.batch_limits import MAX_BATCH_BYTES, drop_too_large, split_count
from txn_log.producer.producer_batch import (
    ArrowBuffer,
    PartitionBuffer,
    ProducerBuffer,
    encode_producer_batch,
)
from txn_log.producer.producer_record import (
    ProducerRecord,
    RecordMetadata,
    record_size,
)
from txn_log.producer.transaction_manager import TransactionManager
from txn_log.record.batch_header import Compression
from txn_log.record.varint import size_of_varint
from txn_log.storage.group_sync import flush_all
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

if TYPE_CHECKING:
    from txn_log.storage.partition_log import PartitionLog

SEQUENCE_MODULUS = 1 << 31  # sequences wrap at int32 max (P-12)


class RecordAccumulator:
    """One producer's buffers, at most ``buffer_memory`` bytes together, and the drain that
    appends them (see the module doc): to the partitions of ``log_manager``, each batch through
    ``coordinator``'s one append of a client batch, asking ``txn`` before each step and telling
    it what was appended. Owns the partitions' next sequences (P-08, P-09)."""

    def __init__(
        self,
        log_manager: LogManager,
        coordinator: TransactionCoordinator,
        txn: TransactionManager,
        compression: Compression,
        buffer_memory: int,
    ) -> None:
        self._log = log_manager
        self._coordinator = coordinator
        self._txn = txn
        self.compression = compression
        self.buffer_memory = buffer_memory
        self._buffers: dict[TopicPartition, ProducerBuffer] = {}
        # the record buffers of ``_buffers`` again, per topic by partition (None: none), for
        # ``send()``'s common case: lists handed out by ``record_buffers``, changed in place
        self._record_buffers: dict[str, list[PartitionBuffer | None]] = {}
        self._buffered_bytes = 0  # of every buffer together
        self._peak_before_drain = 0  # the most buffered before the last decrease
        self._sequences: dict[TopicPartition, int] = {}
        # appended to since the last flush: the partition log appended through (None: by
        # another path, ``add_written``), whose file the flush syncs
        self._written: dict[TopicPartition, PartitionLog | None] = {}
        self._topic_ids: dict[TopicPartition, str | None] = {}  # of the partitions written

    # --- buffering -------------------------------------------------------------------------------

    @property
    def peak_buffered_bytes(self) -> int:
        """The most bytes the buffers held together so far: between two decreases the
        buffered bytes only grow, so the peak is the larger of the current figure and the
        figure before the last decrease (noted there, not on every add)."""
        return max(self._peak_before_drain, self._buffered_bytes)

    def buffer(self, tp: TopicPartition) -> ProducerBuffer | None:
        """``tp``'s buffer, None when nothing is buffered for it."""
        return self._buffers.get(tp)

    def record_buffers(self, topic: str, partitions: int) -> list[PartitionBuffer | None]:
        """``topic``'s record buffers by partition (None where a partition has none, or an
        Arrow buffer), at least ``partitions`` long: a live list, the same object on every
        call, which the accumulator changes in place whenever a buffer comes or goes, so
        ``send()``'s common case finds a partition's buffer without hashing its name."""
        slots = self._record_buffers.setdefault(topic, [])
        for partition in range(len(slots), partitions):
            buffer = self._buffers.get(TopicPartition(topic, partition))
            slots.append(buffer if isinstance(buffer, PartitionBuffer) else None)
        return slots

    def _put_buffer(self, tp: TopicPartition, buffer: ProducerBuffer) -> None:
        """Make ``buffer`` ``tp``'s, in ``_buffers`` and its topic's ``record_buffers``."""
        self._buffers[tp] = buffer
        self._set_slot(tp, buffer if isinstance(buffer, PartitionBuffer) else None)

    def _remove_buffer(self, tp: TopicPartition) -> None:
        """``tp`` has no buffer any more, in ``_buffers`` nor in ``record_buffers``."""
        self._buffers.pop(tp, None)
        self._set_slot(tp, None)

    def _set_slot(self, tp: TopicPartition, buffer: PartitionBuffer | None) -> None:
        slots = self._record_buffers.get(tp.topic)
        if slots is not None and tp.partition < len(slots):
            slots[tp.partition] = buffer

    def add_record(
        self, tp: TopicPartition, record: ProducerRecord, body_size: int, size: int
    ) -> None:
        """Buffer ``record`` (validated) for ``tp``; ``size`` is ``next_size`` of ``tp``'s
        buffer, recomputed when ``tp`` has no record buffer (any more: ``reserve`` may have
        appended it)."""
        buffer = self._buffers.get(tp)
        if not isinstance(buffer, PartitionBuffer):
            buffer = PartitionBuffer()
            self._put_buffer(tp, buffer)
            size = record_size(body_size, 0, 0)
        buffer.add(record, body_size, size)
        self._buffered_bytes += size

    def add_fast(
        self,
        buffer: PartitionBuffer,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        batch_limit: int,
        fits_alone: int,
    ) -> bool:
        """``send()``'s common case: buffer a record whose fields are checked (bytes or None
        key and value, no headers, a valid timestamp) in ``buffer``, a partition's record
        buffer from ``record_buffers``, when it holds records and the record fits it,
        ``batch_limit`` and ``buffer_memory`` without draining anything, and its size is at
        most ``fits_alone`` (so ``check_record_fits`` would pass on the size alone). Sizes it
        exactly as ``record_body_size`` and ``record_size`` do, inline. False, changing
        nothing, when any of that does not hold."""
        values = buffer.values
        if not values:
            return False
        # varints of non-negative n: 1 byte below 64 (zigzag 2n < 2**7), 2 below 8192
        if key is None:
            body = 3  # attributes, key length -1, header count 0
        else:
            length = len(key)
            body = length + (1 if length < 64 else 2 if length < 8192 else size_of_varint(length))
            body += 2
        if value is None:
            body += 1
        else:
            length = len(value)
            body += length + (1 if length < 64 else 2 if length < 8192 else size_of_varint(length))
        index = len(values)
        same_run = timestamp == buffer.last_timestamp  # the timestamp delta's size is known
        body += (1 if index < 64 else 2 if index < 8192 else size_of_varint(index)) + (
            buffer.last_delta_size
            if same_run
            else size_of_varint(timestamp - buffer.first_timestamp)
        )
        size = body + (1 if body < 64 else 2 if body < 8192 else size_of_varint(body))
        if (
            size > fits_alone
            or buffer.size + size > batch_limit
            or self._buffered_bytes + size > self.buffer_memory
        ):
            return False
        if not same_run:
            buffer.new_timestamp(index, timestamp)
        if key is not None or buffer.keys is not None:
            buffer.add_key(index, key)
        values.append(value)
        if buffer.headers is not None:
            buffer.headers.append(())
        buffer.size += size
        self._buffered_bytes += size
        return True

    def add_arrow(self, tp: TopicPartition, records: Any) -> ArrowBuffer:
        """Buffer an Arrow record batch (or table) for ``tp``; returns ``tp``'s buffer."""
        buffer = self._buffers.get(tp)
        if not isinstance(buffer, ArrowBuffer):
            buffer = ArrowBuffer()
            self._put_buffer(tp, buffer)
        buffer.add(records)
        self._buffered_bytes += int(records.nbytes)
        return buffer

    def drain_before_buffering(self, tp: TopicPartition, what: str) -> None:
        """Append ``tp``'s buffer before buffering more for it; if that fails, nothing new is
        buffered."""
        try:
            self._txn.call(self.drain, tp)  # appends all of it or raises
        except TxnLogError as error:
            error.add_note(f"send to {tp} did not buffer its {what}: the full buffer failed")
            raise

    def reserve(self, size: int, what: str) -> None:
        """Append the largest buffers until ``size`` more bytes fit in ``buffer_memory`` (or
        nothing is left buffered): Kafka's producer blocks send() until memory frees."""
        while self._buffers and self._buffered_bytes + size > self.buffer_memory:
            largest = max(self._buffers, key=lambda t: self._buffers[t].size)
            self.drain_before_buffering(largest, what)

    def clear(self) -> None:
        """Drop everything buffered (an aborted transaction's records)."""
        self._buffers.clear()
        for slots in self._record_buffers.values():
            slots[:] = [None] * len(slots)  # in place: the lists are handed out
        self._drained(self._buffered_bytes)

    def _drained(self, size: int) -> None:
        """``size`` buffered bytes left the buffers; the peak before is noted first."""
        self._peak_before_drain = self.peak_buffered_bytes
        self._buffered_bytes -= size

    # --- draining --------------------------------------------------------------------------------

    def flush(self) -> list[RecordMetadata]:
        """Append every buffer, then fsync every partition appended to since the last flush
        (``add_written`` included): the partition log each batch went through, so the file
        synced is the one written, with no lookup. On an error what is not appended stays
        buffered, and the partitions written stay to be synced by the next flush."""
        results = self._txn.call(self._drain_transaction_starts)
        for tp in list(self._buffers):
            results.extend(self._txn.call(self.drain, tp))
        flush_all(
            [plog or self._log.partition_log(tp) for tp, plog in sorted(self._written.items())]
        )
        self._written.clear()
        return results

    def _drain_transaction_starts(self) -> list[RecordMetadata]:
        """Register the partitions buffered for (AddPartitionsToTxn) and append the first batch
        of each partition the transaction has not written yet under one hold of the
        coordinator, which verifies them together (KIP-890, C-16:
        ``verified_transaction_starts``), instead of one hold each; the rest of each
        buffer follows outside it, as every later batch of a transaction does. Nothing to do
        for an idempotent producer, nor when every buffered partition has been written."""
        transactional_id = self._txn.transactional_id
        starting = [
            tp for tp, buffer in self._buffers.items()
            if buffer.count and not self._txn.has_written(tp)
        ]  # fmt: skip
        if transactional_id is None or not starting:
            return []
        txn = self._txn
        new = txn.unregistered(t for t, b in self._buffers.items() if b.count)
        transaction = (transactional_id, txn.producer_id, txn.producer_epoch)
        with verified_transaction_starts(
            self._coordinator,
            transaction,
            starting,
            add=new,  # AddPartitionsToTxn in the hold
        ) as verified:
            txn.registered(new)
            results = []
            for tp in starting:
                results.extend(self.drain(tp, verified))
                crash_point("producer.after_first_batch")
            return results

    def add_written(self, tp: TopicPartition) -> None:
        """``tp`` was appended to outside the buffers (a transactional offset commit): the next
        flush syncs it too."""
        self._written.setdefault(tp, None)

    def reset_sequences(self) -> None:
        """A new producer id or epoch: every partition's sequence starts again at 0 (P-10)."""
        self._sequences.clear()

    def drain(
        self, tp: TopicPartition, verified: VerifiedTransaction | None = None
    ) -> list[RecordMetadata]:
        """Append ``tp``'s buffered records, oldest first, in batches within the partition's
        max.message.bytes (F-09). Records leave the buffer only once their batch is appended,
        so a failed append loses none (STYLE 3). With ``verified`` (the coordinator held for the
        transaction's start in ``tp``) only the first batch is appended.

        A batch that compression grew past the limit is split and the parts appended in order,
        each with the next sequence (P-08, P-09), as Kafka's producer splits and re-enqueues a
        batch the broker found too large. A record too large even alone (the topic's limit
        shrank after ``send()`` checked it) is dropped with RecordTooLargeError naming it; the
        records after it stay buffered.
        """
        buffer = self._buffers.get(tp)
        if buffer is None or not buffer.count:
            self._remove_buffer(tp)
            return []
        before = buffer.size
        try:
            return self._drain_buffer(tp, buffer, verified)
        finally:
            self._drained(before - (buffer.size if tp in self._buffers else 0))

    def _drain_buffer(
        self, tp: TopicPartition, buffer: ProducerBuffer, verified: VerifiedTransaction | None
    ) -> list[RecordMetadata]:
        self._txn.ensure_producer_id()
        if self._txn.transactional_id is not None:
            self._txn.register_partitions(t for t, b in self._buffers.items() if b.count)
        plog = self._partition_log_for_drain(tp, buffer)
        if self._topic_ids.setdefault(tp, plog.topic_id) != plog.topic_id:
            # the topic was deleted and re-created: a new partition, which has never seen this
            # producer, so its sequence starts again at 0 (P-10: an unknown producer starts at 0)
            self._sequences.pop(tp, None)
            self._topic_ids[tp] = plog.topic_id
        fresh = plog.refresh_config()
        limit = min(fresh.max_message_bytes, MAX_BATCH_BYTES)
        config: TopicConfig | None = fresh
        results = []
        count = buffer.count
        while buffer.count:
            count = min(count, buffer.count)
            sequence = self._sequences.get(tp, 0)
            batch = buffer.encode_head(count, **self._batch_settings(sequence))
            if len(batch) > limit:
                if count == 1:
                    raise drop_too_large(tp, buffer, len(batch), limit, self.compression)
                count = split_count(count, len(batch), limit)
                continue
            result = append_client_batch(
                self._coordinator,
                plog,
                batch,
                transactional_id=self._txn.transactional_id,
                verified=verified,
                config=config,  # the first append uses the config just read; the others
            )  # read it again, so a config changed meanwhile applies from the next batch on
            config = None
            self._sequences[tp] = (sequence + count) % SEQUENCE_MODULUS
            self._written[tp] = plog
            buffer.remove_head(count)
            results.append(RecordMetadata(tp, result.base_offset, result.last_offset))
            self._txn.record_append(tp, count)
            if verified is not None:
                break
        if not buffer.count:
            self._remove_buffer(tp)
        return results

    def _partition_log_for_drain(self, tp: TopicPartition, buffer: ProducerBuffer) -> PartitionLog:
        """``tp``'s log. When the partition is gone (its topic was deleted), the idempotent
        producer drops its records, naming how many, instead of failing every later flush;
        a transactional one keeps them until the abort its error requires."""
        try:
            return self._log.partition_log(tp)
        except UnknownTopicOrPartitionError as error:
            if self._txn.transactional_id is not None:
                raise
            count = buffer.count
            self._remove_buffer(tp)
            raise UnknownTopicOrPartitionError(
                f"{error}; the {count} record(s) buffered for {tp} were dropped"
            ) from error

    def encode(self, records: list[ProducerRecord], sequence: int) -> bytes | memoryview:
        """One batch of ``records`` with this producer's id, epoch and codec."""
        return encode_producer_batch(records, **self._batch_settings(sequence))

    def _batch_settings(self, sequence: int) -> dict[str, Any]:
        """The batch header fields of this producer's next batch, as ``encode_batch`` takes
        them."""
        return {
            "producer_id": self._txn.producer_id,
            "producer_epoch": self._txn.producer_epoch,
            "base_sequence": sequence,
            "transactional": self._txn.transactional_id is not None,
            "compression": self.compression,
            "now_ms": self._log.clock.time_ms(),
        }
