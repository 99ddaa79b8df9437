"""Records of the coordinator's state log, ``__transaction_state`` (C-05, C-06, C-11, DESIGN §4).

Two record kinds share the log, told apart by the key's leading int16 version. All integers
are big-endian; ``string`` is an int16 byte length then UTF-8 (-1 = null, only where nullable);
``array`` is an int32 element count then the elements (-1 = null, only where nullable). These
are Kafka's *non-flexible* encodings (no varints, no tagged fields).

1. Kafka's ``TransactionLogKey`` v0 / ``TransactionLogValue`` v0, byte for byte (C-05, C-06
   [EXT]; Kafka's ``TransactionLog.keyToBytes`` / ``valueToBytes`` with the version prefix of
   ``MessageUtil.toVersionPrefixedBytes``)::

       key    version                           int16  = 0
              transactional_id                  string
       value  version                           int16  = 0
              producer_id                       int64
              producer_epoch                    int16
              transaction_timeout_ms            int32
              transaction_status                int8   TransactionState id (C-07)
              transaction_partitions            array, null when the status is Empty, of
                  topic                         string
                  partition_ids                 array of int32
              transaction_last_update_timestamp_ms  int64
              transaction_start_timestamp_ms    int64
       a null value is a tombstone: the id expired (C-11, T12)

   Kafka groups partitions by topic in no particular order; we write topics and partition ids
   sorted, so equal metadata always encodes to equal bytes. Value v1 (flexible, Kafka's
   ``transaction.version`` 2) is refused as an unknown version. Kafka writes DEAD and
   PREPARE_EPOCH_FENCE never; neither do we (``encode_value`` refuses them), but decoding
   accepts every id Kafka's ``TransactionState.fromId`` accepts (0..7).

2. txnlog's batch commit record (DESIGN §4 "Batch commit"). The key version 100 is one Kafka
   never uses, so Kafka's tools treat the record as an unknown key type::

       key    version                           int16  = 100
              sink_id                           string
       value  version                           int16  = 0
              batch_id                          int64  Spark's batchId; only grows per sink
              status                            int8   2 = PREPARE_COMMIT, 4 = COMPLETE_COMMIT
              transactions                      array of
                  transactional_id              string
                  producer_id                   int64
                  producer_epoch                int16
              group_id                          nullable string
              offsets                           array of
                  topic                         string
                  partition                     int32
                  offset                        int64  next offset to consume (exclusive end)
              timestamp_ms                      int64

   The PREPARE_COMMIT record is the commit point of the whole micro-batch; keyed by sink id,
   compaction keeps the newest batch of each sink, which is all the ledger needs.

Decoding is strict: a truncated field, trailing bytes, an unknown version, status or a
negative length where null is not allowed raise ``CorruptRecordError`` naming the record
kind, the field and the byte position.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from txn_log.coordinator.transaction_metadata import (
    MAX_PRODUCER_EPOCH,
    MAX_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
)
from txn_log.coordinator.transaction_state import TransactionState, is_persistable, state_name
from txn_log.errors import ConfigError, CorruptRecordError

TXN_LOG_KEY_VERSION = 0
TXN_LOG_VALUE_VERSION = 0
BATCH_COMMIT_KEY_VERSION = 100
BATCH_COMMIT_VALUE_VERSION = 0
MAX_STRING_BYTES = (1 << 15) - 1
"""Kafka's limit for a non-compact string: its length is an int16."""

VERSION = struct.Struct(">h")  # version of a key or value
STRING_LENGTH = struct.Struct(">h")  # byte length of a string, -1 = null
ARRAY_COUNT = struct.Struct(">i")  # element count of an array, -1 = null
PARTITION_ID = struct.Struct(">i")  # one element of partition_ids
TXN_VALUE_HEAD = struct.Struct(
    ">"
    "q"  # producer_id
    "h"  # producer_epoch
    "i"  # transaction_timeout_ms
    "b"  # transaction_status: TransactionState id
)
TXN_VALUE_TAIL = struct.Struct(
    ">"
    "q"  # transaction_last_update_timestamp_ms
    "q"  # transaction_start_timestamp_ms
)
BATCH_VALUE_HEAD = struct.Struct(
    ">"
    "q"  # batch_id
    "b"  # status: PREPARE_COMMIT (2) or COMPLETE_COMMIT (4)
)
TXN_REF_TAIL = struct.Struct(
    ">"
    "q"  # producer_id (after transactional_id)
    "h"  # producer_epoch
)
OFFSET_TAIL = struct.Struct(
    ">"
    "i"  # partition (after topic)
    "q"  # offset
)
BATCH_VALUE_TAIL = struct.Struct(">q")  # timestamp_ms

BATCH_STATUSES = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.COMPLETE_COMMIT})
_MAX_INT64 = (1 << 63) - 1
_MAX_INT32 = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class TransactionLogEntry:
    """One Kafka-format record: the id's metadata, or ``None`` for a tombstone (C-11)."""

    transactional_id: str
    metadata: TransactionMetadata | None

    def __post_init__(self) -> None:
        if self.metadata is not None and self.metadata.transactional_id != self.transactional_id:
            raise ValueError(
                f"entry key {self.transactional_id!r} holds metadata of "
                f"{self.metadata.transactional_id!r}"
            )


@dataclass(frozen=True, slots=True)
class TxnRef:
    """One task transaction of a batch commit: its id, producer id and epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int

    def __post_init__(self) -> None:
        if (
            not self.transactional_id
            or not 0 <= self.producer_id <= MAX_PRODUCER_ID
            or not 0 <= self.producer_epoch <= MAX_PRODUCER_EPOCH
        ):
            raise ValueError(f"invalid transaction reference {self}")


@dataclass(frozen=True, slots=True)
class BatchCommitEntry:
    """A batch commit record (DESIGN §4): PREPARE_COMMIT is the commit point of ``batch_id``.

    Invariants: ``status`` is PREPARE_COMMIT or COMPLETE_COMMIT; transactional ids are
    distinct; ``offsets`` are ``(topic, partition, next offset)`` for the sink's group.
    """

    sink_id: str
    batch_id: int
    status: TransactionState
    transactions: tuple[TxnRef, ...]
    group_id: str | None
    offsets: tuple[tuple[str, int, int], ...]
    timestamp_ms: int

    def __post_init__(self) -> None:
        ids = [t.transactional_id for t in self.transactions]
        problems = [
            "empty sink id" if not self.sink_id else "",
            f"batch id {self.batch_id} outside 0..2^63-1"
            if not 0 <= self.batch_id <= _MAX_INT64
            else "",
            f"status {state_name(self.status)} is not PrepareCommit or CompleteCommit"
            if self.status not in BATCH_STATUSES
            else "",
            "duplicate transactional ids" if len(set(ids)) != len(ids) else "",
            "an offset entry outside int32 partition / int64 offset"
            if any(
                not 0 <= p <= _MAX_INT32 or not -_MAX_INT64 - 1 <= o <= _MAX_INT64
                for _, p, o in self.offsets
            )
            else "",
        ]
        found = [p for p in problems if p]
        if found:
            raise ValueError(f"batch commit of sink {self.sink_id!r}: {'; '.join(found)}")

    @property
    def is_prepared(self) -> bool:
        """Committed but not yet rolled forward: recovery must finish it (C-22, T11)."""
        return self.status is TransactionState.PREPARE_COMMIT


StateLogEntry = TransactionLogEntry | BatchCommitEntry


# --- encoding ------------------------------------------------------------------------------


def _string(value: str, what: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > MAX_STRING_BYTES:
        raise ConfigError(f"{what} is {len(raw)} bytes, at most {MAX_STRING_BYTES} fit")
    return STRING_LENGTH.pack(len(raw)) + raw


def _nullable_string(value: str | None, what: str) -> bytes:
    return STRING_LENGTH.pack(-1) if value is None else _string(value, what)


def _partitions(partitions: frozenset[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    parts = [ARRAY_COUNT.pack(len(by_topic))]
    for topic in sorted(by_topic):
        ids = sorted(by_topic[topic])
        parts += [_string(topic, "topic"), ARRAY_COUNT.pack(len(ids))]
        parts += [PARTITION_ID.pack(i) for i in ids]
    return b"".join(parts)


def encode_key(entry: StateLogEntry) -> bytes:
    """The record key: ``TransactionLogKey`` v0, or the batch commit key (version 100)."""
    if isinstance(entry, TransactionLogEntry):
        return VERSION.pack(TXN_LOG_KEY_VERSION) + _string(
            entry.transactional_id, "transactional id"
        )
    return VERSION.pack(BATCH_COMMIT_KEY_VERSION) + _string(entry.sink_id, "sink id")


def encode_value(entry: StateLogEntry) -> bytes | None:
    """The record value; ``None`` (a tombstone) for a transactional id without metadata."""
    if isinstance(entry, BatchCommitEntry):
        return _encode_batch_value(entry)
    md = entry.metadata
    if md is None:
        return None
    if not is_persistable(md.state):
        raise ValueError(
            f"{md.describe()}: {state_name(md.state)} is never written to the "
            "state log (Dead is a tombstone, PrepareEpochFence becomes PrepareAbort)"
        )
    partitions = (
        ARRAY_COUNT.pack(-1)
        if md.state is TransactionState.EMPTY
        else _partitions(md.topic_partitions)
    )
    return b"".join(
        (
            VERSION.pack(TXN_LOG_VALUE_VERSION),
            TXN_VALUE_HEAD.pack(md.producer_id, md.producer_epoch, md.txn_timeout_ms, md.state),
            partitions,
            TXN_VALUE_TAIL.pack(md.txn_last_update_timestamp_ms, md.txn_start_timestamp_ms),
        )
    )


def _encode_batch_value(entry: BatchCommitEntry) -> bytes:
    parts = [
        VERSION.pack(BATCH_COMMIT_VALUE_VERSION),
        BATCH_VALUE_HEAD.pack(entry.batch_id, entry.status),
        ARRAY_COUNT.pack(len(entry.transactions)),
    ]
    for ref in entry.transactions:
        parts += [
            _string(ref.transactional_id, "transactional id"),
            TXN_REF_TAIL.pack(ref.producer_id, ref.producer_epoch),
        ]
    parts += [_nullable_string(entry.group_id, "group id"), ARRAY_COUNT.pack(len(entry.offsets))]
    for topic, partition, offset in entry.offsets:
        parts += [_string(topic, "topic"), OFFSET_TAIL.pack(partition, offset)]
    parts.append(BATCH_VALUE_TAIL.pack(entry.timestamp_ms))
    return b"".join(parts)


# --- decoding ------------------------------------------------------------------------------


class _Reader:
    """A cursor over one key or value; every short read names the record kind and field."""

    def __init__(self, data: bytes, kind: str) -> None:
        self._data = data
        self._kind = kind
        self._pos = 0

    def corrupt(self, problem: str) -> CorruptRecordError:
        return CorruptRecordError(
            f"{self._kind}: {problem} (at byte {self._pos} of {len(self._data)})"
        )

    def unpack(self, layout: struct.Struct, field: str) -> tuple[int, ...]:
        end = self._pos + layout.size
        if end > len(self._data):
            raise self.corrupt(
                f"truncated {field}: needs {layout.size} bytes, {len(self._data) - self._pos} left"
            )
        values = layout.unpack_from(self._data, self._pos)
        self._pos = end
        return tuple(values)

    def string(self, field: str, nullable: bool = False) -> str | None:
        (length,) = self.unpack(STRING_LENGTH, f"{field} length")
        if length < 0:
            if nullable and length == -1:
                return None
            raise self.corrupt(f"{field} has length {length}; it is not nullable")
        if self._pos + length > len(self._data):
            raise self.corrupt(
                f"truncated {field}: needs {length} bytes, {len(self._data) - self._pos} left"
            )
        raw = self._data[self._pos : self._pos + length]
        self._pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.corrupt(f"{field} is not UTF-8: {exc}") from exc

    def required_string(self, field: str) -> str:
        value = self.string(field)
        if value is None:  # unreachable: string() without nullable never returns None
            raise self.corrupt(f"{field} is null")
        return value

    def count(self, field: str, nullable: bool = False) -> int | None:
        (count,) = self.unpack(ARRAY_COUNT, f"{field} count")
        if count == -1 and nullable:
            return None
        if count < 0:
            raise self.corrupt(f"{field} has count {count}; it is not nullable")
        return int(count)

    def finish(self) -> None:
        if self._pos != len(self._data):
            raise self.corrupt(f"{len(self._data) - self._pos} trailing bytes")


def _state(reader: _Reader, status: int, allowed: frozenset[TransactionState]) -> TransactionState:
    for state in allowed:
        if state == status:
            return state
    raise reader.corrupt(
        f"unknown status {status}; expected one of {sorted(int(s) for s in allowed)}"
    )


def _version(reader: _Reader, expected: int, what: str) -> None:
    (version,) = reader.unpack(VERSION, f"{what} version")
    if version != expected:
        raise reader.corrupt(f"unknown {what} version {version}; this build reads {expected}")


def decode_record(key: bytes, value: bytes | None) -> StateLogEntry:
    """Parse one state-log record (either kind); ``CorruptRecordError`` says what is wrong."""
    reader = _Reader(key, "transaction log key")
    (version,) = reader.unpack(VERSION, "key version")
    if version == TXN_LOG_KEY_VERSION:
        transactional_id = reader.required_string("transactional_id")
        reader.finish()
        metadata = None if value is None else _decode_txn_value(transactional_id, value)
        return TransactionLogEntry(transactional_id, metadata)
    if version == BATCH_COMMIT_KEY_VERSION:
        sink_id = reader.required_string("sink_id")
        reader.finish()
        if value is None:
            raise CorruptRecordError(
                f"batch commit record of sink {sink_id!r} has a null "
                "value; batch commits are never tombstoned"
            )
        return _decode_batch_value(sink_id, value)
    raise reader.corrupt(
        f"unknown key version {version}; expected {TXN_LOG_KEY_VERSION} "
        f"(transaction) or {BATCH_COMMIT_KEY_VERSION} (batch commit)"
    )


def _decode_txn_value(transactional_id: str, value: bytes) -> TransactionMetadata:
    reader = _Reader(value, f"transaction log value of {transactional_id!r}")
    _version(reader, TXN_LOG_VALUE_VERSION, "value")
    producer_id, epoch, timeout_ms, status = reader.unpack(TXN_VALUE_HEAD, "value header")
    state = _state(reader, status, frozenset(TransactionState))
    partitions: set[TopicPartition] = set()
    topics = reader.count("transaction_partitions", nullable=True)
    for _ in range(topics or 0):
        topic = reader.required_string("topic")
        for _ in range(reader.count("partition_ids") or 0):
            partitions.add((topic, reader.unpack(PARTITION_ID, "partition id")[0]))
    if topics is None and state is not TransactionState.EMPTY:
        raise reader.corrupt(f"null transaction_partitions in state {state_name(state)}")
    last_update_ms, start_ms = reader.unpack(TXN_VALUE_TAIL, "value timestamps")
    reader.finish()
    if state is TransactionState.EMPTY:
        partitions.clear()  # Kafka ignores partitions of an Empty record on load
    try:
        return TransactionMetadata(
            transactional_id,
            producer_id,
            epoch,
            -1,
            timeout_ms,
            state,
            frozenset(partitions),
            start_ms,
            last_update_ms,
        )
    except ValueError as exc:
        raise reader.corrupt(str(exc)) from exc


def _decode_batch_value(sink_id: str, value: bytes) -> BatchCommitEntry:
    reader = _Reader(value, f"batch commit value of sink {sink_id!r}")
    _version(reader, BATCH_COMMIT_VALUE_VERSION, "value")
    batch_id, status = reader.unpack(BATCH_VALUE_HEAD, "value header")
    state = _state(reader, status, BATCH_STATUSES)
    refs = []
    for _ in range(reader.count("transactions") or 0):
        transactional_id = reader.required_string("transactional_id")
        producer_id, epoch = reader.unpack(TXN_REF_TAIL, "transaction producer id and epoch")
        refs.append((transactional_id, producer_id, epoch))
    group_id = reader.string("group_id", nullable=True)
    offsets = []
    for _ in range(reader.count("offsets") or 0):
        topic = reader.required_string("offset topic")
        partition, offset = reader.unpack(OFFSET_TAIL, "offset partition and offset")
        offsets.append((topic, partition, offset))
    (timestamp_ms,) = reader.unpack(BATCH_VALUE_TAIL, "timestamp_ms")
    reader.finish()
    try:
        return BatchCommitEntry(
            sink_id,
            batch_id,
            state,
            tuple(TxnRef(*r) for r in refs),
            group_id,
            tuple(offsets),
            timestamp_ms,
        )
    except ValueError as exc:
        raise reader.corrupt(str(exc)) from exc
