"""What the coordinator knows about one transactional id, and the pure steps that change it.

``TransactionMetadata`` is Kafka's ``TransactionMetadata`` as an immutable value (C-04: the
id -> {producer id, epoch, timeout} mapping and the transaction's status, partitions and
timestamps in one record, as the state log stores them, C-06). Each ``prepare_*`` step is
Kafka's ``TransactionMetadata.prepareXXX`` together with the checks of
``TransactionCoordinator.handleXXX``: it validates everything first and only then builds the
next value (STYLE 3). Nothing here touches disk: the caller (holding the coordinator lock,
DESIGN §3) appends the returned value to the state log and only then treats it as current.

Conventions:

* A step that returns the *same object* (``next is current``) means "nothing to write, reply
  OK": AddPartitionsToTxn for partitions already in the transaction (Kafka's shortcut) and a
  retried EndTxn whose outcome is already complete (T13, C-20).
* Timestamps are milliseconds since the epoch; ``txn_start_timestamp_ms`` is -1 when no
  transaction was ever started since the last InitPid.
* Every error names the transactional id, the producer id and the expected vs actual epoch
  or state.

Decisions where the seeds and shipped Kafka differ (checklist §14); shipped Kafka wins:

* Epoch mismatch on AddPartitionsToTxn / AddOffsetsToTxn / EndTxn raises
  ``ProducerFencedError`` (PRODUCER_FENCED 90, Kafka >= 2.7), not the seeds' InvalidProducerEpoch
  (47) (E-03, E-04). Equality is strict: a *newer* epoch than the coordinator's is fenced too.
* C-12: COMPLETE_* counts as "no transaction", so AddPartitionsToTxn starts a new one;
  while PREPARE_* is being completed it raises ``ConcurrentTransactionsError`` (E-10).
* C-13: AddOffsetsToTxn may start a transaction (EMPTY/COMPLETE_* -> ONGOING), as in Kafka,
  where it is AddPartitionsToTxn for the group's ``__consumer_offsets`` partition.
* C-18: a retried EndTxn while PREPARE_* with the *same* command raises
  ``ConcurrentTransactionsError`` (retry until complete); with the other command, or any
  EndTxn in EMPTY, ``InvalidTxnStateError`` (E-09). COMPLETE_COMMIT + commit and
  COMPLETE_ABORT + abort reply OK (T13).
* C-30: epochs never wrap. ``producer_epoch >= 32767 - 1`` is exhausted and InitPid moves the id
  to a fresh producer id with epoch 0 (Kafka's ``prepareProducerIdRotation``).
* T9: InitPid on an ONGOING transaction bumps the epoch (PREPARE_EPOCH_FENCE, in memory only)
  and writes PREPARE_ABORT with the bumped epoch; the caller completes that abort and calls
  InitPid again, which bumps once more (Kafka answers the client CONCURRENT_TRANSACTIONS and
  the client retries).
* InitPid may name the client's current producer id and epoch (KIP-360's recovery form, R-05:
  a producer recovering from an abortable error bumps its own epoch): they must be the id's
  current ones, checked under the coordinator lock with the bump itself
  (``check_expected_producer``), else PRODUCER_FENCED; an older instance may never bump the
  epoch of a newer one. ``last_producer_epoch`` stays -1 (Kafka's v0 value does not store it
  either), so Kafka's "retry of a bump whose answer was lost" case is fenced here too.
* KIP-890 part 1 (C-16): ``check_verified`` is the one rule for "this partition may take a
  transactional batch of this producer": the id's mapped producer and epoch, an ONGOING
  transaction, the partition in it.
* C-27: an id expires when ``last update <= now - expiration`` (Kafka's ``shouldExpire``); a
  transaction times out when ``start + timeout < now`` (Kafka's ``timedOutTransactions``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from txn_log.coordinator.transaction_state import (
    END_TXN_OUTCOMES,
    EndTxnOutcome,
    TransactionState,
    check_transition,
    is_complete,
    is_expiration_allowed,
    is_prepared,
    state_name,
)
from txn_log.errors import (
    ConcurrentTransactionsError,
    InvalidConfigError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
)

TopicPartition = tuple[str, int]
"""``(topic, partition)``."""

NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1
MAX_PRODUCER_EPOCH = (1 << 15) - 1
"""Short.MAX_VALUE: an epoch is an int16 everywhere (P-16)."""
MAX_PRODUCER_ID = (1 << 63) - 1
MAX_INT32 = (1 << 31) - 1
DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000
"""``transaction.max.timeout.ms`` (CFG-07; the seeds call it ``max.transaction.timeout.ms``)."""
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000
"""``transactional.id.expiration.ms``, 7 days (CFG-06)."""
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"

_S = TransactionState
_NO_PARTITION_STATES = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT, _S.DEAD})


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka's ``isEpochExhausted``: one epoch is kept in reserve so a fence can always bump."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


def validate_transaction_timeout(
    transactional_id: str, txn_timeout_ms: int, max_timeout_ms: int
) -> None:
    """CFG-07 / E-11: ``0 < txn_timeout_ms <= max_timeout_ms``, else InvalidTransactionTimeout."""
    if not 0 < txn_timeout_ms <= max_timeout_ms:
        raise InvalidTransactionTimeoutError(
            f"transactional id {transactional_id!r}: transaction timeout {txn_timeout_ms} ms is "
            f"outside 1..{max_timeout_ms} ms (transaction.max.timeout.ms = {max_timeout_ms})"
        )


def validate_expiration(expiration_ms: int, txn_timeout_ms: int) -> None:
    """C-28: ``transactional.id.expiration.ms`` must be strictly longer than the timeout."""
    if expiration_ms <= txn_timeout_ms:
        raise InvalidConfigError(
            f"transactional.id.expiration.ms = {expiration_ms} must be greater than the "
            f"transaction timeout {txn_timeout_ms} ms"
        )


def _command(commit: bool) -> str:
    return "COMMIT" if commit else "ABORT"


def _invariant_violations(md: TransactionMetadata) -> Iterator[str]:
    """Each broken invariant of ``TransactionMetadata`` (see its docstring), as a phrase."""
    epochs = range(NO_PRODUCER_EPOCH, MAX_PRODUCER_EPOCH + 1)
    if not md.transactional_id:
        yield "empty transactional id"
    if not 0 <= md.producer_id <= MAX_PRODUCER_ID:
        yield f"producer id {md.producer_id} outside 0..2^63-1"
    if md.producer_epoch not in epochs or md.last_producer_epoch not in epochs:
        yield f"epochs {md.producer_epoch} / {md.last_producer_epoch} outside -1..32767"
    if not 0 < md.txn_timeout_ms <= MAX_INT32:
        yield f"timeout {md.txn_timeout_ms} ms outside 1..2^31-1"
    if md.state in _NO_PARTITION_STATES and md.topic_partitions:
        yield f"{state_name(md.state)} holds {len(md.topic_partitions)} partitions, must hold none"
    if any(not 0 <= p <= MAX_INT32 for _, p in md.topic_partitions):
        yield "a partition number outside 0..2^31-1"


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """One transactional id's mapping and transaction (C-04, C-06); immutable (STYLE 8).

    Invariants: ``producer_id >= 0``; epochs are int16 values, -1 only before the first InitPid;
    ``0 < txn_timeout_ms < 2^31``; EMPTY, COMPLETE_* and DEAD hold no partitions (Kafka clears them
    on completion and refuses to write an EMPTY record with partitions). ``last_producer_epoch``
    is not stored in a v0 record and decodes as -1.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    txn_start_timestamp_ms: int = NO_TIMESTAMP
    txn_last_update_timestamp_ms: int = NO_TIMESTAMP

    def __post_init__(self) -> None:
        problems = list(_invariant_violations(self))
        if problems:
            raise ValueError(f"transactional id {self.transactional_id!r}: {'; '.join(problems)}")

    @classmethod
    def new(
        cls, transactional_id: str, producer_id: int, txn_timeout_ms: int, now_ms: int
    ) -> TransactionMetadata:
        """A fresh mapping before its first InitPid: EMPTY, epoch -1 (T1; never written as is)."""
        return cls(
            transactional_id,
            producer_id,
            NO_PRODUCER_EPOCH,
            NO_PRODUCER_EPOCH,
            txn_timeout_ms,
            _S.EMPTY,
            frozenset(),
            NO_TIMESTAMP,
            now_ms,
        )

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        """C-30: the next InitPid moves this id to a new producer id."""
        return is_epoch_exhausted(self.producer_epoch)

    def describe(self) -> str:
        """``transactional id 'x' (producer id 7, epoch 3, Ongoing)`` for error messages."""
        return (
            f"transactional id {self.transactional_id!r} (producer id {self.producer_id}, "
            f"epoch {self.producer_epoch}, {state_name(self.state)})"
        )

    # --- validation shared by the client requests ------------------------------------------

    def _check_producer(self, request: str, producer_id: int, producer_epoch: int) -> None:
        """C-16 steps 1-2: another pid -> InvalidProducerIdMapping, another epoch -> fenced."""
        if producer_id != self.producer_id:
            raise InvalidProducerIdMappingError(
                f"{request} for {self.describe()}: request has producer id {producer_id}, "
                f"the id is mapped to producer id {self.producer_id}; call InitPid again"
            )
        if producer_epoch != self.producer_epoch:
            raise ProducerFencedError(
                f"{request} for {self.describe()}: request has epoch {producer_epoch}, "
                f"expected the current epoch {self.producer_epoch}; a newer instance fenced it"
            )

    def _check(self, to_state: TransactionState) -> None:
        """Every state change asks the table first (STYLE 3, 4)."""
        check_transition(self.state, to_state, self.transactional_id)

    def check_verified(
        self, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> None:
        """KIP-890 part 1 (C-16): a transactional write of ``producer_id`` at
        ``producer_epoch`` to ``partitions`` belongs to this id's ongoing transaction; else
        the mapping and fencing errors of ``_check_producer`` or InvalidTxnStateError."""
        self._check_producer("a transactional write", producer_id, producer_epoch)
        missing = sorted(set(partitions) - self.topic_partitions)
        if self.state is not _S.ONGOING or missing:
            where = ", ".join(f"{topic}-{partition}" for topic, partition in missing)
            raise InvalidTxnStateError(
                f"{where or 'the partitions'} not part of {self.describe()}'s ongoing "
                "transaction: AddPartitionsToTxn (or AddOffsetsToTxn) must come first (KIP-890)"
            )

    # --- AddPartitionsToTxn / AddOffsetsToTxn (C-16, C-17, T3, T4) -------------------------

    def prepare_add_partitions(
        self,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> TransactionMetadata:
        """AddPartitionsToTxn: start (T3) or grow (T4) the transaction.

        EMPTY / COMPLETE_* -> ONGOING with ``txn_start_timestamp_ms = now_ms`` (the timer starts
        on the first partition, C-25); ONGOING -> ONGOING with the union of the partitions.
        Returns ``self`` when every partition is already in the ONGOING transaction.
        """
        return self._add_partitions(
            "AddPartitionsToTxn", producer_id, producer_epoch, frozenset(partitions), now_ms
        )

    def prepare_add_offsets(
        self,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        now_ms: int,
        offsets_partition: int = 0,
    ) -> TransactionMetadata:
        """AddOffsetsToTxn: add ``__consumer_offsets-<offsets_partition>`` for ``group_id`` (C-17).

        Same rules as ``prepare_add_partitions``; it may start a transaction (C-13, Kafka).
        ``offsets_partition`` is the group's offsets partition (0: the embedded log has one).
        """
        request = f"AddOffsetsToTxn(group {group_id!r})"
        return self._add_partitions(
            request,
            producer_id,
            producer_epoch,
            frozenset({(CONSUMER_OFFSETS_TOPIC, offsets_partition)}),
            now_ms,
        )

    def _add_partitions(
        self,
        request: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        now_ms: int,
    ) -> TransactionMetadata:
        if not partitions:
            raise ValueError(f"{request} for {self.describe()}: no partitions given")
        self._check_producer(request, producer_id, producer_epoch)
        if is_prepared(self.state):
            raise ConcurrentTransactionsError(
                f"{request} for {self.describe()}: the previous transaction is still "
                f"completing (expected Empty, Ongoing or Complete*); retry after back-off"
            )
        if self.state is _S.ONGOING and partitions <= self.topic_partitions:
            return self
        self._check(_S.ONGOING)
        starts = self.state is _S.EMPTY or is_complete(self.state)
        return replace(
            self,
            state=_S.ONGOING,
            topic_partitions=self.topic_partitions | partitions,
            txn_start_timestamp_ms=now_ms if starts else self.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms=now_ms,
        )

    # --- EndTxn and completion (C-18, C-19, T5..T7, T13) -----------------------------------

    def prepare_end_txn(
        self, producer_id: int, producer_epoch: int, commit: bool, now_ms: int
    ) -> TransactionMetadata:
        """EndTxn(COMMIT | ABORT): ONGOING -> PREPARE_COMMIT / PREPARE_ABORT (T5).

        Returns ``self`` for a retry whose outcome is already complete (T13, C-20); see
        ``END_TXN_OUTCOMES`` for the rest. The caller writes the PREPARE record (the commit
        point, C-08), then the markers, then ``prepare_complete``.
        """
        request = f"EndTxn({_command(commit)})"
        self._check_producer(request, producer_id, producer_epoch)
        outcome = END_TXN_OUTCOMES.get((self.state, commit), EndTxnOutcome.INVALID)
        if outcome is EndTxnOutcome.ALREADY_COMPLETE:
            return self
        if outcome is EndTxnOutcome.CONCURRENT:
            done = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
            raise ConcurrentTransactionsError(
                f"{request} for {self.describe()}: the transaction is still completing; "
                f"retry until it is {state_name(done)}"
            )
        if outcome is EndTxnOutcome.INVALID:
            raise InvalidTxnStateError(
                f"{request} for {self.describe()}: expected Ongoing, or "
                f"{'CompleteCommit' if commit else 'CompleteAbort'} for a retry"
            )
        target = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        self._check(target)
        return replace(self, state=target, txn_last_update_timestamp_ms=now_ms)

    def prepare_complete(self, now_ms: int) -> TransactionMetadata:
        """Every marker is written: PREPARE_COMMIT -> COMPLETE_COMMIT, PREPARE_ABORT ->
        COMPLETE_ABORT (T6, T7, T11), partitions cleared, start timestamp kept (Kafka)."""
        target = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        self._check(target)
        return replace(
            self, state=target, topic_partitions=frozenset(), txn_last_update_timestamp_ms=now_ms
        )

    # --- fencing: timeout and InitPid on an open transaction (C-25, T8, T9, P-18) ----------

    def prepare_fence_producer_epoch(self) -> TransactionMetadata:
        """ONGOING -> PREPARE_EPOCH_FENCE with ``epoch + 1`` (in memory only, never written)."""
        self._check(_S.PREPARE_EPOCH_FENCE)
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise InvalidTxnStateError(
                f"cannot fence {self.describe()}: epoch {self.producer_epoch} would overflow "
                f"past {MAX_PRODUCER_EPOCH}"
            )
        return replace(
            self,
            state=_S.PREPARE_EPOCH_FENCE,
            producer_epoch=self.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )

    def prepare_abort_fenced(self, now_ms: int) -> TransactionMetadata:
        """PREPARE_EPOCH_FENCE -> PREPARE_ABORT keeping the bumped epoch (the record written).

        Only from PREPARE_EPOCH_FENCE: a client abort from ONGOING goes through
        ``prepare_end_txn``, which checks the producer first.
        """
        if self.state is not _S.PREPARE_EPOCH_FENCE:
            raise InvalidTxnStateError(
                f"fenced abort of {self.describe()}: expected PrepareEpochFence"
            )
        return replace(self, state=_S.PREPARE_ABORT, txn_last_update_timestamp_ms=now_ms)

    def prepare_fence_and_abort(self, now_ms: int) -> TransactionMetadata:
        """Bump the epoch, then abort with the bumped epoch (C-25 step 1, P-18, T8, T9).

        Returns PREPARE_ABORT with ``producer_epoch + 1``: its ABORT markers carry the new
        epoch, so partitions fence the zombie as soon as the marker lands (C-26).
        """
        return self.prepare_fence_producer_epoch().prepare_abort_fenced(now_ms)

    # --- expiration (C-25, C-27, C-28) -----------------------------------------------------

    def is_expired_txn(self, now_ms: int) -> bool:
        """ONGOING and ``txn_start_timestamp_ms + txn_timeout_ms < now_ms`` (C-25 step 1)."""
        return (
            self.state is _S.ONGOING and self.txn_start_timestamp_ms + self.txn_timeout_ms < now_ms
        )

    def is_expired_transactional_id(
        self, now_ms: int, expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS
    ) -> bool:
        """No open transaction and the last update is ``expiration_ms`` old (C-27).

        Raises ``InvalidConfigError`` when ``expiration_ms`` is not above the timeout (C-28).
        """
        validate_expiration(expiration_ms, self.txn_timeout_ms)
        return (
            is_expiration_allowed(self.state)
            and self.txn_last_update_timestamp_ms <= now_ms - expiration_ms
        )


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    """What InitPid must write next (C-14).

    ``fenced_abort`` False: ``metadata`` is EMPTY with the new producer id / epoch; write it and
    reply with them. True: the id had an ONGOING transaction (T9); ``metadata`` is PREPARE_ABORT
    with a bumped epoch that must never be returned to the client: write it, write the ABORT
    markers, write ``prepare_complete``, then call ``prepare_init_producer_id`` again.
    """

    metadata: TransactionMetadata
    fenced_abort: bool


def prepare_init_producer_id(
    current: TransactionMetadata | None,
    transactional_id: str,
    txn_timeout_ms: int,
    now_ms: int,
    allocate_producer_id: Callable[[], int],
    max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
    expected: tuple[int, int] | None = None,
) -> InitProducerIdResult:
    """InitPid for a non-empty transactional id (C-14, T1, T2, T9, T10, C-30).

    Validates the timeout first (E-11), then KIP-360's ``expected`` (producer id, epoch) when
    the client names them (``check_expected_producer``); ``allocate_producer_id`` is called
    only when a new producer id is needed (new id, or exhausted epoch) and after every check
    passed.
    Raises ``ConcurrentTransactionsError`` while PREPARE_* is completing (T10).
    """
    validate_transaction_timeout(transactional_id, txn_timeout_ms, max_timeout_ms)
    if expected is not None:
        check_expected_producer(current, transactional_id, *expected)
    if current is None:
        current = TransactionMetadata.new(
            transactional_id, allocate_producer_id(), txn_timeout_ms, now_ms
        )
    elif current.transactional_id != transactional_id:
        raise ValueError(f"InitPid for {transactional_id!r} given {current.describe()}")
    if is_prepared(current.state):
        raise ConcurrentTransactionsError(
            f"InitPid for {current.describe()}: the previous transaction is still completing "
            f"(expected Empty, Ongoing or Complete*); retry after back-off"
        )
    if current.state is _S.ONGOING:
        return InitProducerIdResult(current.prepare_fence_and_abort(now_ms), fenced_abort=True)
    current._check(_S.EMPTY)
    rotate = current.is_producer_epoch_exhausted
    bumped = replace(
        current,
        state=_S.EMPTY,
        producer_id=allocate_producer_id() if rotate else current.producer_id,
        producer_epoch=0 if rotate else current.producer_epoch + 1,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=txn_timeout_ms,
        topic_partitions=frozenset(),
        txn_start_timestamp_ms=NO_TIMESTAMP,
        txn_last_update_timestamp_ms=now_ms,
    )
    return InitProducerIdResult(bumped, fenced_abort=False)


def check_expected_producer(
    current: TransactionMetadata | None, transactional_id: str, producer_id: int, epoch: int
) -> None:
    """KIP-360 (R-05): an InitPid naming ``(producer_id, epoch)`` may bump only the id's
    current instance (or the one from just before a timeout's bump, ``last_producer_epoch``,
    when it is stored): ProducerFencedError otherwise, before anything changes. An id with no
    mapping yet has no instance to fence (Kafka: a new mapping)."""
    if current is None or current.producer_epoch == NO_PRODUCER_EPOCH:
        return
    if (
        current.producer_id == producer_id
        and epoch
        in (
            current.producer_epoch,
            current.last_producer_epoch,
        )
        and epoch != NO_PRODUCER_EPOCH
    ):
        return
    raise ProducerFencedError(
        f"InitPid for transactional id {transactional_id!r} names producer {producer_id} epoch "
        f"{epoch}, which is not the current instance (producer {current.producer_id} epoch "
        f"{current.producer_epoch}): an older instance may not bump the epoch (KIP-360)"
    )
