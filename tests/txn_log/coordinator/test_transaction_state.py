"""The coordinator state machine: Kafka ids and the full transition cross product (C-07)."""

from __future__ import annotations

import itertools

import pytest

from txn_log.coordinator.transaction_state import (
    END_TXN_OUTCOMES,
    VALID_PREVIOUS_STATES,
    EndTxnOutcome,
    TransactionState,
    check_transition,
    is_complete,
    is_expiration_allowed,
    is_in_progress,
    is_persistable,
    is_prepared,
    state_name,
)
from txn_log.errors import InvalidTxnStateError

S = TransactionState

# Kafka's TransactionState.validPreviousStates, written out independently (C-07 [EXT]):
# (from, to) pairs that are allowed. Everything else must raise.
KAFKA_EDGES = {
    ("Empty", "Empty"),
    ("CompleteCommit", "Empty"),
    ("CompleteAbort", "Empty"),
    ("Ongoing", "Ongoing"),
    ("Empty", "Ongoing"),
    ("CompleteCommit", "Ongoing"),
    ("CompleteAbort", "Ongoing"),
    ("Ongoing", "PrepareCommit"),
    ("Ongoing", "PrepareAbort"),
    ("PrepareEpochFence", "PrepareAbort"),
    ("PrepareCommit", "CompleteCommit"),
    ("PrepareAbort", "CompleteAbort"),
    ("Empty", "Dead"),
    ("CompleteCommit", "Dead"),
    ("CompleteAbort", "Dead"),
    ("Ongoing", "PrepareEpochFence"),
}


def test_persisted_ids_are_kafkas() -> None:
    """C-07 [EXT]: the int8 written as transaction_status."""
    assert {s.name: s.value for s in S} == {
        "EMPTY": 0,
        "ONGOING": 1,
        "PREPARE_COMMIT": 2,
        "PREPARE_ABORT": 3,
        "COMPLETE_COMMIT": 4,
        "COMPLETE_ABORT": 5,
        "DEAD": 6,
        "PREPARE_EPOCH_FENCE": 7,
    }


def test_table_has_a_row_for_every_state() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(S)


@pytest.mark.parametrize(
    ("from_state", "to_state"), list(itertools.product(S, S)), ids=lambda s: state_name(s)
)
def test_transition_cross_product(from_state: S, to_state: S) -> None:
    """Every one of the 64 (from, to) pairs: allowed exactly when Kafka allows it."""
    allowed = (state_name(from_state), state_name(to_state)) in KAFKA_EDGES
    if allowed:
        check_transition(from_state, to_state, "tx-1")
    else:
        with pytest.raises(InvalidTxnStateError) as raised:
            check_transition(from_state, to_state, "tx-1")
        message = str(raised.value)
        assert "'tx-1'" in message
        assert state_name(from_state) in message and state_name(to_state) in message
        assert raised.value.code == 48


def test_display_names_are_kafkas() -> None:
    assert [state_name(s) for s in S] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]


@pytest.mark.parametrize("state", list(S), ids=lambda s: state_name(s))
def test_state_predicates(state: S) -> None:
    assert is_in_progress(state) == (
        state in {S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE}
    )
    assert is_prepared(state) == (state in {S.PREPARE_COMMIT, S.PREPARE_ABORT})
    assert is_complete(state) == (state in {S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
    assert is_expiration_allowed(state) == (state in {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
    assert is_persistable(state) == (state not in {S.DEAD, S.PREPARE_EPOCH_FENCE})


@pytest.mark.parametrize(
    ("state", "commit"),
    list(itertools.product(S, [True, False])),
    ids=lambda v: state_name(v) if isinstance(v, S) else str(v),
)
def test_end_txn_outcome_cross_product(state: S, commit: bool) -> None:
    """C-18 step 3 / T13 with Kafka's answers for a retry while PREPARE_* (E-10)."""
    expected = {
        (S.ONGOING, True): EndTxnOutcome.PREPARE,
        (S.ONGOING, False): EndTxnOutcome.PREPARE,
        (S.COMPLETE_COMMIT, True): EndTxnOutcome.ALREADY_COMPLETE,
        (S.COMPLETE_ABORT, False): EndTxnOutcome.ALREADY_COMPLETE,
        (S.PREPARE_COMMIT, True): EndTxnOutcome.CONCURRENT,
        (S.PREPARE_ABORT, False): EndTxnOutcome.CONCURRENT,
    }.get((state, commit), EndTxnOutcome.INVALID)
    assert END_TXN_OUTCOMES.get((state, commit), EndTxnOutcome.INVALID) is expected
