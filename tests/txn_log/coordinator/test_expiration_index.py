"""``CoordinatorState.expired`` through its ``ExpirationIndex``: the same answer as a look at
every id (C-25 timed-out transactions, C-27 expirable ids, C-28 the expiration checked against
every timeout), for any history of updates and tombstones, while it looks only at the ONGOING
ids and the ids idle long enough, not at every id the coordinator knows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from txn_log.coordinator.coordinator_state import CoordinatorState, Expired
from txn_log.coordinator.state_log_format import TransactionLogEntry
from txn_log.coordinator.transaction_metadata import TransactionMetadata
from txn_log.coordinator.transaction_state import TransactionState as S
from txn_log.errors import InvalidConfigError

IDS = [f"t{i}" for i in range(6)]
STATES = [
    S.EMPTY,
    S.ONGOING,
    S.PREPARE_COMMIT,
    S.PREPARE_ABORT,
    S.COMPLETE_COMMIT,
    S.COMPLETE_ABORT,
]
OPEN = {S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT}

updates = st.lists(
    st.tuples(
        st.sampled_from(IDS),
        st.none() | st.sampled_from(STATES),  # None: a tombstone
        st.integers(0, 100),  # last update (and start) ms
        st.sampled_from([5, 10, 40]),  # transaction timeout ms
    ),
    max_size=60,
)


def metadata(tid: str, state: S, at_ms: int, timeout_ms: int) -> TransactionMetadata:
    partitions = frozenset({("t", 0)}) if state in OPEN else frozenset()
    return TransactionMetadata(
        tid, IDS.index(tid), 0, -1, timeout_ms, state, partitions, at_ms, at_ms
    )


def by_looking_at_every_id(state: CoordinatorState, now_ms: int, expiration_ms: int) -> Expired:
    """The definition: each known id checked, in id order."""
    known = [md for tid in state.transactional_ids() if (md := state.metadata(tid)) is not None]
    if any(expiration_ms <= md.txn_timeout_ms for md in known):
        raise InvalidConfigError("C-28")
    return Expired(
        tuple(md for md in known if md.is_expired_txn(now_ms)),
        tuple(
            md.transactional_id
            for md in known
            if md.is_expired_transactional_id(now_ms, expiration_ms)
        ),
    )


def answer(check: object) -> object:
    try:
        return check()  # type: ignore[operator]
    except InvalidConfigError:
        return InvalidConfigError


@settings(max_examples=300, deadline=None)
@given(updates, st.integers(0, 200), st.sampled_from([8, 20, 50, 150]))
def test_expired_equals_a_look_at_every_id(
    history: list[tuple[str, S | None, int, int]], now_ms: int, expiration_ms: int
) -> None:
    state = CoordinatorState()
    for tid, target, at_ms, timeout_ms in history:
        md = None if target is None else metadata(tid, target, at_ms, timeout_ms)
        state.apply(TransactionLogEntry(tid, md))
        expected = answer(lambda: by_looking_at_every_id(state, now_ms, expiration_ms))
        assert answer(lambda: state.expired(now_ms, expiration_ms)) == expected


def test_a_scan_looks_only_at_its_candidates() -> None:
    """10,000 ids completed recently and one old one: the scan checks the old one only."""
    state = CoordinatorState()
    for i in range(10_000):
        tid = f"task-{i:05d}"
        md = TransactionMetadata(tid, i, 0, -1, 1_000, S.COMPLETE_COMMIT, frozenset(), 0, 50_000)
        state.apply(TransactionLogEntry(tid, md))
    old = TransactionMetadata("old", 10_000, 0, -1, 1_000, S.EMPTY, frozenset(), 0, 0)
    state.apply(TransactionLogEntry("old", old))
    checked: list[str] = []
    original = TransactionMetadata.is_expired_transactional_id

    def counted(md: TransactionMetadata, now_ms: int, expiration_ms: int) -> bool:
        checked.append(md.transactional_id)
        return original(md, now_ms, expiration_ms)

    TransactionMetadata.is_expired_transactional_id = counted  # type: ignore[method-assign]
    try:
        assert state.expired(now_ms=20_000, expiration_ms=10_000) == Expired((), ("old",))
    finally:
        TransactionMetadata.is_expired_transactional_id = original  # type: ignore[method-assign]
    assert checked == ["old"]
