"""The pure coordinator steps: InitPid, AddPartitions/AddOffsets, EndTxn, completion, fencing,
expiration (C-12..C-18, C-25..C-30, T1..T13, P-18, E-03..E-11)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.txn_log.coordinator.strategies import S, metadata, ongoing
from txn_log.coordinator.transaction_metadata import (
    CONSUMER_OFFSETS_TOPIC,
    TransactionMetadata,
    is_epoch_exhausted,
    prepare_init_producer_id,
)
from txn_log.coordinator.transaction_state import VALID_PREVIOUS_STATES, check_transition
from txn_log.errors import (
    ConcurrentTransactionsError,
    InvalidConfigError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    TxnLogError,
)

NOW = 5_000


def allocator(*ids: int) -> Callable[[], int]:
    """Hands out ``ids`` in order; fails the test when asked for more."""
    pending = list(ids)

    def allocate() -> int:
        if not pending:
            pytest.fail("allocate_producer_id called more often than expected")
        return pending.pop(0)

    return allocate


NO_ALLOCATION = allocator()


# --- InitPid (C-14, T1, T2, T9, T10, C-30, E-11) -------------------------------------------


def test_init_new_id_maps_a_fresh_producer_id_with_epoch_zero() -> None:
    """T1: a new id gets a new producer id and epoch 0, EMPTY, no transaction started."""
    result = prepare_init_producer_id(None, "tx", 60_000, NOW, allocator(77))
    assert not result.fenced_abort
    assert result.metadata == TransactionMetadata(
        "tx", 77, 0, -1, 60_000, S.EMPTY, frozenset(), -1, NOW
    )


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_init_existing_id_bumps_the_epoch(state: S) -> None:
    """T2: the epoch grows by one, the new timeout is stored, the partition set is empty."""
    current = metadata(state=state, producer_epoch=4, start_ms=100)
    result = prepare_init_producer_id(current, "tx", 30_000, NOW, NO_ALLOCATION)
    assert not result.fenced_abort
    assert result.metadata == replace(
        current,
        state=S.EMPTY,
        producer_epoch=5,
        txn_timeout_ms=30_000,
        txn_start_timestamp_ms=-1,
        txn_last_update_timestamp_ms=NOW,
    )


@pytest.mark.parametrize(
    ("epoch", "expected_pid", "expected_epoch"),
    [
        (32764, 1000, 32765),
        (32765, 1000, 32766),
        (32766, 2000, 0),
        (32767, 2000, 0),
    ],
)
def test_init_with_exhausted_epoch_rotates_the_producer_id(
    epoch: int, expected_pid: int, expected_epoch: int
) -> None:
    """C-30 [EXT] Kafka: epoch >= 32767 - 1 is exhausted -> a new producer id with epoch 0."""
    assert is_epoch_exhausted(epoch) == (expected_pid == 2000)
    current = metadata(state=S.COMPLETE_COMMIT, producer_epoch=epoch)
    allocate = allocator(2000) if expected_pid == 2000 else NO_ALLOCATION
    md = prepare_init_producer_id(current, "tx", 60_000, NOW, allocate).metadata
    assert (md.producer_id, md.producer_epoch, md.state) == (expected_pid, expected_epoch, S.EMPTY)


def test_init_on_an_ongoing_transaction_fences_then_aborts() -> None:
    """T9: bump the epoch, abort with it; a second InitPid after completion bumps again."""
    current = ongoing(producer_epoch=4)
    first = prepare_init_producer_id(current, "tx", 60_000, NOW, NO_ALLOCATION)
    assert first.fenced_abort
    assert first.metadata.state is S.PREPARE_ABORT
    assert first.metadata.producer_epoch == 5
    assert first.metadata.topic_partitions == current.topic_partitions
    completed = first.metadata.prepare_complete(NOW + 1)
    second = prepare_init_producer_id(completed, "tx", 60_000, NOW + 2, NO_ALLOCATION)
    assert not second.fenced_abort
    assert (second.metadata.state, second.metadata.producer_epoch) == (S.EMPTY, 6)


def test_init_fencing_the_last_epoch_then_rotates() -> None:
    """C-30 + T9: fencing at 32766 uses the reserved 32767; the retry moves to a new pid."""
    fenced = prepare_init_producer_id(
        ongoing(producer_epoch=32766), "tx", 60_000, NOW, NO_ALLOCATION
    ).metadata
    assert fenced.producer_epoch == 32767
    again = prepare_init_producer_id(
        fenced.prepare_complete(NOW), "tx", 60_000, NOW, allocator(9)
    ).metadata
    assert (again.producer_id, again.producer_epoch) == (9, 0)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_completing_is_concurrent(state: S) -> None:
    """T10 / E-10: the previous transaction must complete first; the client retries."""
    with pytest.raises(ConcurrentTransactionsError) as raised:
        prepare_init_producer_id(ongoing(state=state), "tx", 60_000, NOW, NO_ALLOCATION)
    message = str(raised.value)
    assert "'tx'" in message and "producer id 1000" in message
    assert "PrepareCommit" in message or "PrepareAbort" in message


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_init_in_a_state_never_loaded_is_invalid(state: S) -> None:
    current = metadata(state=state) if state is S.DEAD else ongoing(state=state)
    with pytest.raises(InvalidTxnStateError):
        prepare_init_producer_id(current, "tx", 60_000, NOW, NO_ALLOCATION)


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_init_refuses_a_timeout_outside_the_maximum(timeout_ms: int) -> None:
    """CFG-07 / E-11: checked first, before a producer id is allocated."""
    with pytest.raises(InvalidTransactionTimeoutError) as raised:
        prepare_init_producer_id(None, "tx", timeout_ms, NOW, NO_ALLOCATION)
    assert str(timeout_ms) in str(raised.value) and "900000" in str(raised.value)
    assert raised.value.code == 50


def test_init_accepts_the_maximum_and_a_custom_maximum() -> None:
    assert prepare_init_producer_id(None, "tx", 900_000, NOW, allocator(1)).metadata
    with pytest.raises(InvalidTransactionTimeoutError, match="1000"):
        prepare_init_producer_id(None, "tx", 1001, NOW, NO_ALLOCATION, max_timeout_ms=1000)


# --- AddPartitionsToTxn / AddOffsetsToTxn (C-12, C-13, C-16, C-17, T3, T4) -----------------


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_add_partitions_starts_a_transaction(state: S) -> None:
    """T3, C-12: Empty and Complete* mean "no transaction"; the timer starts now."""
    current = metadata(state=state, start_ms=10, last_update_ms=10)
    md = current.prepare_add_partitions(1000, 3, [("orders", 1)], NOW)
    assert md == replace(
        current,
        state=S.ONGOING,
        topic_partitions=frozenset({("orders", 1)}),
        txn_start_timestamp_ms=NOW,
        txn_last_update_timestamp_ms=NOW,
    )


def test_add_partitions_grows_an_ongoing_transaction() -> None:
    """T4: the partition set grows; the start timestamp stays."""
    md = ongoing().prepare_add_partitions(1000, 3, [("orders", 1), ("orders", 0)], NOW)
    assert md.topic_partitions == {("orders", 0), ("orders", 1)}
    assert (md.txn_start_timestamp_ms, md.txn_last_update_timestamp_ms) == (1_000, NOW)


def test_add_partitions_already_in_the_transaction_writes_nothing() -> None:
    """Kafka's shortcut: same object back, nothing to append."""
    current = ongoing()
    assert current.prepare_add_partitions(1000, 3, [("orders", 0)], NOW) is current


def test_add_partitions_with_another_producer_id_is_an_invalid_mapping() -> None:
    """C-16 step 1 / E-05."""
    with pytest.raises(InvalidProducerIdMappingError) as raised:
        ongoing().prepare_add_partitions(999, 3, [("orders", 1)], NOW)
    assert "999" in str(raised.value) and "1000" in str(raised.value)
    assert "'tx'" in str(raised.value)


@pytest.mark.parametrize("epoch", [2, 4])
def test_add_partitions_from_a_zombie_epoch_is_fenced(epoch: int) -> None:
    """C-16 step 2 / E-03, E-04: Kafka's shipped PRODUCER_FENCED (90), strict equality."""
    with pytest.raises(ProducerFencedError) as raised:
        ongoing().prepare_add_partitions(1000, epoch, [("orders", 1)], NOW)
    assert raised.value.code == 90
    assert f"epoch {epoch}" in str(raised.value) and "current epoch 3" in str(raised.value)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_add_partitions_while_completing_is_concurrent(state: S) -> None:
    """C-12 / E-10: retriable, the previous transaction is still completing."""
    with pytest.raises(ConcurrentTransactionsError) as raised:
        ongoing(state=state).prepare_add_partitions(1000, 3, [("orders", 1)], NOW)
    assert raised.value.retriable


def test_add_partitions_checks_the_producer_before_the_state() -> None:
    """Kafka's order: mapping, then epoch, then state."""
    with pytest.raises(ProducerFencedError):
        ongoing(state=S.PREPARE_COMMIT).prepare_add_partitions(1000, 2, [("a", 0)], NOW)


def test_add_partitions_when_dead_is_invalid() -> None:
    with pytest.raises(InvalidTxnStateError, match="Dead"):
        metadata(state=S.DEAD).prepare_add_partitions(1000, 3, [("orders", 1)], NOW)


def test_add_offsets_may_start_a_transaction() -> None:
    """C-13 [CONFLICT]: Kafka (not the literal seed) lets AddOffsetsToTxn start one."""
    md = metadata().prepare_add_offsets(1000, 3, "group-a", NOW)
    assert md.state is S.ONGOING
    assert md.topic_partitions == {(CONSUMER_OFFSETS_TOPIC, 0)}
    assert md.txn_start_timestamp_ms == NOW


def test_add_offsets_checks_like_add_partitions() -> None:
    """C-17 steps 1-2: same mapping and epoch checks, message names the group."""
    with pytest.raises(ProducerFencedError, match="group-a"):
        ongoing().prepare_add_offsets(1000, 2, "group-a", NOW)
    with pytest.raises(InvalidProducerIdMappingError):
        ongoing().prepare_add_offsets(1, 3, "group-a", NOW)


# --- EndTxn and completion (C-18, C-20, T5..T7, T13) ---------------------------------------


@pytest.mark.parametrize(("commit", "target"), [(True, S.PREPARE_COMMIT), (False, S.PREPARE_ABORT)])
def test_end_txn_prepares(commit: bool, target: S) -> None:
    """T5: ONGOING -> PREPARE_*, the partition list is kept for the markers."""
    current = ongoing()
    md = current.prepare_end_txn(1000, 3, commit, NOW)
    assert md == replace(current, state=target, txn_last_update_timestamp_ms=NOW)


@pytest.mark.parametrize(
    ("state", "commit"), [(S.COMPLETE_COMMIT, True), (S.COMPLETE_ABORT, False)]
)
def test_end_txn_retry_after_completion_with_the_same_command_is_ok(state: S, commit: bool) -> None:
    """T13 / C-20: the client learns the outcome; nothing is written."""
    current = metadata(state=state)
    assert current.prepare_end_txn(1000, 3, commit, NOW) is current


@pytest.mark.parametrize(
    ("state", "commit"),
    [(S.COMPLETE_COMMIT, False), (S.COMPLETE_ABORT, True), (S.EMPTY, True), (S.EMPTY, False)],
)
def test_end_txn_with_a_mismatched_command_is_invalid(state: S, commit: bool) -> None:
    """T13: any other mismatch -> InvalidTxnState (E-09)."""
    with pytest.raises(InvalidTxnStateError) as raised:
        metadata(state=state).prepare_end_txn(1000, 3, commit, NOW)
    assert "'tx'" in str(raised.value) and "Ongoing" in str(raised.value)


@pytest.mark.parametrize(
    ("state", "commit", "error"),
    [
        (S.PREPARE_COMMIT, True, ConcurrentTransactionsError),
        (S.PREPARE_ABORT, False, ConcurrentTransactionsError),
        (S.PREPARE_COMMIT, False, InvalidTxnStateError),
        (S.PREPARE_ABORT, True, InvalidTxnStateError),
    ],
)
def test_end_txn_retry_while_completing_follows_kafka(
    state: S, commit: bool, error: type[TxnLogError]
) -> None:
    """C-18 [EXT]: the same command -> CONCURRENT_TRANSACTIONS (retry), the other -> invalid."""
    with pytest.raises(error):
        ongoing(state=state).prepare_end_txn(1000, 3, commit, NOW)


def test_end_txn_from_a_zombie_or_another_producer_is_refused() -> None:
    with pytest.raises(ProducerFencedError):
        metadata(state=S.COMPLETE_COMMIT).prepare_end_txn(1000, 2, True, NOW)
    with pytest.raises(InvalidProducerIdMappingError):
        ongoing().prepare_end_txn(7, 3, True, NOW)


@pytest.mark.parametrize(
    ("state", "target"),
    [(S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT)],
)
def test_complete_clears_the_partitions(state: S, target: S) -> None:
    """T6, T7: partitions cleared, start timestamp kept (Kafka), last update = now."""
    md = ongoing(state=state).prepare_complete(NOW)
    assert (md.state, md.topic_partitions) == (target, frozenset())
    assert (md.txn_start_timestamp_ms, md.txn_last_update_timestamp_ms) == (1_000, NOW)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.DEAD])
def test_complete_without_prepare_is_invalid(state: S) -> None:
    with pytest.raises(InvalidTxnStateError):
        metadata(state=state).prepare_complete(NOW)
    with pytest.raises(InvalidTxnStateError):
        ongoing().prepare_complete(NOW)


# --- fencing on timeout (C-25, T8, P-18) ---------------------------------------------------


def test_fence_and_abort_bumps_then_aborts_with_the_new_epoch() -> None:
    """C-25 step 1 / P-18: PREPARE_ABORT carries epoch + 1; the zombie is then fenced."""
    current = ongoing()
    md = current.prepare_fence_and_abort(NOW)
    assert md == replace(
        current, state=S.PREPARE_ABORT, producer_epoch=4, txn_last_update_timestamp_ms=NOW
    )
    with pytest.raises(ProducerFencedError):
        md.prepare_complete(NOW).prepare_add_partitions(1000, 3, [("orders", 1)], NOW)


def test_fence_goes_through_prepare_epoch_fence() -> None:
    fence = ongoing().prepare_fence_producer_epoch()
    assert (fence.state, fence.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 4)
    with pytest.raises(InvalidTxnStateError):
        ongoing().prepare_abort_fenced(NOW)


@pytest.mark.parametrize("state", [S.EMPTY, S.PREPARE_COMMIT, S.COMPLETE_ABORT])
def test_fence_needs_an_ongoing_transaction(state: S) -> None:
    current = metadata(state=state) if state is not S.PREPARE_COMMIT else ongoing(state=state)
    with pytest.raises(InvalidTxnStateError):
        current.prepare_fence_and_abort(NOW)


def test_fence_at_the_last_epoch_is_refused() -> None:
    with pytest.raises(InvalidTxnStateError, match="32767"):
        ongoing(producer_epoch=32767).prepare_fence_and_abort(NOW)


def prepare_dead(current: TransactionMetadata) -> TransactionMetadata:
    """Kafka's ``prepareDead`` (EMPTY / COMPLETE_* -> DEAD before the id's tombstone, T12, C-11)
    as a test oracle: the coordinator writes an expired id's tombstone without building the DEAD
    value, so only the transition table is under test here."""
    check_transition(current.state, S.DEAD, current.transactional_id)
    return replace(current, state=S.DEAD, topic_partitions=frozenset())


def test_prepare_dead_only_without_a_transaction() -> None:
    """T12: Dead <- {Empty, Complete*}."""
    assert prepare_dead(metadata(state=S.COMPLETE_ABORT)).state is S.DEAD
    with pytest.raises(InvalidTxnStateError):
        prepare_dead(ongoing())


# --- expiration (C-25, C-27, C-28) ---------------------------------------------------------


def test_transaction_times_out_strictly_after_start_plus_timeout() -> None:
    """C-25 (Kafka's timedOutTransactions): start + timeout < now."""
    md = ongoing(start_ms=1_000, txn_timeout_ms=60_000)
    assert not md.is_expired_txn(61_000)
    assert md.is_expired_txn(61_001)
    assert not ongoing(state=S.PREPARE_COMMIT).is_expired_txn(10**12)
    assert not metadata(start_ms=0).is_expired_txn(10**12)


def test_transactional_id_expires_after_idle_time_without_a_transaction() -> None:
    """C-27: no ongoing transaction and last update <= now - expiration (Kafka)."""
    md = metadata(state=S.COMPLETE_COMMIT, last_update_ms=1_000)
    assert not md.is_expired_transactional_id(1_000 + 604_800_000 - 1)
    assert md.is_expired_transactional_id(1_000 + 604_800_000)
    assert md.is_expired_transactional_id(2_000, expiration_ms=100_000) is False
    assert not ongoing(last_update_ms=0).is_expired_transactional_id(10**12)


def test_expiration_must_exceed_the_transaction_timeout() -> None:
    """C-28."""
    with pytest.raises(InvalidConfigError, match="60000"):
        metadata(txn_timeout_ms=60_000).is_expired_transactional_id(NOW, expiration_ms=60_000)


# --- invariants ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"state": S.EMPTY, "topic_partitions": frozenset({("a", 0)})},
        {"state": S.COMPLETE_COMMIT, "topic_partitions": frozenset({("a", 0)})},
        {"producer_epoch": 32768},
        {"producer_epoch": -2},
        {"producer_id": -1},
        {"txn_timeout_ms": 0},
        {"transactional_id": ""},
        {"state": S.ONGOING, "topic_partitions": frozenset({("a", -1)})},
    ],
)
def test_invariants_are_enforced(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        replace(metadata(), **changes)  # type: ignore[arg-type]


# --- a random walk through the requests never breaks the state machine ---------------------

OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["init", "add", "offsets", "commit", "abort", "complete", "fence"]),
        st.integers(0, 2),
        st.sampled_from([-1, 0, 1]),
    ),
    max_size=30,
)


def _step(
    md: TransactionMetadata,
    op: str,
    partition: int,
    epoch: int,
    now: int,
    allocate: Callable[[], int],
) -> TransactionMetadata:
    pid = md.producer_id
    if op == "init":
        return prepare_init_producer_id(md, "tx", 60_000, now, allocate).metadata
    if op == "add":
        return md.prepare_add_partitions(pid, epoch, [("t", partition)], now)
    if op == "offsets":
        return md.prepare_add_offsets(pid, epoch, "g", now)
    if op in ("commit", "abort"):
        return md.prepare_end_txn(pid, epoch, op == "commit", now)
    if op == "complete":
        return md.prepare_complete(now)
    return md.prepare_fence_and_abort(now)


@settings(max_examples=150, deadline=None)
@given(OPERATIONS)
def test_random_requests_keep_the_state_machine(ops: list[tuple[str, int, int]]) -> None:
    """Every accepted step is a table edge (or no change); epochs of one pid never shrink."""
    pids = iter(range(2000, 3000))

    def allocate() -> int:
        return next(pids)

    md = prepare_init_producer_id(None, "tx", 60_000, 0, allocate).metadata
    for now, (op, partition, epoch_skew) in enumerate(ops, start=1):
        try:
            following = _step(md, op, partition, md.producer_epoch + epoch_skew, now, allocate)
        except TxnLogError:
            continue
        assert following is md or md.state in VALID_PREVIOUS_STATES[following.state]
        if following.producer_id == md.producer_id:
            assert following.producer_epoch >= md.producer_epoch
        else:
            assert following.producer_epoch == 0
        md = following
