"""Replaying the state log: last entry wins, corruption disables, recovery work, the ledgers of
atomic commits, expiration scans and compaction snapshots (C-11, C-22, C-25, C-27, T11,
DESIGN §4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.txn_log.coordinator.strategies import (
    S,
    atomic_commit_entries,
    metadata,
    ongoing,
    persisted_metadata,
)
from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.coordinator_state import CoordinatorState
from txn_log.coordinator.state_log_format import (
    StateLogEntry,
    TransactionLogEntry,
    decode_record,
    encode_key,
    encode_value,
)
from txn_log.coordinator.transaction_metadata import TransactionMetadata
from txn_log.coordinator.txn_ref import TxnRef
from txn_log.errors import CorruptRecordError, InvalidConfigError


def entry(md: TransactionMetadata) -> TransactionLogEntry:
    return TransactionLogEntry(md.transactional_id, md)


def batch(
    ledger: str, sequence: int, status: S = S.PREPARE_COMMIT, refs: tuple[TxnRef, ...] = ()
) -> AtomicCommitEntry:
    return AtomicCommitEntry(
        ledger, sequence, status, refs, f"{ledger}-group", (("in", 0, 10 * sequence),), 1_000
    )


def test_last_entry_per_id_wins() -> None:
    """C-22: status, partitions and timestamps come from the newest entry."""
    first = metadata(transactional_id="a", producer_epoch=0)
    latest = TransactionMetadata("a", 1000, 1, -1, 60_000, S.ONGOING, frozenset({("t", 0)}), 5, 5)
    state = CoordinatorState.replay(
        [entry(first), entry(metadata(transactional_id="b")), entry(latest)]
    )
    assert state.metadata("a") == latest
    assert state.transactional_ids() == ("a", "b")
    assert state.metadata("missing") is None


def test_tombstone_removes_the_id() -> None:
    """C-11, T12: a null value deletes the mapping; the id may come back later."""
    state = CoordinatorState.replay([entry(metadata()), TransactionLogEntry("tx", None)])
    assert state.metadata("tx") is None and state.transactional_ids() == ()
    state.apply(entry(metadata(producer_id=5, producer_epoch=0)))
    assert state.metadata("tx") == metadata(producer_id=5, producer_epoch=0)


def test_a_lower_epoch_for_the_same_producer_id_is_corrupt_and_disables() -> None:
    """C-22: an earlier entry with a higher epoch -> the log is corrupt, the partition disabled."""
    state = CoordinatorState.replay([entry(metadata(producer_epoch=5))])
    with pytest.raises(CorruptRecordError) as raised:
        state.apply(entry(ongoing(producer_epoch=4)))
    message = str(raised.value)
    assert "state log corrupt" in message and "'tx'" in message
    assert "epoch 4" in message and "epoch 5" in message and "producer id 1000" in message
    assert state.corruption is not None
    for call in (
        lambda: state.metadata("tx"),
        state.transactional_ids,
        state.pending_completions,
        lambda: state.apply(entry(metadata())),
        lambda: state.ledger_last_sequence("s"),
        state.snapshot_entries,
    ):
        with pytest.raises(CorruptRecordError, match="disabled"):
            call()


def test_a_new_producer_id_restarts_the_epoch() -> None:
    """C-30: after a producer id rotation, epoch 0 follows epoch 32766 legitimately."""
    state = CoordinatorState.replay(
        [entry(metadata(producer_epoch=32766)), entry(metadata(producer_id=2000, producer_epoch=0))]
    )
    assert state.metadata("tx") == metadata(producer_id=2000, producer_epoch=0)


def test_equal_epochs_replay_fine() -> None:
    state = CoordinatorState.replay(
        [entry(metadata()), entry(ongoing()), entry(ongoing(state=S.PREPARE_COMMIT))]
    )
    assert state.metadata("tx") == ongoing(state=S.PREPARE_COMMIT)


def test_in_memory_states_in_the_log() -> None:
    """DEAD counts as removal; PREPARE_EPOCH_FENCE is never persisted, so it is corrupt."""
    state = CoordinatorState.replay([entry(metadata()), entry(metadata(state=S.DEAD))])
    assert state.metadata("tx") is None
    with pytest.raises(CorruptRecordError, match="PrepareEpochFence"):
        state.apply(entry(ongoing(state=S.PREPARE_EPOCH_FENCE)))


def test_pending_completions_are_what_recovery_rolls_forward() -> None:
    """C-22 / T11: PREPARE_* transactions and atomic commits without their COMPLETE record."""
    commit = TransactionMetadata(
        "c", 1, 0, -1, 60_000, S.PREPARE_COMMIT, frozenset({("t", 0)}), 1, 1
    )
    abort = TransactionMetadata("b", 2, 0, -1, 60_000, S.PREPARE_ABORT, frozenset({("t", 1)}), 1, 1)
    state = CoordinatorState.replay(
        [
            entry(commit),
            entry(abort),
            entry(metadata(transactional_id="a")),
            entry(
                TransactionMetadata("d", 3, 0, -1, 60_000, S.ONGOING, frozenset({("t", 2)}), 1, 1)
            ),
            batch("s1", 4),
            batch("s2", 1),
            batch("s2", 1, S.COMPLETE_COMMIT),
        ]
    )
    pending = state.pending_completions()
    assert pending.transactions == (abort, commit)
    assert pending.atomic_commits == (batch("s1", 4),)
    assert pending
    state.apply(entry(commit.prepare_complete(2)))
    state.apply(entry(abort.prepare_complete(2)))
    state.apply(batch("s1", 4, S.COMPLETE_COMMIT))
    assert not state.pending_completions()


def test_atomic_commit_ledger() -> None:
    """DESIGN §4: PREPARE_COMMIT is the commit point; sequences of one ledger only grow."""
    state = CoordinatorState()
    assert state.ledger_last_sequence("s") is None
    assert not state.ledger_has("s", 0)
    state.apply(batch("s", 3))
    assert state.ledger_last_sequence("s") == 3
    assert state.ledger_has("s", 3) and state.ledger_has("s", 2)
    assert not state.ledger_has("s", 4)
    assert not state.ledger_has("other", 3)
    state.apply(batch("s", 3, S.COMPLETE_COMMIT))
    state.apply(batch("s", 4))
    assert state.ledger_entry("s") == batch("s", 4)
    assert state.ledger_has("s", 4)


@pytest.mark.parametrize(
    "bad",
    [batch("s", 2), batch("s", 3, S.PREPARE_COMMIT)],
    ids=["lower-sequence", "complete-then-prepare"],
)
def test_ledger_going_backwards_is_corrupt(bad: AtomicCommitEntry) -> None:
    state = CoordinatorState.replay([batch("s", 3), batch("s", 3, S.COMPLETE_COMMIT)])
    with pytest.raises(CorruptRecordError, match="ledger 's'"):
        state.apply(bad)
    assert state.corruption is not None


def test_expired_lists_timed_out_transactions_and_idle_ids() -> None:
    """C-25 / C-27: scans at ``now``; both lists sorted by transactional id."""
    late = TransactionMetadata("late", 1, 0, -1, 1_000, S.ONGOING, frozenset({("t", 0)}), 0, 0)
    fresh = TransactionMetadata(
        "fresh", 2, 0, -1, 5_000, S.ONGOING, frozenset({("t", 0)}), 18_000, 18_000
    )
    idle = TransactionMetadata("idle", 3, 0, -1, 1_000, S.COMPLETE_ABORT, frozenset(), 0, 0)
    state = CoordinatorState.replay([entry(late), entry(fresh), entry(idle)])
    expired = state.expired(now_ms=20_000, expiration_ms=10_000)
    assert expired.timed_out == (late,)
    assert expired.expirable_ids == ("idle",)
    assert state.expired(now_ms=1_000, expiration_ms=10_000).timed_out == ()


def test_transactions_of_a_prepared_atomic_commit_never_time_out() -> None:
    """The atomic commit's PREPARE is their commit point: aborting them would break it."""
    task = TransactionMetadata("s-0", 7, 2, -1, 1_000, S.ONGOING, frozenset({("t", 0)}), 0, 0)
    state = CoordinatorState.replay([entry(task), batch("s", 1, refs=(TxnRef("s-0", 7, 2),))])
    assert state.pending_commit_for("s-0") == batch("s", 1, refs=(TxnRef("s-0", 7, 2),))
    assert state.expired(now_ms=10**9, expiration_ms=10_000).timed_out == ()
    state.apply(batch("s", 1, S.COMPLETE_COMMIT, refs=(TxnRef("s-0", 7, 2),)))
    assert state.pending_commit_for("s-0") is None
    assert state.expired(now_ms=10**9, expiration_ms=10_000).timed_out == (task,)


def test_an_atomic_commit_naming_an_older_epoch_does_not_protect_the_transaction() -> None:
    task = TransactionMetadata("s-0", 7, 3, -1, 1_000, S.ONGOING, frozenset({("t", 0)}), 0, 0)
    state = CoordinatorState.replay([entry(task), batch("s", 1, refs=(TxnRef("s-0", 7, 2),))])
    assert state.pending_commit_for("s-0") is None
    assert state.expired(now_ms=10**9, expiration_ms=10_000).timed_out == (task,)


def test_expired_checks_the_expiration_against_timeouts() -> None:
    """C-28."""
    state = CoordinatorState.replay([entry(metadata(txn_timeout_ms=60_000))])
    with pytest.raises(InvalidConfigError):
        state.expired(now_ms=0, expiration_ms=60_000)


def test_open_transactions_under_a_prefix() -> None:
    """DESIGN §5: the sink's commit aborts lingering zombies under ``<prefix>-``."""

    def md(tid: str, state: S) -> TransactionLogEntry:
        parts = frozenset() if state in (S.EMPTY, S.COMPLETE_COMMIT) else frozenset({("t", 0)})
        return entry(TransactionMetadata(tid, 1, 0, -1, 1_000, state, parts, 0, 0))

    state = CoordinatorState.replay(
        [
            md("s1-0", S.ONGOING),
            md("s1-1", S.PREPARE_COMMIT),
            md("s1-2", S.COMPLETE_COMMIT),
            md("s1-3", S.EMPTY),
            md("s1-4", S.PREPARE_ABORT),
            md("s10-0", S.ONGOING),
            md("other", S.ONGOING),
        ]
    )
    assert state.open_transactions("s1-") == ("s1-0", "s1-1", "s1-4")
    assert state.open_transactions("") == ("other", "s1-0", "s1-1", "s1-4", "s10-0")


# --- snapshots and replay through the codec --------------------------------------------------

FEW_IDS = st.sampled_from(["a", "b", "c"])
LOG = st.lists(
    st.one_of(
        FEW_IDS.flatmap(persisted_metadata).map(entry),
        st.builds(TransactionLogEntry, FEW_IDS, st.none()),
        atomic_commit_entries(ledger_keys=st.sampled_from(["s1", "s2"])),
    ),
    max_size=25,
)


def views(state: CoordinatorState) -> tuple[object, ...]:
    return (
        {tid: state.metadata(tid) for tid in state.transactional_ids()},
        state.pending_completions(),
        state.open_transactions(""),
        state.snapshot_entries(),
    )


def replay_lenient(entries: list[StateLogEntry]) -> CoordinatorState:
    """Apply what a consistent log would contain: skip entries the state refuses."""
    state = CoordinatorState()
    for item in entries:
        probe = CoordinatorState.replay(state.snapshot_entries())
        try:
            probe.apply(item)
        except CorruptRecordError:
            continue
        state.apply(item)
    return state


@settings(max_examples=100, deadline=None)
@given(LOG)
def test_snapshot_replays_into_an_equal_state(entries: list[StateLogEntry]) -> None:
    """Compaction: the snapshot, replayed (also through the byte codec), gives the same views."""
    state = replay_lenient(entries)
    snapshot = state.snapshot_entries()
    assert views(CoordinatorState.replay(snapshot)) == views(state)
    decoded = [decode_record(encode_key(e), encode_value(e)) for e in snapshot]
    assert views(CoordinatorState.replay(decoded)) == views(state)
    assert len(snapshot) == len(state.transactional_ids()) + len(
        {
            e.ledger_key
            for e in entries
            if isinstance(e, AtomicCommitEntry) and state.ledger_entry(e.ledger_key) is not None
        }
    )
