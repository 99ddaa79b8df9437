"""Snapshot + tail == full replay, and newest-record-per-key == full log, over random state logs
(C-22, C-10, C-11, issue 14 items 1 and 3).

Histories are random sequences of state-log records that a consistent log can hold: epochs of
one (transactional id, producer id) never go down, ledger sequences never go down, and every
state is allowed, including PREPARE_* transactions and PREPARE_COMMIT atomic commits that were
never completed (mid-commit: recovery must roll them forward). For every cut point ``N`` a
snapshot of the replayed prefix is encoded to the snapshot file format, decoded, restored, and
the tail replayed on top; everything the coordinator decides from its state must be equal to a
replay from zero. The same history reduced to its newest record per key (what a compacting
cleaner keeps) must replay to the same state too.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.txn_log.coordinator.strategies import (
    atomic_commit_entries,
    persisted_metadata,
)
from txn_log.coordinator.coordinator_snapshot import restore, snapshot_records
from txn_log.coordinator.coordinator_state import CoordinatorState
from txn_log.coordinator.state_log_format import (
    StateLogEntry,
    TransactionLogEntry,
    decode_record,
    encode_key,
    encode_value,
)
from txn_log.coordinator.transaction_state import TransactionState
from txn_log.storage.state_snapshot import (
    SnapshotKind,
    StateSnapshot,
    decode_state_snapshot,
    encode_state_snapshot,
)

S = TransactionState
IDS = ("a", "b", "c")
LEDGERS = ("L1", "L2")


@st.composite
def histories(draw: st.DrawFn) -> list[StateLogEntry]:
    """A consistent state log (see the module docstring), as decoded entries."""
    epochs: dict[tuple[str, int], int] = {}
    ledgers: dict[str, tuple[int, S]] = {}
    entries: list[StateLogEntry] = []
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["txn", "txn", "txn", "tombstone", "ledger"]))
        if kind == "ledger":
            key = draw(st.sampled_from(LEDGERS))
            sequence, status = ledgers.get(key, (0, S.PREPARE_COMMIT))
            sequence += draw(st.integers(0, 2))
            if (sequence, status) == (ledgers.get(key, (-1, S.EMPTY))[0], S.COMPLETE_COMMIT):
                new_status = S.COMPLETE_COMMIT
            else:
                new_status = draw(st.sampled_from([S.PREPARE_COMMIT, S.COMPLETE_COMMIT]))
            entry = draw(atomic_commit_entries(st.just(key)))
            entries.append(dataclasses.replace(entry, sequence=sequence, status=new_status))
            ledgers[key] = (sequence, new_status)
            continue
        tid = draw(st.sampled_from(IDS))
        if kind == "tombstone":
            entries.append(TransactionLogEntry(tid, None))
            for pair in [p for p in epochs if p[0] == tid]:
                del epochs[pair]
            continue
        producer_id = draw(st.sampled_from([1, 2]))
        epoch = epochs.get((tid, producer_id), 0) + draw(st.integers(0, 2))
        epochs[(tid, producer_id)] = epoch
        md = draw(persisted_metadata(tid))
        md = dataclasses.replace(md, producer_id=producer_id, producer_epoch=epoch)
        entries.append(TransactionLogEntry(tid, md))
    # as the log stores them: encoded, then decoded on replay
    return [decode_record(encode_key(e), encode_value(e)) for e in entries]


def decisions(state: CoordinatorState, now_ms: int) -> tuple[object, ...]:
    """Everything the coordinator decides from its state."""
    return (
        state.snapshot_entries(),
        state.transactional_ids(),
        state.pending_completions(),
        state.open_transactions(""),
        [state.pending_commit_for(t) for t in IDS],
        [(k, state.ledger_last_sequence(k), state.ledger_has(k, 1)) for k in LEDGERS],
        state.expired(now_ms, 2**62),
    )


def through_snapshot_file(state: CoordinatorState, end_offset: int) -> CoordinatorState:
    data = encode_state_snapshot(
        StateSnapshot(SnapshotKind.COORDINATOR, end_offset, None, tuple(snapshot_records(state)))
    )
    return restore(decode_state_snapshot(data, SnapshotKind.COORDINATOR))


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(-(2**40), 2**40))
def test_c22_snapshot_at_every_offset_plus_tail_equals_full_replay(
    entries: list[StateLogEntry], now_ms: int
) -> None:
    full = CoordinatorState.replay(entries)
    expected = decisions(full, now_ms)
    for cut in range(len(entries) + 1):
        state = through_snapshot_file(CoordinatorState.replay(entries[:cut]), cut)
        for entry in entries[cut:]:
            state.apply(entry)
        assert decisions(state, now_ms) == expected, f"snapshot at offset {cut}"


def compacted(entries: list[StateLogEntry]) -> list[StateLogEntry]:
    """The newest record per key, in log order (tombstones kept: within delete.retention.ms)."""
    keys = [encode_key(e) for e in entries]
    newest = {key: index for index, key in enumerate(keys)}
    return [e for i, e in enumerate(entries) if newest[keys[i]] == i]


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(-(2**40), 2**40))
def test_c02_c10_newest_record_per_key_replays_to_the_same_state(
    entries: list[StateLogEntry], now_ms: int
) -> None:
    """The state log's key layout is compaction-correct: keep-newest-per-key (with completed
    transactions reduced to their COMPLETE record, C-10, expired ids to a tombstone, C-11, and
    each ledger to its newest record) changes no decision of the coordinator."""
    reduced = compacted(entries)
    assert decisions(CoordinatorState.replay(reduced), now_ms) == decisions(
        CoordinatorState.replay(entries), now_ms
    )
    # and a snapshot of the compacted log's state is the snapshot of the full one's
    assert snapshot_records(CoordinatorState.replay(reduced)) == snapshot_records(
        CoordinatorState.replay(entries)
    )
