"""Executor prepare, driver commit and abort of a Spark sink's micro-batches (DESIGN §4-5).

Two commit protocols, one per kind of backend (``commit_protocol.backend``), each making only
its own backend's ledger calls; ``SinkCommitProtocol(backend, sink)`` is the one the backend's
class calls for, as ``pathlib.Path(...)`` is a ``PosixPath`` or a ``WindowsPath``.

``AtomicBatchCommit``, on an ``AtomicCommitBackend`` (embedded): the driver commits.

    executor (each task attempt)            driver (once per batch)
    ------------------------------------    ------------------------------------------------
    begin_task: ledger says committed? ->   commit: every message present, of this sink and
      skip; else init_transactions() with     batch -> one batch commit (all task
      <prefix>-<task id> (fences earlier      transactions + ledger entry + group offsets;
      attempts and a previous run)            the commit point is one PREPARE record) ->
    write ... (TaskTransaction.write)         abort the sink's other open transactions
    prepare_task: flush (durable), return   abort: abort every message's transaction and
      a TaskCommit; never commit              every other open one under the prefix

Exactly once: a batch becomes visible only through ``commit``, as a whole; the ledger makes
``commit`` idempotent and makes re-run tasks of a committed batch write nothing; a fenced or
timed-out task transaction makes ``commit`` raise before anything is written.

``PerTaskCommit``, on a ``TaskCommitBackend`` (Kafka, which cannot commit another process's
transaction): each task commits.

    begin_task: init_transactions() with <prefix>-<task id> FIRST (fencing every earlier
      attempt, aborting its open transaction), THEN the task ledger: committed -> skip
    prepare_task: the task's ledger record ``(sink, batch, task)`` into the same transaction,
      commit; the TaskCommit says ``committed``
    commit (driver): every message present, of this sink and batch, committed or a skip the
      ledger confirms -> the batch's ledger record and the group offsets in one transaction
      of ``<prefix>-driver``; a no-op when the ledger has the batch
    abort (driver): fence the ids of the tasks that sent no message (a failed task may have
      left its transaction open) and of messages not committed; committed tasks stay

Exactly once per task: fencing before the ledger check means no earlier attempt can commit
after the check, and a committed task is never written again. A batch is not atomic across
tasks there. Stateless apart from the backend: safe to build anew in every Python worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from commit_protocol.backend import (
    AtomicCommitBackend,
    LogBackend,
    TaskCommitBackend,
    TaskTransaction,
)
from commit_protocol.messages import TaskCommit
from commit_protocol.naming import (
    TASK_SEPARATOR,
    driver_transactional_id,
    is_task_transactional_id,
    task_transactional_id,
)
from txn_log.errors import ConfigError, InvalidTxnStateError

Offsets = Sequence[tuple[str, int, int]]
"""Consumed source offsets ``(topic, partition, next offset)``."""


@dataclass(frozen=True)
class SinkIdentity:
    """Who commits: the ledger key, the transactional-id prefix, the offsets' group id, and
    where a sink that began afresh (one ``df.write``) starts in a scanned ledger
    (``LogBackend.ledger_end`` then; 0: anywhere)."""

    sink_id: str
    prefix: str
    group_id: str | None = None
    ledger_since: int = 0


@dataclass(frozen=True)
class TaskSettings:
    """How task transactions are opened: ``transaction.timeout.ms``, ``compression.type``,
    ``batch.size`` and ``buffer.memory`` (the producer's, as Kafka's)."""

    transaction_timeout_ms: int = 900_000
    compression: str = "none"
    batch_size: int = 1_000_000
    buffer_memory: int = 32 * 1024 * 1024


class SinkCommitProtocol:
    """The commit protocol of one sink on one backend (see the module doc):
    ``SinkCommitProtocol(backend, sink, settings)`` is an ``AtomicBatchCommit`` or a
    ``PerTaskCommit``, as the backend's class calls for; each overrides the four steps below
    the base class leaves to it (``begin_task``, ``prepare_task``, ``commit``, ``abort``)."""

    backend: LogBackend

    def __new__(
        cls, backend: LogBackend, sink: SinkIdentity, settings: TaskSettings = TaskSettings()
    ) -> SinkCommitProtocol:
        kind = protocol_of(backend)
        if cls is not SinkCommitProtocol and kind is not cls:
            raise ConfigError(
                f"{cls.__name__} does not run on {type(backend).__name__}, whose commit "
                f"protocol is {kind.__name__}"
            )
        return object.__new__(kind)

    def __init__(
        self, backend: LogBackend, sink: SinkIdentity, settings: TaskSettings = TaskSettings()
    ) -> None:
        self.backend = backend
        self.sink = sink
        self.settings = settings

    # --- executor side -------------------------------------------------------------------------

    def begin_task(self, batch_id: int, task_id: int) -> TaskTransaction | None:
        """The task's fresh transaction, or None when the ledger says the task's output for
        the batch committed already."""
        raise NotImplementedError

    def prepare_task(
        self, transaction: TaskTransaction, batch_id: int, task_id: int, attempt: int
    ) -> TaskCommit:
        """Make the task's writes durable and describe them for the driver."""
        raise NotImplementedError

    def skipped_task(self, batch_id: int, task_id: int, attempt: int) -> TaskCommit:
        """The message of a task that found its output already committed."""
        tid = task_transactional_id(self.sink.prefix, task_id)
        return TaskCommit(self.sink.sink_id, batch_id, task_id, attempt, tid, skipped=True)

    def _open_transaction(self, task_id: int) -> TaskTransaction:
        """The task's transaction, fencing every earlier attempt of the task (C-24)."""
        settings = self.settings
        return self.backend.begin_transaction(
            task_transactional_id(self.sink.prefix, task_id),
            settings.transaction_timeout_ms,
            settings.compression,
            batch_size=settings.batch_size,
            buffer_memory=settings.buffer_memory,
        )

    def _message(
        self,
        transaction: TaskTransaction,
        batch_id: int,
        task_id: int,
        attempt: int,
        *,
        committed: bool = False,
    ) -> TaskCommit:
        return TaskCommit(
            self.sink.sink_id,
            batch_id,
            task_id,
            attempt,
            transaction.transactional_id,
            transaction.producer_id,
            transaction.producer_epoch,
            transaction.written(),
            committed=committed,
        )

    # --- driver side ---------------------------------------------------------------------------

    def check_prefix(self) -> None:
        """Raise ConfigError if the ledger's last batch of this sink committed task
        transactions of another prefix (the sink restarted under a changed
        ``transactional.id.prefix``). Each task fences its earlier attempts by its own
        transactional id only (C-24): an attempt of the unfinished batch left open under the
        old prefix would be fenced by nobody, and could still commit beside the re-run's output
        where tasks commit themselves (the Kafka backend), or hold the last stable offset until
        its timeout (the embedded one). A sink the ledger does not know, or whose last batch
        committed no task transaction, passes: nothing shows which prefix its tasks used."""
        entry = self.backend.last_batch(self.sink.sink_id)
        if entry is None:
            return
        prefix = self.sink.prefix
        foreign = [tid for tid in entry.transactions if not is_task_transactional_id(prefix, tid)]
        if not foreign:
            return
        old = sorted({tid.rpartition(TASK_SEPARATOR)[0] for tid in foreign})
        raise ConfigError(
            f"transactional.id.prefix {prefix!r} is not the prefix sink {self.sink.sink_id!r} "
            f"committed under: its batch {entry.batch_id} committed the task transactions "
            f"{', '.join(repr(t) for t in sorted(foreign)[:3])}"
            f"{' ...' if len(foreign) > 3 else ''} (prefix {' / '.join(map(repr, old))}). A "
            "task fences its earlier attempts by its own transactional id only, so an attempt "
            "left open under the old prefix could still commit beside this run's output: set "
            f"transactional.id.prefix back to {old[0]!r} (or unset it if that is the default "
            "txnlog-<query id>), or start the query from a new checkpoint"
        )

    def commit(
        self, batch_id: int, messages: Sequence[TaskCommit | None], offsets: Offsets = ()
    ) -> bool:
        """Commit the batch; False (a no-op) when it already committed.

        ``offsets`` are the consumed source offsets, committed under the sink's group id in
        the same step. Raises (nothing committed, or the batch not recorded) on a missing or
        foreign message.
        """
        raise NotImplementedError

    def abort(self, batch_id: int, messages: Sequence[TaskCommit | None]) -> list[str]:
        """Abort what the batch's tasks left open; the aborted (or fenced) transactional ids."""
        raise NotImplementedError

    def _group_offsets(self, offsets: Offsets) -> tuple[str | None, Offsets]:
        """The group id and offsets to commit: none without offsets or without a group."""
        group_id = self.sink.group_id if offsets else None
        return group_id, offsets if group_id else ()

    def _checked(self, batch_id: int, messages: Sequence[TaskCommit | None]) -> list[TaskCommit]:
        where = f"batch {batch_id} of sink {self.sink.sink_id!r}"
        commits: list[TaskCommit] = []
        seen: dict[str, TaskCommit] = {}
        for index, message in enumerate(messages):
            if message is None:
                raise InvalidTxnStateError(
                    f"{where}: task message {index} is missing (a task failed); abort the "
                    "batch instead; nothing committed"
                )
            if (message.sink_id, message.batch_id) != (self.sink.sink_id, batch_id):
                raise InvalidTxnStateError(
                    f"{where}: got the message of {message.describe()} of sink "
                    f"{message.sink_id!r}; nothing committed"
                )
            earlier = seen.get(message.transactional_id)
            if earlier is not None:
                raise InvalidTxnStateError(
                    f"{where}: two messages for transactional id "
                    f"{message.transactional_id!r} ({earlier.describe()} and "
                    f"{message.describe()}); nothing committed"
                )
            seen[message.transactional_id] = message
            commits.append(message)
        return commits


def protocol_of(backend: LogBackend) -> type[SinkCommitProtocol]:
    """The commit protocol that ``backend``'s class calls for."""
    if isinstance(backend, AtomicCommitBackend):
        return AtomicBatchCommit
    if isinstance(backend, TaskCommitBackend):
        return PerTaskCommit
    raise ConfigError(
        f"{type(backend).__name__} is neither an AtomicCommitBackend nor a TaskCommitBackend "
        "(commit_protocol.backend): no sink commit protocol runs on it"
    )


class AtomicBatchCommit(SinkCommitProtocol):
    """Tasks prepare, the driver commits the whole batch atomically (see the module doc)."""

    backend: AtomicCommitBackend

    def begin_task(self, batch_id: int, task_id: int) -> TaskTransaction | None:
        if self.backend.is_batch_committed(self.sink.sink_id, batch_id):
            return None
        return self._open_transaction(task_id)

    def prepare_task(
        self, transaction: TaskTransaction, batch_id: int, task_id: int, attempt: int
    ) -> TaskCommit:
        """Make the task's writes durable; the transaction stays open for the driver."""
        transaction.flush()
        return self._message(transaction, batch_id, task_id, attempt)

    def commit(
        self, batch_id: int, messages: Sequence[TaskCommit | None], offsets: Offsets = ()
    ) -> bool:
        """Commit the batch atomically; False (a no-op) when it already committed. Raises
        (nothing committed) on a missing or foreign message, a skip the ledger does not
        confirm, or a task transaction that was fenced or timed out."""
        commits = self._checked(batch_id, messages)
        written = [c for c in commits if not c.skipped]
        sink_id = self.sink.sink_id
        if len(written) < len(commits) and not self.backend.is_batch_committed(sink_id, batch_id):
            skipped = next(c for c in commits if c.skipped)
            raise InvalidTxnStateError(
                f"{skipped.describe()} skipped batch {batch_id} of sink {sink_id!r} as "
                "committed, but the ledger has no such commit; nothing committed"
            )
        group_id, group_offsets = self._group_offsets(offsets)
        committed = self.backend.commit_batch(
            sink_id, batch_id, [c.txn_ref for c in written], group_id, group_offsets
        )
        self.abort_zombies()
        return committed

    def abort(self, batch_id: int, messages: Sequence[TaskCommit | None]) -> list[str]:
        """Abort every task transaction of the batch (and any zombie under the prefix). A
        batch that already committed is left alone: its transactions are no longer open."""
        aborted = [
            message.transactional_id
            for message in messages
            if message is not None
            and not message.skipped
            and self.backend.abort_transaction(message.transactional_id)
        ]
        return sorted(aborted + self.abort_zombies())

    def abort_zombies(self) -> list[str]:
        """Abort open transactions of this sink's tasks: ``<prefix>-<n>`` exactly."""
        prefix = self.sink.prefix
        return [
            tid
            for tid in self.backend.open_transactions(prefix + TASK_SEPARATOR)
            if is_task_transactional_id(prefix, tid) and self.backend.abort_transaction(tid)
        ]


class PerTaskCommit(SinkCommitProtocol):
    """Each task commits its own transaction with its ledger record; the driver records the
    batch (see the module doc)."""

    backend: TaskCommitBackend

    def begin_task(self, batch_id: int, task_id: int) -> TaskTransaction | None:
        transaction = self._open_transaction(task_id)
        # fenced first: no earlier attempt can commit after the ledger was read
        if self._task_committed(batch_id, task_id):
            transaction.abort()
            return None
        return transaction

    def prepare_task(
        self, transaction: TaskTransaction, batch_id: int, task_id: int, attempt: int
    ) -> TaskCommit:
        """Commit the task's writes with its ledger record; the message says ``committed``."""
        self.backend.commit_task(transaction, self.sink.sink_id, batch_id, task_id)
        return self._message(transaction, batch_id, task_id, attempt, committed=True)

    def commit(
        self, batch_id: int, messages: Sequence[TaskCommit | None], offsets: Offsets = ()
    ) -> bool:
        """Record the batch with the group offsets, once every task committed or its skip is
        in the ledger; False (a no-op) when the ledger has the batch. Raises (the batch not
        recorded) otherwise."""
        commits = self._checked(batch_id, messages)
        sink_id = self.sink.sink_id
        for commit in commits:
            if commit.skipped:
                if not self._task_committed(batch_id, commit.task_id):
                    raise InvalidTxnStateError(
                        f"{commit.describe()} skipped batch {batch_id} of sink {sink_id!r} as "
                        "committed, but the ledger has no such commit; batch not recorded"
                    )
            elif not commit.committed:
                raise InvalidTxnStateError(
                    f"{commit.describe()} did not commit its transaction, which this backend "
                    "requires of every task; batch not recorded"
                )
        group_id, group_offsets = self._group_offsets(offsets)
        return self.backend.record_batch(
            sink_id,
            batch_id,
            [c.transactional_id for c in commits if not c.skipped],
            group_id,
            group_offsets,
            driver_transactional_id=driver_transactional_id(self.sink.prefix),
        )

    def abort(self, batch_id: int, messages: Sequence[TaskCommit | None]) -> list[str]:
        """Fence each task (by its message's position, Spark's task partition id) that did
        not commit: its open transaction, if any, is aborted. A committed task cannot be
        undone (a re-run skips it); the ids of tasks without a message are fenced, as the
        cluster cannot list open transactions."""
        ids = [
            task_transactional_id(self.sink.prefix, index)
            if message is None
            else message.transactional_id
            for index, message in enumerate(messages)
            if message is None or not (message.skipped or message.committed)
        ]
        for tid in ids:
            self.backend.fence(tid)
        return sorted(ids)

    def _task_committed(self, batch_id: int, task_id: int) -> bool:
        return self.backend.task_committed(
            self.sink.sink_id, batch_id, task_id, since=self.sink.ledger_since
        )
