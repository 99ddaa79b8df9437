"""State-log records: Kafka's TransactionLogKey/Value v0 byte for byte (C-05, C-06, C-11) and
txnlog's atomic commit record (DESIGN §4), whose bytes are those logs written before it was
generalised from the Spark sink's batch commit carry."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.txn_log.coordinator.strategies import (
    S,
    atomic_commit_entries,
    metadata,
    ongoing,
    persisted_metadata,
    txn_entries,
)
from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.state_log_format import (
    StateLogEntry,
    TransactionLogEntry,
    decode_record,
    encode_key,
    encode_value,
)
from txn_log.coordinator.transaction_metadata import TransactionMetadata
from txn_log.coordinator.txn_ref import TxnRef
from txn_log.errors import CorruptRecordError


def h(text: str) -> bytes:
    """Bytes from hex written with spaces and ``|`` separators for readability."""
    return bytes.fromhex(text.replace("|", " "))


# --- fixed vectors, derived by hand from TransactionLogKey.json / TransactionLogValue.json ------

KEY_TX1 = h("00 00 | 00 05 | 74 78 6e 2d 31")  # version 0 | length 5 | "txn-1"

ONGOING_MD = TransactionMetadata(
    "txn-1",
    1000,
    3,
    -1,
    60_000,
    S.ONGOING,
    frozenset({("orders", 0), ("orders", 2), ("b", 1)}),
    1_700_000_000_000,
    1_700_000_000_123,
)
ONGOING_VALUE = h(
    "00 00"  # version 0
    "| 00 00 00 00 00 00 03 e8"  # producer_id 1000
    "| 00 03"  # producer_epoch 3
    "| 00 00 ea 60"  # transaction_timeout_ms 60000
    "| 01"  # transaction_status Ongoing
    "| 00 00 00 02"  # transaction_partitions: 2 topics (sorted)
    "| 00 01 62"  #   topic "b"
    "| 00 00 00 01 | 00 00 00 01"  # partition_ids [1]
    "| 00 06 6f 72 64 65 72 73"  #   topic "orders"
    "| 00 00 00 02 | 00 00 00 00 | 00 00 00 02"  # partition_ids [0, 2]
    "| 00 00 01 8b cf e5 68 7b"  # transaction_last_update_timestamp_ms 1700000000123
    "| 00 00 01 8b cf e5 68 00"  # transaction_start_timestamp_ms 1700000000000
)

EMPTY_MD = TransactionMetadata(
    "txn-1", 1000, 0, -1, 60_000, S.EMPTY, frozenset(), -1, 1_700_000_000_123
)
EMPTY_VALUE = h(
    "00 00 | 00 00 00 00 00 00 03 e8 | 00 00 | 00 00 ea 60 | 00"
    "| ff ff ff ff"  # transaction_partitions: null for Empty (Kafka's valueToBytes)
    "| 00 00 01 8b cf e5 68 7b"
    "| ff ff ff ff ff ff ff ff"  # no transaction started: -1
)

BATCH = AtomicCommitEntry(
    "sink-a", 7, S.PREPARE_COMMIT, (TxnRef("sink-a-0", 1000, 2),), "grp", (("in", 3, 42),), 99
)
BATCH_KEY = h("00 64 | 00 06 73 69 6e 6b 2d 61")  # version 100 | "sink-a"
BATCH_VALUE = h(
    "00 00"  # version 0
    "| 00 00 00 00 00 00 00 07"  # sequence 7 (a Spark sink's batch id)
    "| 02"  # status PREPARE_COMMIT
    "| 00 00 00 01"  # 1 transaction
    "| 00 08 73 69 6e 6b 2d 61 2d 30"  # "sink-a-0"
    "| 00 00 00 00 00 00 03 e8 | 00 02"  # producer_id 1000, epoch 2
    "| 00 03 67 72 70"  # group_id "grp"
    "| 00 00 00 01"  # 1 offset
    "| 00 02 69 6e | 00 00 00 03 | 00 00 00 00 00 00 00 2a"  # "in", partition 3, offset 42
    "| 00 00 00 00 00 00 00 63"  # timestamp_ms 99
)


@pytest.mark.parametrize(
    ("md", "value"),
    [(ONGOING_MD, ONGOING_VALUE), (EMPTY_MD, EMPTY_VALUE)],
    ids=["ongoing", "empty"],
)
def test_kafka_v0_vectors(md: TransactionMetadata, value: bytes) -> None:
    """C-05, C-06: exact bytes both ways."""
    entry = TransactionLogEntry("txn-1", md)
    assert encode_key(entry) == KEY_TX1
    assert encode_value(entry) == value
    assert decode_record(KEY_TX1, value) == entry


def test_complete_record_has_an_empty_not_a_null_partition_array() -> None:
    value = encode_value(TransactionLogEntry("tx", metadata(state=S.COMPLETE_COMMIT)))
    assert value is not None
    assert value[17:21] == h("00 00 00 00")


def test_tombstone_is_a_null_value() -> None:
    """C-11: id expiration writes a null value."""
    entry = TransactionLogEntry("txn-1", None)
    assert encode_value(entry) is None
    assert decode_record(KEY_TX1, None) == entry


def test_atomic_commit_vector() -> None:
    assert encode_key(BATCH) == BATCH_KEY
    assert encode_value(BATCH) == BATCH_VALUE
    assert decode_record(BATCH_KEY, BATCH_VALUE) == BATCH


def test_atomic_commit_null_group() -> None:
    entry = AtomicCommitEntry("s", 0, S.COMPLETE_COMMIT, (), None, (), 0)
    value = encode_value(entry)
    assert value == h(
        "00 00 | 00 00 00 00 00 00 00 00 | 04 | 00 00 00 00 | ff ff | 00 00 00 00"
        "| 00 00 00 00 00 00 00 00"
    )
    assert decode_record(encode_key(entry), value) == entry


# --- round trips -------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.one_of(txn_entries(), atomic_commit_entries()))
def test_every_record_round_trips(entry: StateLogEntry) -> None:
    assert decode_record(encode_key(entry), encode_value(entry)) == entry


def kafka_python_schemas() -> tuple[Any, Any]:
    """TransactionLogKey v0 and TransactionLogValue v0 in kafka-python's protocol types."""
    types = pytest.importorskip("kafka.protocol.old.types")
    string = types.String("utf-8")
    key = types.Schema(("version", types.Int16), ("transactional_id", string))
    value = types.Schema(
        ("version", types.Int16),
        ("producer_id", types.Int64),
        ("producer_epoch", types.Int16),
        ("transaction_timeout_ms", types.Int32),
        ("transaction_status", types.Int8),
        (
            "transaction_partitions",
            types.Array(("topic", string), ("partition_ids", types.Array(types.Int32))),
        ),
        ("transaction_last_update_timestamp_ms", types.Int64),
        ("transaction_start_timestamp_ms", types.Int64),
    )
    return key, value


@settings(max_examples=100, deadline=None)
@given(persisted_metadata())
def test_matches_an_independent_kafka_protocol_codec(md: TransactionMetadata) -> None:
    """kafka-python's non-flexible types encode the v0 schema to the same bytes."""
    kafka_key, kafka_value = kafka_python_schemas()
    topics: dict[str, list[int]] = {}
    for topic, partition in md.topic_partitions:
        topics.setdefault(topic, []).append(partition)
    partitions = (
        None if md.state is S.EMPTY else [(t, sorted(p)) for t, p in sorted(topics.items())]
    )
    entry = TransactionLogEntry(md.transactional_id, md)
    assert encode_key(entry) == kafka_key.encode((0, md.transactional_id))
    value = encode_value(entry)
    assert value is not None
    assert value == kafka_value.encode(
        (
            0,
            md.producer_id,
            md.producer_epoch,
            md.txn_timeout_ms,
            int(md.state),
            partitions,
            md.txn_last_update_timestamp_ms,
            md.txn_start_timestamp_ms,
        )
    )
    assert kafka_value.decode(io.BytesIO(value))[1] == md.producer_id


# --- corrupt input -----------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value"), [(KEY_TX1, ONGOING_VALUE), (BATCH_KEY, BATCH_VALUE)])
def test_every_truncation_is_corrupt(key: bytes, value: bytes) -> None:
    for cut in range(len(key)):
        with pytest.raises(CorruptRecordError, match="key"):
            decode_record(key[:cut], value)
    for cut in range(len(value)):
        with pytest.raises(CorruptRecordError, match="truncated"):
            decode_record(key, value[:cut])


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        (KEY_TX1, ONGOING_VALUE + b"\x00", "1 trailing bytes"),
        (KEY_TX1 + b"\x00", ONGOING_VALUE, "1 trailing bytes"),
        (h("00 01 | 00 01 61"), ONGOING_VALUE, "unknown key version 1"),
        (h("ff ff | 00 01 61"), ONGOING_VALUE, "unknown key version -1"),
        (KEY_TX1, h("00 01") + ONGOING_VALUE[2:], "unknown value version 1"),
        (KEY_TX1, ONGOING_VALUE[:16] + b"\x08" + ONGOING_VALUE[17:], "unknown status 8"),
        (
            KEY_TX1,
            ONGOING_VALUE[:17] + h("ff ff ff ff") + ONGOING_VALUE[-16:],
            "null transaction_partitions in state Ongoing",
        ),
        (KEY_TX1, ONGOING_VALUE[:17] + h("ff ff ff fe") + ONGOING_VALUE[21:], "count -2"),
        (h("00 00 | ff ff"), ONGOING_VALUE, "transactional_id has length -1"),
        (h("00 00 | 00 01 ff"), ONGOING_VALUE, "not UTF-8"),
        (h("00 00 | 00 00"), ONGOING_VALUE, "empty transactional id"),
        (
            KEY_TX1,
            ONGOING_VALUE[:2] + h("ff ff ff ff ff ff ff ff") + ONGOING_VALUE[10:],
            "producer id -1",
        ),
        (BATCH_KEY, BATCH_VALUE[:10] + b"\x03" + BATCH_VALUE[11:], "unknown status 3"),
        (BATCH_KEY, None, "never tombstoned"),
    ],
)
def test_corrupt_records_name_the_problem(key: bytes, value: bytes | None, problem: str) -> None:
    with pytest.raises(CorruptRecordError) as raised:
        decode_record(key, value)
    assert problem in str(raised.value)
    assert raised.value.code == 2


def test_partitions_of_an_empty_record_are_ignored_like_kafka() -> None:
    value = (
        EMPTY_VALUE[:17]
        + h("00 00 00 01 | 00 01 61 | 00 00 00 01 | 00 00 00 05")
        + (EMPTY_VALUE[21:])
    )
    entry = decode_record(KEY_TX1, value)
    assert isinstance(entry, TransactionLogEntry)
    assert entry.metadata == EMPTY_MD


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_states_kafka_never_persists_are_refused(state: S) -> None:
    md = metadata(state=state) if state is S.DEAD else ongoing(state=state)
    with pytest.raises(ValueError, match="never written"):
        encode_value(TransactionLogEntry("tx", md))


def test_a_string_longer_than_int16_is_refused() -> None:
    with pytest.raises(ValueError, match="32767"):
        encode_key(TransactionLogEntry("x" * 32_768, None))


@pytest.mark.parametrize(
    "build",
    [
        lambda: AtomicCommitEntry("s", 1, S.ONGOING, (), None, (), 0),
        lambda: AtomicCommitEntry("s", -1, S.PREPARE_COMMIT, (), None, (), 0),
        lambda: AtomicCommitEntry("", 1, S.PREPARE_COMMIT, (), None, (), 0),
        lambda: AtomicCommitEntry(
            "s", 1, S.PREPARE_COMMIT, (TxnRef("a", 1, 0), TxnRef("a", 2, 0)), None, (), 0
        ),
        lambda: TxnRef("a", 1, -1),
        lambda: TransactionLogEntry("a", metadata(transactional_id="b")),
    ],
)
def test_entry_invariants(build: object) -> None:
    with pytest.raises(ValueError):
        build()  # type: ignore[operator]
