"""Records of the coordinator's state log, ``__transaction_state`` (C-05, C-06, C-11, DESIGN §4).

Two record kinds share the log, told apart by the key's leading int16 version. Field types are
Kafka's non-flexible ones (``kafka_types``: big-endian integers, int16-length strings, int32-count
arrays, -1 for null only where nullable).

1. Kafka's ``TransactionLogKey`` v0 / ``TransactionLogValue`` v0, byte for byte (C-05, C-06
   [EXT]; Kafka's ``TransactionLog.keyToBytes`` / ``valueToBytes`` with the version prefix of
   ``MessageUtil.toVersionPrefixedBytes``), defined here::

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

2. txnlog's atomic commit record (key version 100), defined in ``atomic_commit_format``
   (DESIGN §4 "Atomic commit").

``encode_key``, ``encode_value`` and ``decode_record`` take and give either kind. Decoding is
strict: a truncated field, trailing bytes, an unknown version, status or a negative length where
null is not allowed raise ``CorruptRecordError`` naming the record kind, the field and the byte
position.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from txn_log.coordinator import atomic_commit_format
from txn_log.coordinator.atomic_commit_format import ATOMIC_COMMIT_KEY_VERSION, AtomicCommitEntry
from txn_log.coordinator.protocol_types import ARRAY_COUNT, VERSION, FieldReader, encode_string
from txn_log.coordinator.transaction_metadata import TopicPartition, TransactionMetadata
from txn_log.coordinator.transaction_state import TransactionState, is_persistable, state_name

TXN_LOG_KEY_VERSION = 0
TXN_LOG_VALUE_VERSION = 0

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


StateLogEntry = TransactionLogEntry | AtomicCommitEntry


# --- encoding ------------------------------------------------------------------------------


def _partitions(partitions: frozenset[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    parts = [ARRAY_COUNT.pack(len(by_topic))]
    for topic in sorted(by_topic):
        ids = sorted(by_topic[topic])
        parts += [encode_string(topic, "topic"), ARRAY_COUNT.pack(len(ids))]
        parts += [PARTITION_ID.pack(i) for i in ids]
    return b"".join(parts)


def encode_key(entry: StateLogEntry) -> bytes:
    """The record key: ``TransactionLogKey`` v0, or the atomic commit key (version 100)."""
    if isinstance(entry, TransactionLogEntry):
        return VERSION.pack(TXN_LOG_KEY_VERSION) + encode_string(
            entry.transactional_id, "transactional id"
        )
    return atomic_commit_format.encode_key(entry)


def encode_value(entry: StateLogEntry) -> bytes | None:
    """The record value; ``None`` (a tombstone) for a transactional id without metadata."""
    if isinstance(entry, AtomicCommitEntry):
        return atomic_commit_format.encode_value(entry)
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


# --- decoding ------------------------------------------------------------------------------


def decode_record(key: bytes, value: bytes | None) -> StateLogEntry:
    """Parse one state-log record (either kind); ``CorruptRecordError`` says what is wrong."""
    reader = FieldReader(key, "transaction log key")
    (version,) = reader.unpack(VERSION, "key version")
    if version == TXN_LOG_KEY_VERSION:
        transactional_id = reader.required_string("transactional_id")
        reader.finish()
        metadata = None if value is None else _decode_txn_value(transactional_id, value)
        return TransactionLogEntry(transactional_id, metadata)
    if version == ATOMIC_COMMIT_KEY_VERSION:
        return atomic_commit_format.decode(reader, value)
    raise reader.corrupt(
        f"unknown key version {version}; expected {TXN_LOG_KEY_VERSION} "
        f"(transaction) or {ATOMIC_COMMIT_KEY_VERSION} (atomic commit)"
    )


def _decode_txn_value(transactional_id: str, value: bytes) -> TransactionMetadata:
    reader = FieldReader(value, f"transaction log value of {transactional_id!r}")
    reader.version(TXN_LOG_VALUE_VERSION, "value")
    producer_id, epoch, timeout_ms, status = reader.unpack(TXN_VALUE_HEAD, "value header")
    state = reader.state(status, frozenset(TransactionState))
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
