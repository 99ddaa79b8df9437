"""txnlog's atomic commit record in the state log (DESIGN §4 "Atomic commit").

One record kind Kafka does not have, beside Kafka's transaction records in
``__transaction_state`` (``state_log_format``). Its key version, 100, is one Kafka never uses,
so Kafka's tools treat the record as an unknown key type. Field types are Kafka's non-flexible
ones (``protocol_types``)::

    key    version                           int16  = 100
           ledger_key                        string  the caller's name for its ledger; opaque
    value  version                           int16  = 0
           sequence                          int64   only grows per ledger key
           status                            int8    2 = PREPARE_COMMIT, 4 = COMPLETE_COMMIT
           transactions                      array of
               transactional_id              string
               producer_id                   int64
               producer_epoch                int16
           group_id                          nullable string
           offsets                           array of
               topic                         string
               partition                     int32
               offset                        int64   next offset to consume (exclusive end)
           timestamp_ms                      int64

The PREPARE_COMMIT record is the commit point of every listed transaction and of the group
offsets; keyed by the ledger key, compaction keeps the newest record of each ledger, which is
all the ledger needs. These bytes are the ones logs written before this module existed carry
(then called the batch commit record): the layout has not changed. Pure functions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from txn_log.coordinator.protocol_types import (
    ARRAY_COUNT,
    VERSION,
    FieldReader,
    encode_nullable_string,
    encode_string,
)
from txn_log.coordinator.transaction_state import TransactionState, state_name
from txn_log.coordinator.txn_ref import TxnRef
from txn_log.errors import CorruptRecordError

ATOMIC_COMMIT_KEY_VERSION = 100
ATOMIC_COMMIT_VALUE_VERSION = 0

VALUE_HEAD = struct.Struct(
    ">"
    "q"  # sequence
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
VALUE_TAIL = struct.Struct(">q")  # timestamp_ms

STATUSES = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.COMPLETE_COMMIT})
_MAX_INT64 = (1 << 63) - 1
_MAX_INT32 = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class AtomicCommitEntry:
    """An atomic commit record (DESIGN §4): PREPARE_COMMIT is the commit point of ``sequence``.

    Invariants: ``ledger_key`` is not empty; ``sequence`` is in 0..2^63-1; ``status`` is
    PREPARE_COMMIT or COMPLETE_COMMIT; transactional ids are distinct; ``offsets`` are
    ``(topic, partition, next offset)`` to commit for ``group_id``.
    """

    ledger_key: str
    sequence: int
    status: TransactionState
    transactions: tuple[TxnRef, ...]
    group_id: str | None
    offsets: tuple[tuple[str, int, int], ...]
    timestamp_ms: int

    def __post_init__(self) -> None:
        ids = [t.transactional_id for t in self.transactions]
        problems = [
            "empty ledger key" if not self.ledger_key else "",
            f"sequence {self.sequence} outside 0..2^63-1"
            if not 0 <= self.sequence <= _MAX_INT64
            else "",
            f"status {state_name(self.status)} is not PrepareCommit or CompleteCommit"
            if self.status not in STATUSES
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
            raise ValueError(f"atomic commit of ledger {self.ledger_key!r}: {'; '.join(found)}")

    @property
    def is_prepared(self) -> bool:
        """Committed but not yet rolled forward: recovery must finish it (C-22, T11)."""
        return self.status is TransactionState.PREPARE_COMMIT


# --- encoding ------------------------------------------------------------------------------


def encode_key(entry: AtomicCommitEntry) -> bytes:
    """The record key: version 100 and the ledger key."""
    return VERSION.pack(ATOMIC_COMMIT_KEY_VERSION) + encode_string(entry.ledger_key, "ledger key")


def encode_value(entry: AtomicCommitEntry) -> bytes:
    """The record value (never null: atomic commit records are not tombstoned)."""
    parts = [
        VERSION.pack(ATOMIC_COMMIT_VALUE_VERSION),
        VALUE_HEAD.pack(entry.sequence, entry.status),
        ARRAY_COUNT.pack(len(entry.transactions)),
    ]
    for ref in entry.transactions:
        parts += [
            encode_string(ref.transactional_id, "transactional id"),
            TXN_REF_TAIL.pack(ref.producer_id, ref.producer_epoch),
        ]
    parts += [
        encode_nullable_string(entry.group_id, "group id"),
        ARRAY_COUNT.pack(len(entry.offsets)),
    ]
    for topic, partition, offset in entry.offsets:
        parts += [encode_string(topic, "topic"), OFFSET_TAIL.pack(partition, offset)]
    parts.append(VALUE_TAIL.pack(entry.timestamp_ms))
    return b"".join(parts)


# --- decoding ------------------------------------------------------------------------------


def decode(key: FieldReader, value: bytes | None) -> AtomicCommitEntry:
    """The record whose ``key`` reader stands just past the key version 100."""
    ledger_key = key.required_string("ledger_key")
    key.finish()
    if value is None:
        raise CorruptRecordError(
            f"atomic commit record of ledger {ledger_key!r} has a null value; atomic commit "
            "records are never tombstoned"
        )
    return _decode_value(ledger_key, value)


def _decode_value(ledger_key: str, value: bytes) -> AtomicCommitEntry:
    reader = FieldReader(value, f"atomic commit value of ledger {ledger_key!r}")
    reader.version(ATOMIC_COMMIT_VALUE_VERSION, "value")
    sequence, status = reader.unpack(VALUE_HEAD, "value header")
    state = reader.state(status, STATUSES)
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
    (timestamp_ms,) = reader.unpack(VALUE_TAIL, "timestamp_ms")
    reader.finish()
    try:
        return AtomicCommitEntry(
            ledger_key,
            sequence,
            state,
            tuple(TxnRef(*r) for r in refs),
            group_id,
            tuple(offsets),
            timestamp_ms,
        )
    except ValueError as exc:
        raise reader.corrupt(str(exc)) from exc
