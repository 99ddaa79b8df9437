"""The coordinator's transaction state machine (C-07 [EXT], T1..T13), declared as data (STYLE 4).

Kafka's states, with the ids Kafka persists in the ``transaction_status`` int8 of a
``__transaction_state`` value (C-06); the seeds' names are in brackets:

    EMPTY              0   mapping exists, no transaction (after InitPid, T1/T2)
    ONGOING            1   [BEGIN] partitions were added, the timer runs (T3, T4)
    PREPARE_COMMIT     2   EndTxn(COMMIT) logged: the commit point (T5, C-08)
    PREPARE_ABORT      3   EndTxn(ABORT), a fenced InitPid or a timeout logged (T5, T8, T9)
    COMPLETE_COMMIT    4   every COMMIT marker written (T6)
    COMPLETE_ABORT     5   every ABORT marker written (T7)
    DEAD               6   the id expired; only ever in memory, persisted as a tombstone (T12)
    PREPARE_EPOCH_FENCE 7  the epoch was bumped to fence an ongoing producer; only in memory, the
                           record written is PREPARE_ABORT with the bumped epoch (T8, T9)

``VALID_PREVIOUS_STATES`` is the one table of allowed transitions, copied from Kafka's
``TransactionState.validPreviousStates`` (pre-KIP-890, "transactions v1"; KIP-890's extra
Empty/Complete* -> PrepareAbort edge is deliberately not taken). Every state change in the
package goes through ``check_transition``. ``END_TXN_OUTCOMES`` is the second table: what
EndTxn does for each (state, command) pair (C-18 step 3, T13), as Kafka's ``endTransaction``.
"""

from __future__ import annotations

from enum import Enum, IntEnum
from types import MappingProxyType

from txn_log.errors import InvalidTxnStateError


class TransactionState(IntEnum):
    """A transaction's state; the value is Kafka's persisted id (C-07 [EXT])."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


_S = TransactionState

VALID_PREVIOUS_STATES: MappingProxyType[TransactionState, frozenset[TransactionState]] = (
    MappingProxyType(
        {
            _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
            _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
            _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
            _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
            _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
            _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
            _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
            _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
        }
    )
)
"""target state -> the states it may be entered from (Kafka's ``validPreviousStates``)."""

_IN_PROGRESS = frozenset({_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT, _S.PREPARE_EPOCH_FENCE})
_PREPARED = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})
_COMPLETE = frozenset({_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
_EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
_NEVER_PERSISTED = frozenset({_S.DEAD, _S.PREPARE_EPOCH_FENCE})


def is_in_progress(state: TransactionState) -> bool:
    """A transaction is open or completing: it must be finished before a new one starts.

    Kafka's ``hasPendingTransaction`` plus PREPARE_EPOCH_FENCE (which is ONGOING with a bumped
    epoch on its way to PREPARE_ABORT).
    """
    return state in _IN_PROGRESS


def is_prepared(state: TransactionState) -> bool:
    """PREPARE_COMMIT or PREPARE_ABORT: the outcome is decided and must be rolled forward (C-08)."""
    return state in _PREPARED


def is_complete(state: TransactionState) -> bool:
    """COMPLETE_COMMIT or COMPLETE_ABORT: every marker is written, no transaction is open."""
    return state in _COMPLETE


def is_expiration_allowed(state: TransactionState) -> bool:
    """No transaction is open, so the id may expire (C-27; Kafka's ``isExpirationAllowed``)."""
    return state in _EXPIRATION_ALLOWED


def is_persistable(state: TransactionState) -> bool:
    """Whether a record in this state is ever written to the state log.

    DEAD is written as a tombstone and PREPARE_EPOCH_FENCE as PREPARE_ABORT (Kafka never
    completes a transition to either of them).
    """
    return state not in _NEVER_PERSISTED


def state_name(state: TransactionState) -> str:
    """Kafka's display name (``PrepareCommit``), as DescribeTransactions reports it."""
    return "".join(part.capitalize() for part in state.name.split("_"))


def check_transition(
    from_state: TransactionState, to_state: TransactionState, transactional_id: str
) -> None:
    """Raise ``InvalidTxnStateError`` unless ``to_state`` may follow ``from_state``.

    The message names the transactional id, both states and what ``to_state`` requires.
    """
    allowed = VALID_PREVIOUS_STATES[to_state]
    if from_state not in allowed:
        expected = ", ".join(state_name(s) for s in sorted(allowed))
        raise InvalidTxnStateError(
            f"transactional id {transactional_id!r}: cannot move from {state_name(from_state)} "
            f"to {state_name(to_state)}; {state_name(to_state)} may only follow {expected}"
        )


class EndTxnOutcome(Enum):
    """What EndTxn does in a state, for the requested command (C-18 step 3, T13)."""

    PREPARE = "prepare"
    ALREADY_COMPLETE = "already complete"
    CONCURRENT = "still completing"
    INVALID = "invalid"


END_TXN_OUTCOMES: MappingProxyType[tuple[TransactionState, bool], EndTxnOutcome] = MappingProxyType(
    {
        (_S.ONGOING, True): EndTxnOutcome.PREPARE,
        (_S.ONGOING, False): EndTxnOutcome.PREPARE,
        (_S.COMPLETE_COMMIT, True): EndTxnOutcome.ALREADY_COMPLETE,
        (_S.COMPLETE_ABORT, False): EndTxnOutcome.ALREADY_COMPLETE,
        (_S.PREPARE_COMMIT, True): EndTxnOutcome.CONCURRENT,
        (_S.PREPARE_ABORT, False): EndTxnOutcome.CONCURRENT,
    }
)
"""``(state, commit)`` -> outcome; every pair not listed is ``INVALID`` (Kafka's endTransaction)."""
