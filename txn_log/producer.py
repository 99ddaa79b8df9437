"""``Producer``: KIP-98's idempotent and transactional producer on an embedded log (C-33..C-40).

Records are buffered per partition and appended as one batch per partition when the buffer
reaches ``batch_size`` bytes, on ``flush()``, and on ``commit_transaction()``. Each batch carries
the producer id, epoch and the partition's next sequence (P-08, P-09); a batch is appended
whole or not at all (F-08), and a retried append of the same bytes is answered with its
original offsets (P-10 step 5), which is what ``_append`` relies on after a transient error.

Without a transactional id the producer is idempotent within its session only (G-02, G-13):
a fresh producer id on the first send (P-06). With one, ``init_transactions()`` fences every
older instance (C-24), and the first write to each partition registers it with the coordinator
before any data is written (C-16, C-38).

A fatal error (fenced, out-of-order sequence) makes the producer unusable: every later call
raises it again (P-13, C-40). Not thread-safe: one thread drives one producer (C-39).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from txn_log.errors import (
    ConfigError,
    FatalError,
    FencedError,
    InvalidTxnStateError,
    RecordTooLargeError,
    TxnLogError,
    UnknownTopicOrPartitionError,
)
from txn_log.group_offsets import (
    OFFSETS_PARTITION,
    OffsetAndMetadata,
    normalize_offsets,
    validate_group_id,
)
from txn_log.partitioner import partition_for_key
from txn_log.record.batch_header import HEADER_SIZE, Compression
from txn_log.storage.group_sync import flush_all
from txn_log.storage.producer_append_info import AppendOrigin
from txn_log.topic_partition import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from txn_log.log import Log

_P = ParamSpec("_P")
_T = TypeVar("_T")
DEFAULT_BATCH_SIZE = 512 * 1024
RECORD_OVERHEAD = 32  # a generous bound on one record's varints and attributes (F-23)
Header = tuple[str, "bytes | None"]


class _State(Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    FATAL = "fatal error"
    CLOSED = "closed"


@dataclass(frozen=True)
class RecordMetadata:
    """Where one appended batch landed: offsets inclusive."""

    topic_partition: TopicPartition
    base_offset: int
    last_offset: int


@dataclass(frozen=True)
class _TopicMetadata:
    partitions: int
    max_message_bytes: int
    read_ms: int


@dataclass
class _Buffer:
    records: list[tuple[bytes | None, bytes | None, int, tuple[Header, ...]]] = field(
        default_factory=list
    )
    size: int = 0


class Producer:
    """Sends records to a log, idempotently, optionally in transactions."""

    def __init__(
        self,
        log: Log,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        *,
        compression: str | Compression = Compression.NONE,
        batch_size: int = DEFAULT_BATCH_SIZE,
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
        self._log = log
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.compression = (
            compression if isinstance(compression, Compression) else Compression.parse(compression)
        )
        self.batch_size = batch_size
        self.metadata_max_age_ms = metadata_max_age_ms
        self._topics: dict[str, _TopicMetadata] = {}
        self.producer_id = -1
        self.producer_epoch = -1
        self._state = _State.UNINITIALIZED
        self._fatal: TxnLogError | None = None
        self._sequences: dict[TopicPartition, int] = {}
        self._buffers: dict[TopicPartition, _Buffer] = {}
        self._txn_partitions: set[TopicPartition] = set()
        self._txn_started_ms = -1
        self._round_robin = itertools.count()
        self._written: set[TopicPartition] = set()
        self._topic_ids: dict[TopicPartition, str | None] = {}  # of the partitions written

    # --- life cycle ------------------------------------------------------------------------------

    def init_transactions(self) -> None:
        """Get a producer id and epoch; fence and finish older instances (C-14, C-33)."""
        self._check_usable()
        if self.transactional_id is None:
            raise InvalidTxnStateError(
                "init_transactions() needs a transactional id; this producer is idempotent only"
            )
        self._call(self._init_producer_id)

    def _init_producer_id(self) -> None:
        self.producer_id, self.producer_epoch = self._log.coordinator.init_producer_id(
            self.transactional_id, self.transaction_timeout_ms
        )
        self._sequences.clear()
        self._state = _State.READY

    def begin_transaction(self) -> None:
        """Start a transaction (local only: the coordinator learns of it at the first write)."""
        self._require(_State.READY, "begin_transaction()")
        if self.transactional_id is None:
            raise InvalidTxnStateError("begin_transaction() on a producer without transactional id")
        self._state = _State.IN_TRANSACTION
        self._txn_partitions.clear()
        self._txn_started_ms = -1

    def commit_transaction(self) -> None:
        """Flush (durably), then EndTxn(COMMIT) (C-36)."""
        self._require(_State.IN_TRANSACTION, "commit_transaction()")
        self.flush()
        self._call(self._end_txn, True)

    def abort_transaction(self) -> None:
        """Drop what is buffered, then EndTxn(ABORT) (C-37)."""
        self._require(_State.IN_TRANSACTION, "abort_transaction()")
        self._buffers.clear()
        self._call(self._end_txn, False)

    def _end_txn(self, commit: bool) -> None:
        if self._txn_partitions:
            self._log.coordinator.end_txn(
                self._transactional_id(), self.producer_id, self.producer_epoch, commit
            )
        self._state = _State.READY
        self._txn_partitions.clear()

    def close(self) -> None:
        """Flush what is buffered outside a transaction; an open transaction is left to the
        coordinator's timeout or the next instance, as in Kafka."""
        if self._state in (_State.READY, _State.UNINITIALIZED) and self._fatal is None:
            self.flush()
        self._state = _State.CLOSED

    # --- sending ---------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[Header] | None = None,
        timestamp_ms: int | None = None,
    ) -> TopicPartition:
        """Buffer one record; returns the partition it goes to (murmur2 of the key, or
        round-robin for null keys, unless ``partition`` is given)."""
        self._check_usable()
        if self.transactional_id is not None and self._state is not _State.IN_TRANSACTION:
            raise InvalidTxnStateError(
                f"send() to {topic!r} outside a transaction: a transactional producer must call "
                "begin_transaction() first"
            )
        if self._txn_started_ms >= 0:
            self._call(self._check_transaction_timeout)  # one clock read unless it has expired
        tp = self._partition_for(topic, key, partition)
        record_headers = tuple(headers or ())
        size = (
            len(key or b"")
            + len(value or b"")
            + RECORD_OVERHEAD
            + sum(len(k) + len(v or b"") + 8 for k, v in record_headers)
        )
        max_bytes = self._metadata(topic).max_message_bytes
        if size + HEADER_SIZE > max_bytes:
            raise RecordTooLargeError(
                f"record of about {size} bytes for {tp} cannot fit in one batch of at most "
                f"max.message.bytes={max_bytes} bytes (F-09)"
            )
        buffer = self._buffers.setdefault(tp, _Buffer())
        if buffer.records and buffer.size + size > min(self.batch_size, max_bytes - HEADER_SIZE):
            self._call(self._drain, tp)
            buffer = self._buffers.setdefault(tp, _Buffer())
        timestamp = self._log.clock.time_ms() if timestamp_ms is None else timestamp_ms
        buffer.records.append((key, value, timestamp, record_headers))
        buffer.size += size
        return tp

    def _metadata(self, topic: str, *, refresh: bool = False) -> _TopicMetadata:
        """Partition count and max batch size of ``topic``, cached like Kafka's producer
        metadata: re-read after ``metadata_max_age_ms`` or when a partition is out of range."""
        cached = self._topics.get(topic)
        now = self._log.clock.time_ms()
        if refresh or cached is None or now - cached.read_ms > self.metadata_max_age_ms:
            cached = _TopicMetadata(
                len(self._log.partitions(topic)),
                self._log.topic_config(topic).max_message_bytes,
                now,
            )
            self._topics[topic] = cached
        return cached

    def _partition_for(
        self, topic: str, key: bytes | None, partition: int | None
    ) -> TopicPartition:
        partitions = self._metadata(topic).partitions
        if partition is None:
            partition = (
                partition_for_key(key, partitions)
                if key is not None
                else next(self._round_robin) % partitions
            )
        elif not 0 <= partition < partitions:
            partitions = self._metadata(topic, refresh=True).partitions
            if not 0 <= partition < partitions:
                raise UnknownTopicOrPartitionError(
                    f"partition {partition} of topic {topic!r} does not exist; valid partitions "
                    f"are 0..{partitions - 1}"
                )
        return TopicPartition(topic, partition)

    def _register_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for every buffered partition new to the transaction, in one
        request, before any of them is written (C-16, C-38)."""
        self._check_transaction_timeout()
        new = sorted(set(partitions) - self._txn_partitions)
        if not new:
            return
        self._log.coordinator.add_partitions(
            self._transactional_id(), self.producer_id, self.producer_epoch, new
        )
        if not self._txn_partitions:
            self._txn_started_ms = self._log.clock.time_ms()
        self._txn_partitions.update(new)

    def _check_transaction_timeout(self) -> None:
        """Past its timeout the coordinator aborts the transaction with an epoch bump (C-25);
        asking it now makes that happen and fences this instance, without a daemon."""
        if self._txn_started_ms < 0:
            return
        if self._log.clock.time_ms() - self._txn_started_ms > self.transaction_timeout_ms:
            self._log.coordinator.check_producer(
                self._transactional_id(), self.producer_id, self.producer_epoch
            )

    def flush(self) -> list[RecordMetadata]:
        """Append every buffered batch and make it durable (fsync) before returning."""
        self._check_usable()
        results = []
        for tp in list(self._buffers):
            results.extend(self._call(self._drain, tp))
        flush_all([self._log.partition_log(tp) for tp in sorted(self._written)])
        self._written.clear()
        return results

    def _drain(self, tp: TopicPartition) -> list[RecordMetadata]:
        buffer = self._buffers.pop(tp, None)
        if buffer is None or not buffer.records:
            return []
        if self.producer_id < 0:
            self.producer_id, self.producer_epoch = self._log.coordinator.init_producer_id(None, 0)
        if self.transactional_id is not None:
            self._register_partitions([tp, *self._buffers])
        plog = self._log.partition_log(tp)
        if self._topic_ids.setdefault(tp, plog.topic_id) != plog.topic_id:
            # the topic was deleted and re-created: a new partition, which has never seen this
            # producer, so its sequence starts again at 0 (P-10: an unknown producer starts at 0)
            self._sequences.pop(tp, None)
            self._topic_ids[tp] = plog.topic_id
        sequence = self._sequences.get(tp, 0)
        batch = self._encode(buffer, sequence)
        result = plog.append(batch)
        self._sequences[tp] = (sequence + len(buffer.records)) % (1 << 31)
        self._written.add(tp)
        return [RecordMetadata(tp, result.base_offset, result.last_offset)]

    def _encode(self, buffer: _Buffer, sequence: int) -> bytes:
        """One batch of the buffered records: the columnar encoder when no record has headers
        (whole-batch work on Arrow buffers), the per-record one otherwise."""
        from txn_log.record.codec import encode_batch, encode_records

        settings: dict[str, Any] = dict(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=sequence,
            transactional=self.transactional_id is not None,
            compression=self.compression,
            now_ms=self._log.clock.time_ms(),
        )
        if any(record[3] for record in buffer.records):
            return encode_records(buffer.records, **settings)
        import pyarrow as pa

        keys, values, timestamps, _ = zip(*buffer.records, strict=True)
        columns = pa.record_batch(
            [
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array(timestamps, pa.int64()),
            ],
            names=["key", "value", "timestamp"],
        )
        return encode_batch(columns, **settings)

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group_id: str,
    ) -> None:
        """Commit ``offsets`` (next offsets to read) for ``group_id`` inside the transaction:
        visible only if it commits (C-35, O-02..O-04)."""
        self._require(_State.IN_TRANSACTION, "send_offsets_to_transaction()")
        validate_group_id(group_id)
        normalized = normalize_offsets(offsets)
        self._call(self._send_offsets, normalized, group_id)

    def _send_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group_id: str
    ) -> None:
        self._check_transaction_timeout()
        if OFFSETS_PARTITION not in self._txn_partitions:
            self._log.coordinator.add_offsets(
                self._transactional_id(), self.producer_id, self.producer_epoch, group_id
            )
            if not self._txn_partitions:
                self._txn_started_ms = self._log.clock.time_ms()
            self._txn_partitions.add(OFFSETS_PARTITION)
        batch = self._log.group_offsets.encode_batch(
            group_id,
            offsets,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transactional=True,
        )
        plog = self._log.partition_log(OFFSETS_PARTITION)
        plog.append(batch, origin=AppendOrigin.COORDINATOR)
        self._written.add(OFFSETS_PARTITION)

    # --- state checks ----------------------------------------------------------------------------

    def _transactional_id(self) -> str:
        if self.transactional_id is None:
            raise InvalidTxnStateError("this producer has no transactional id")
        return self.transactional_id

    def _check_usable(self) -> None:
        if self._fatal is not None:
            raise type(self._fatal)(
                f"producer {self.producer_id} ({self.transactional_id!r}) hit a fatal error "
                f"earlier and cannot be used again (P-13): {self._fatal}"
            )
        if self._state is _State.CLOSED:
            raise InvalidTxnStateError(f"producer {self.transactional_id!r} is closed")

    def _require(self, state: _State, call: str) -> None:
        self._check_usable()
        if self._state is not state:
            raise InvalidTxnStateError(
                f"{call} on producer {self.transactional_id!r} in state {self._state.value}; "
                f"it needs state {state.value}"
            )

    def _call(self, method: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``method``; a fenced or fatal error poisons the producer (P-13, C-40)."""
        try:
            return method(*args, **kwargs)
        except (FencedError, FatalError) as error:
            self._fatal = error
            self._state = _State.FATAL
            raise
