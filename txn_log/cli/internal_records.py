"""The records of the internal topics, decoded as their readers decode them: the
coordinator's for ``__transaction_state`` (``state_log_format``: Kafka's TransactionLogKey /
TransactionLogValue and txnlog's atomic commit record) and the group offset store's for
``__consumer_offsets`` (``group_offsets_format``: OffsetCommitKey / OffsetCommitValue).

``txnlog verify`` uses ``DECODERS`` to check that every record decodes (one that does not
breaks every process reading the topic); ``txnlog dump --transaction-log-decoder`` /
``--offsets-decoder`` (kafka-dump-log's decoders) print ``describe_record``'s fields. Pure.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from txn_log.coordinator import state_log_format
from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.transaction_state import state_name
from txn_log.errors import TxnLogError
from txn_log.group.group_offsets_format import decode_record as decode_offset_commit
from txn_log.record.codec import Record
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

DECODE_ERRORS = (TxnLogError, ValueError, struct.error)
"""What a decoder raises for a record its readers would fail on."""


def decode_state_record(record: Record) -> state_log_format.StateLogEntry:
    # exactly as the coordinator's catch-up decodes it (a null key reads as empty)
    return state_log_format.decode_record(record.key or b"", record.value)


def describe_state_record(record: Record) -> dict[str, Any]:
    entry = decode_state_record(record)
    if isinstance(entry, AtomicCommitEntry):
        return {
            "kind": "atomic_commit",
            "ledger_key": entry.ledger_key,
            "sequence": entry.sequence,
            "status": state_name(entry.status),
            "transactions": ",".join(t.transactional_id for t in entry.transactions),
            "group_id": entry.group_id,
            "offsets": ",".join(f"{t}-{p}:{o}" for t, p, o in entry.offsets),
            "timestamp_ms": entry.timestamp_ms,
        }
    metadata = entry.metadata
    described: dict[str, Any] = {
        "kind": "transaction_metadata",
        "transactional_id": entry.transactional_id,
    }
    if metadata is None:
        return {**described, "tombstone": True}
    return {
        **described,
        "producer_id": metadata.producer_id,
        "producer_epoch": metadata.producer_epoch,
        "state": state_name(metadata.state),
        "partitions": ",".join(f"{t}-{p}" for t, p in sorted(metadata.topic_partitions)),
        "timeout_ms": metadata.txn_timeout_ms,
        "start_time_ms": metadata.txn_start_timestamp_ms,
        "last_update_ms": metadata.txn_last_update_timestamp_ms,
    }


def describe_offset_commit(record: Record) -> dict[str, Any]:
    decoded = decode_offset_commit(record.key, record.value)
    if decoded is None:
        return {"kind": "group_metadata", "note": "Kafka's group metadata record, not read here"}
    group_id, tp, committed = decoded
    described: dict[str, Any] = {"kind": "offset_commit", "group": group_id, "partition": str(tp)}
    if committed is None:
        return {**described, "tombstone": True}
    return {
        **described,
        "committed_offset": committed.offset,
        "leader_epoch": committed.leader_epoch,
        "metadata": committed.metadata,
    }


DECODERS: dict[str, Callable[[Record], object]] = {
    TRANSACTION_STATE_TOPIC: decode_state_record,
    CONSUMER_OFFSETS_TOPIC: lambda record: decode_offset_commit(record.key, record.value),
}
"""internal topic → the decoder its readers use; raises ``DECODE_ERRORS``."""

DESCRIBERS: dict[str, Callable[[Record], dict[str, Any]]] = {
    TRANSACTION_STATE_TOPIC: describe_state_record,
    CONSUMER_OFFSETS_TOPIC: describe_offset_commit,
}


def describe_record(topic: str, record: Record) -> dict[str, Any]:
    """``record``'s fields as ``topic``'s reader decodes it; ``decode_error`` when it fails."""
    try:
        return DESCRIBERS[topic](record)
    except DECODE_ERRORS as error:
        return {"decode_error": str(error)}
