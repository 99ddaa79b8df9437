"""``TransactionManager``: the producer side of KIP-98's transactions (C-33..C-40), as Kafka's
client keeps it apart from the record accumulator.

It owns the producer id and epoch, the client state machine (uninitialized → ready → in
transaction → ready, with the abortable-error, prepared, fatal and closed states), the
partitions registered with the coordinator in the current transaction, and what that
transaction appended. The ``Producer`` buffers and appends records; it asks the manager
before every step whether the step is allowed and tells it what it appended.

States (Kafka's ``TransactionManager.State``, plus KIP-939's PREPARED):

- a fatal error (fenced, out-of-order sequence) makes the producer unusable: every later call
  raises it again (P-13, C-40); ``call`` is where such errors are caught;
- any other failure of a send, flush or send_offsets inside a transaction leaves it
  *abortable only* (``maybe_abortable``, Kafka's ABORTABLE_ERROR): every later call but
  ``abort_transaction()`` and ``close()`` raises TransactionAbortableError chained to that
  failure, so a transaction that may lack a record never commits;
- after ``prepare`` (KIP-939's prepareTransaction) the transaction is durable, still owned and
  open, for another party to complete; here only abort and close are allowed.

Not thread-safe: one thread drives one producer (C-39).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import ParamSpec, TypeVar

from txn_log.clock import Clock
from txn_log.coordinator.transaction_coordinator import TransactionCoordinator
from txn_log.errors import (
    ConcurrentTransactionsError,
    FatalError,
    FencedError,
    InvalidTxnStateError,
    TransactionAbortableError,
    TxnLogError,
)
from txn_log.group.group_offsets import OFFSETS_PARTITION
from txn_log.record.varint import INT64_MAX
from txn_log.topic_partition import TopicPartition

_P = ParamSpec("_P")
_T = TypeVar("_T")
INIT_ATTEMPTS = 20
INIT_BACKOFF_S = 0.05


class State(Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    ABORTABLE_ERROR = "abortable error"  # only abort_transaction() and close() are allowed
    PREPARED = "prepared"  # KIP-939: complete it elsewhere; here only abort and close
    FATAL = "fatal error"
    CLOSED = "closed"


@dataclass(frozen=True)
class PreparedTxnState:
    """A transaction ``prepare_transaction()`` left open for another party to complete:
    whoever holds it commits or aborts it with the coordinator (KIP-939's PreparedTxnState)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class PartitionWrites:
    """What the current transaction appended to one partition."""

    records: int
    batches: int


class TransactionManager:
    """The producer id, epoch and transaction state of one producer (see the module doc)."""

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        clock: Clock,
        transactional_id: str | None,
        transaction_timeout_ms: int,
    ) -> None:
        self._coordinator = coordinator
        self._clock = clock
        self.transactional_id = transactional_id  # fixed for the manager's life
        self.transaction_timeout_ms = transaction_timeout_ms  # likewise
        self.producer_id = -1
        self.producer_epoch = -1
        self._fatal: TxnLogError | None = None  # set only together with state FATAL
        self._abortable: BaseException | None = None  # what failed the transaction
        self._partitions: set[TopicPartition] = set()  # registered with the coordinator
        self._writes: dict[TopicPartition, PartitionWrites] = {}
        self.send_until_ms = -1
        """The last clock reading (ms) at which a send passes ``require_open_transaction``
        and ``maybe_check_transaction_timeout`` with nothing to do, -1 when no send does:
        ``send()``'s common case compares its clock reading with it once per record.
        Recomputed (``_update_send_window``) whenever ``state`` or ``_started_ms`` is set."""
        self._state = State.UNINITIALIZED
        self._txn_started_ms = -1  # when the coordinator learnt of the transaction
        self._update_send_window()

    @property
    def state(self) -> State:
        return self._state

    @state.setter
    def state(self, state: State) -> None:
        self._state = state
        self._update_send_window()

    @property
    def _started_ms(self) -> int:
        """When the coordinator learnt of the transaction (ms), -1 before."""
        return self._txn_started_ms

    @_started_ms.setter
    def _started_ms(self, started_ms: int) -> None:
        self._txn_started_ms = started_ms
        self._update_send_window()

    def _update_send_window(self) -> None:
        """``send_until_ms`` from the state it summarises: inside a transaction, until its
        timeout once the coordinator knows of it (C-25: past it the send must ask the
        coordinator), without limit before; an idempotent producer that is ready (or not yet
        initialised) without limit; never in any other state, nor after a fatal error."""
        if self._fatal is not None:
            self.send_until_ms = -1
        elif self._state is State.IN_TRANSACTION:
            started = self._txn_started_ms
            self.send_until_ms = INT64_MAX if started < 0 else started + self.transaction_timeout_ms
        elif self.transactional_id is None and self._state in (State.READY, State.UNINITIALIZED):
            self.send_until_ms = INT64_MAX
        else:
            self.send_until_ms = -1

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def is_fatal(self) -> bool:
        return self._fatal is not None

    # --- producer id and transitions -------------------------------------------------------------

    def init_transactions(self) -> None:
        """Get a producer id and epoch; fence and finish older instances (C-14, C-33)."""
        self.check_usable()
        if self.transactional_id is None:
            raise InvalidTxnStateError(
                "init_transactions() needs a transactional id; this producer is idempotent only"
            )
        self.call(self._init_producer_id, self.transactional_id)

    def _init_producer_id(self, transactional_id: str) -> None:
        """InitProducerId; retried while a previous instance's commit or abort is being
        completed (CONCURRENT_TRANSACTIONS is retriable, E-10: Kafka's producer retries it)."""
        for attempt in range(INIT_ATTEMPTS):
            try:
                self.producer_id, self.producer_epoch = self._coordinator.init_producer_id(
                    transactional_id, self.transaction_timeout_ms
                )
                break
            except ConcurrentTransactionsError:
                if attempt == INIT_ATTEMPTS - 1:
                    raise
                time.sleep(INIT_BACKOFF_S)
        self.state = State.READY

    def ensure_producer_id(self) -> None:
        """An idempotent producer gets a fresh producer id at its first append (P-06)."""
        if self.producer_id < 0:
            self.producer_id, self.producer_epoch = self._coordinator.init_producer_id(None, 0)

    def begin(self) -> None:
        """Start a transaction (local only: the coordinator learns of it at the first write)."""
        self.require(State.READY, "begin_transaction()")
        if self.transactional_id is None:
            raise InvalidTxnStateError("begin_transaction() on a producer without transactional id")
        self.state = State.IN_TRANSACTION
        self._partitions.clear()
        self._writes.clear()
        self._started_ms = -1

    def check_can_end(self, commit: bool) -> None:
        """Commit from IN_TRANSACTION only; abort also from the abortable and prepared states."""
        if commit or self.state not in (State.ABORTABLE_ERROR, State.PREPARED):
            call = "commit_transaction()" if commit else "abort_transaction()"
            self.require(State.IN_TRANSACTION, call)

    def end(self, commit: bool) -> None:
        """EndTxn (C-36, C-37), unless the transaction registered nothing; back to READY."""
        self.call(self._end, commit)

    def _end(self, commit: bool) -> None:
        if self._partitions:
            self._coordinator.end_txn(
                self._transactional_id(), self.producer_id, self.producer_epoch, commit
            )
        self.state = State.READY
        self._abortable = None
        self._partitions.clear()
        self._writes.clear()

    def prepare(self) -> PreparedTxnState:
        """Confirm with the coordinator that this instance still owns its transactional id
        (ProducerFencedError otherwise) and enter PREPARED; the caller flushed before."""
        transactional_id = self._transactional_id()
        self.call(
            self._coordinator.check_producer,
            transactional_id,
            self.producer_id,
            self.producer_epoch,
        )
        self.state = State.PREPARED
        return PreparedTxnState(transactional_id, self.producer_id, self.producer_epoch)

    def close(self) -> None:
        self.state = State.CLOSED

    # --- the coordinator's view of the transaction -----------------------------------------------

    def register_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for the partitions new to the transaction, in one request, before
        any of them is written (C-16, C-38)."""
        new = self.unregistered(partitions)
        if not new:
            return
        self._coordinator.add_partitions(
            self._transactional_id(), self.producer_id, self.producer_epoch, new
        )
        self.registered(new)

    def unregistered(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Which of ``partitions`` the transaction has not registered yet (sorted), after the
        timeout check every registration makes; the caller registers them with the
        coordinator, then calls ``registered``."""
        self.check_transaction_timeout()
        return sorted(set(partitions) - self._partitions)

    def registered(self, partitions: list[TopicPartition]) -> None:
        """The coordinator registered ``partitions`` (AddPartitionsToTxn succeeded)."""
        if partitions:
            self._started()
            self._partitions.update(partitions)

    def register_offsets(self, group_id: str) -> None:
        """AddOffsetsToTxn for ``group_id`` once per transaction (C-35)."""
        self.check_transaction_timeout()
        if OFFSETS_PARTITION in self._partitions:
            return
        self._coordinator.add_offsets(
            self._transactional_id(), self.producer_id, self.producer_epoch, group_id
        )
        self._started()
        self._partitions.add(OFFSETS_PARTITION)

    def _started(self) -> None:
        if not self._partitions:
            self._started_ms = self._clock.time_ms()

    def check_transaction_timeout(self) -> None:
        """Past its timeout the coordinator aborts the transaction with an epoch bump (C-25);
        asking it now makes that happen and fences this instance, without a daemon."""
        if self._started_ms < 0:
            return
        if self._clock.time_ms() - self._started_ms > self.transaction_timeout_ms:
            self._coordinator.check_producer(
                self._transactional_id(), self.producer_id, self.producer_epoch
            )

    def maybe_check_transaction_timeout(self) -> None:
        """``check_transaction_timeout`` for a send: one clock read while none is registered."""
        if self._started_ms >= 0:
            self.call(self.check_transaction_timeout)

    def record_append(self, tp: TopicPartition, records: int) -> None:
        """Count a batch of ``records`` appended to ``tp`` in the current transaction."""
        if self.transactional_id is not None:
            done = self._writes.get(tp, PartitionWrites(0, 0))
            self._writes[tp] = PartitionWrites(done.records + records, done.batches + 1)

    def has_written(self, tp: TopicPartition) -> bool:
        """Whether the current transaction appended to ``tp`` already."""
        return tp in self._writes

    def writes(self) -> dict[TopicPartition, PartitionWrites]:
        """Records and batches appended per partition in the current transaction, sorted."""
        return dict(sorted(self._writes.items()))

    # --- state checks ----------------------------------------------------------------------------

    def _transactional_id(self) -> str:
        if self.transactional_id is None:
            raise InvalidTxnStateError("this producer has no transactional id")
        return self.transactional_id

    def check_usable(self) -> None:
        if self._fatal is not None:
            raise type(self._fatal)(
                f"producer {self.producer_id} ({self.transactional_id!r}) hit a fatal error "
                f"earlier and cannot be used again: {self._fatal}"
            )
        if self.state is State.CLOSED:
            raise InvalidTxnStateError(f"producer {self.transactional_id!r} is closed")
        if self.state is State.ABORTABLE_ERROR:
            error = self._abortable
            raise TransactionAbortableError(
                f"transactional producer {self.transactional_id!r} (producer id "
                f"{self.producer_id}, epoch {self.producer_epoch}): a call in its transaction "
                f"failed with {type(error).__name__}: {error}; the transaction may lack a "
                "record, so only abort_transaction() is allowed, then a new transaction"
            ) from error

    def require(self, state: State, call: str) -> None:
        self.check_usable()
        if self.state is not state:
            raise InvalidTxnStateError(
                f"{call} on producer {self.transactional_id!r} in state {self.state.value}; "
                f"it needs state {state.value}"
            )

    def require_open_transaction(self, call: str) -> None:
        """A transactional producer sends and registers inside a transaction only. After
        ``prepare`` a send is refused; if a newer instance fenced this one meanwhile, that is
        said instead (ProducerFencedError, fatal): its prepared transaction can never commit."""
        self.check_usable()
        if self.transactional_id is None or self.state is State.IN_TRANSACTION:
            return
        if self.state is State.PREPARED:
            self.call(
                self._coordinator.check_producer,
                self.transactional_id,
                self.producer_id,
                self.producer_epoch,
            )
        raise InvalidTxnStateError(
            f"{call} outside a transaction: a transactional producer must call "
            "begin_transaction() first"
        )

    def maybe_abortable(self, error: BaseException) -> None:
        """After ``error`` failed a send, flush or send_offsets: inside a transaction, unless
        the producer became fatal, the transaction is abortable only (Kafka's
        maybeTransitionToErrorState): whatever failed, a record (or offset) the caller meant
        for it may be missing."""
        if self.state is State.IN_TRANSACTION:
            self.state = State.ABORTABLE_ERROR
            self._abortable = error

    def call(self, method: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``method``; a fenced or fatal error poisons the producer (P-13, C-40)."""
        try:
            return method(*args, **kwargs)
        except (FencedError, FatalError) as error:
            self._fatal = error
            self.state = State.FATAL
            raise
