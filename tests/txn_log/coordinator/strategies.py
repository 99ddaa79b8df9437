"""Hypothesis strategies and builders for the coordinator's values (shared by its test modules)."""

from __future__ import annotations

from hypothesis import strategies as st

from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.state_log_format import TransactionLogEntry
from txn_log.coordinator.transaction_metadata import TransactionMetadata
from txn_log.coordinator.transaction_state import TransactionState
from txn_log.coordinator.txn_ref import TxnRef

S = TransactionState
PERSISTED_STATES = [s for s in S if s not in (S.DEAD, S.PREPARE_EPOCH_FENCE)]
NO_PARTITION_STATES = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.DEAD}

INT64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
topics = st.text("abcxyz._-", min_size=1, max_size=8)
topic_partitions = st.frozensets(st.tuples(topics, st.integers(0, 2**31 - 1)), max_size=6)


def metadata(
    transactional_id: str = "tx",
    producer_id: int = 1000,
    producer_epoch: int = 3,
    state: TransactionState = S.EMPTY,
    topic_partitions: frozenset[tuple[str, int]] = frozenset(),
    txn_timeout_ms: int = 60_000,
    start_ms: int = -1,
    last_update_ms: int = 0,
) -> TransactionMetadata:
    """A metadata value with readable defaults."""
    return TransactionMetadata(
        transactional_id,
        producer_id,
        producer_epoch,
        -1,
        txn_timeout_ms,
        state,
        topic_partitions,
        start_ms,
        last_update_ms,
    )


def ongoing(
    state: TransactionState = S.ONGOING,
    partitions: frozenset[tuple[str, int]] = frozenset({("orders", 0)}),
    producer_epoch: int = 3,
    start_ms: int = 1_000,
    last_update_ms: int = 1_000,
    txn_timeout_ms: int = 60_000,
) -> TransactionMetadata:
    """A transaction with partitions (ONGOING unless told), started at t=1000, 60 s timeout."""
    return metadata(
        state=state,
        topic_partitions=partitions,
        producer_epoch=producer_epoch,
        start_ms=start_ms,
        last_update_ms=last_update_ms,
        txn_timeout_ms=txn_timeout_ms,
    )


@st.composite
def persisted_metadata(draw: st.DrawFn, transactional_id: str | None = None) -> TransactionMetadata:
    """Any metadata the state log may hold (decodes with ``last_producer_epoch = -1``)."""
    state = draw(st.sampled_from(PERSISTED_STATES))
    partitions = frozenset() if state in NO_PARTITION_STATES else draw(topic_partitions)
    return TransactionMetadata(
        transactional_id if transactional_id is not None else draw(names),
        draw(st.integers(0, 2**63 - 1)),
        draw(st.integers(-1, 2**15 - 1)),
        -1,
        draw(st.integers(1, 2**31 - 1)),
        state,
        partitions,
        draw(INT64),
        draw(INT64),
    )


@st.composite
def txn_entries(draw: st.DrawFn) -> TransactionLogEntry:
    """A transaction log record: metadata or a tombstone."""
    transactional_id = draw(names)
    md = draw(st.none() | persisted_metadata(transactional_id))
    return TransactionLogEntry(transactional_id, md)


@st.composite
def atomic_commit_entries(
    draw: st.DrawFn, ledger_keys: st.SearchStrategy[str] = names
) -> AtomicCommitEntry:
    """An atomic commit record with unique transactional ids."""
    ids = draw(st.lists(names, unique=True, max_size=5))
    refs = tuple(
        TxnRef(i, draw(st.integers(0, 2**63 - 1)), draw(st.integers(0, 2**15 - 1))) for i in ids
    )
    offsets = draw(st.lists(st.tuples(topics, st.integers(0, 2**31 - 1), INT64), max_size=5))
    return AtomicCommitEntry(
        draw(ledger_keys),
        draw(st.integers(0, 2**63 - 1)),
        draw(st.sampled_from([S.PREPARE_COMMIT, S.COMPLETE_COMMIT])),
        refs,
        draw(st.none() | names),
        tuple(offsets),
        draw(INT64),
    )
