"""Committing many transactions atomically, under a ledger key (DESIGN §4 "Atomic commit").

A caller that opened transactions in many processes (each its own producer instance, left open
and durable) commits them as one, together with consumer-group offsets: the coordinator appends
one state-log batch holding an atomic commit record in PREPARE_COMMIT (``atomic_commit_format``)
and each listed ONGOING transaction's own PREPARE_COMMIT. That append is the commit point of all
of them (C-08): recovery rolls every listed transaction forward, commits the offsets and writes
the record's COMPLETE_COMMIT (C-22, T11); before it, nothing is committed.

The ledger makes the commit idempotent. Its key is opaque to the engine, the caller's name for
a sequence of commits; each commit carries a ``sequence`` that only grows per key, and the
newest record per key is the ledger: a sequence at or below the last recorded one has
committed, and committing it again is a no-op. What keys and sequences mean is the caller's
business (the embedded Spark backend is one such caller, in ``commit_protocol``).

This module holds the rules and the replayed ledgers; it is pure (no I/O, no clock, no locks).
``TransactionCoordinator.commit_transactions`` holds the coordinator lock, writes, and rolls
forward, exactly as it does for a single transaction (C-19).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.state_log_format import StateLogEntry, TransactionLogEntry
from txn_log.coordinator.transaction_metadata import TransactionMetadata
from txn_log.coordinator.transaction_state import TransactionState, state_name
from txn_log.coordinator.txn_ref import TxnRef
from txn_log.errors import InvalidProducerIdMappingError, InvalidTxnStateError, ProducerFencedError

MetadataLookup = Callable[[str], TransactionMetadata | None]
"""The coordinator's newest metadata of a transactional id (``CoordinatorState.metadata``)."""


class TxnIdentity(Protocol):
    """What names one transaction of an atomic commit; any value with these attributes."""

    @property
    def transactional_id(self) -> str: ...

    @property
    def producer_id(self) -> int: ...

    @property
    def producer_epoch(self) -> int: ...


def refs_of(transactions: Iterable[TxnIdentity]) -> tuple[TxnRef, ...]:
    """The record's references (a ``TxnRef`` as it is); ValueError for an empty id or an id
    or epoch out of range."""
    return tuple(
        t if isinstance(t, TxnRef) else TxnRef(t.transactional_id, t.producer_id, t.producer_epoch)
        for t in transactions
    )


def check_member(
    metadata: TransactionMetadata | None, ledger_key: str, sequence: int, ref: TxnRef
) -> TransactionMetadata:
    """The metadata of ``ref`` if it can join the commit: still mapped to the listed producer
    id and epoch, and ONGOING (or EMPTY: a transaction that wrote nothing). Otherwise the
    typed error naming the transaction: nothing is committed."""
    where = f"sequence {sequence} of ledger {ledger_key!r}: transaction {ref.transactional_id!r}"
    if metadata is None:
        raise InvalidProducerIdMappingError(f"{where} is unknown to the coordinator")
    if (metadata.producer_id, metadata.producer_epoch) != (ref.producer_id, ref.producer_epoch):
        raise ProducerFencedError(
            f"{where} was written by producer {ref.producer_id} epoch {ref.producer_epoch}, "
            f"but the id now belongs to producer {metadata.producer_id} epoch "
            f"{metadata.producer_epoch}: it was fenced or timed out; nothing committed"
        )
    if metadata.state not in (TransactionState.ONGOING, TransactionState.EMPTY):
        raise InvalidTxnStateError(
            f"{where} is {state_name(metadata.state)}, expected Ongoing (or Empty for a "
            "transaction that wrote nothing); nothing committed"
        )
    return metadata


def prepare_commit(
    ledger_key: str,
    sequence: int,
    refs: tuple[TxnRef, ...],
    metadata: MetadataLookup,
    group_id: str | None,
    offsets: Sequence[tuple[str, int, int]],
    now_ms: int,
) -> list[StateLogEntry]:
    """The entries whose single append is the commit point: the PREPARE_COMMIT record first,
    then each ONGOING member's own PREPARE_COMMIT. Raises (nothing to write) if a member cannot
    join (``check_member``)."""
    members = [check_member(metadata(r.transactional_id), ledger_key, sequence, r) for r in refs]
    prepared = [
        md.prepare_end_txn(md.producer_id, md.producer_epoch, True, now_ms)
        for md in members
        if md.state is TransactionState.ONGOING
    ]
    entry = AtomicCommitEntry(
        ledger_key,
        sequence,
        TransactionState.PREPARE_COMMIT,
        refs,
        group_id,
        tuple(offsets),
        now_ms,
    )
    return [entry, *(TransactionLogEntry(md.transactional_id, md) for md in prepared)]


def completed(entry: AtomicCommitEntry, now_ms: int) -> AtomicCommitEntry:
    """The COMPLETE_COMMIT record that ends the roll-forward of ``entry``."""
    return dataclasses.replace(entry, status=TransactionState.COMPLETE_COMMIT, timestamp_ms=now_ms)


class Ledgers:
    """The newest atomic commit record of every ledger key, replayed from the state log.

    Invariant: per key, sequences never go down, and a sequence never goes back from
    COMPLETE_COMMIT to PREPARE_COMMIT; ``regression`` names an entry that would break it (the
    log is then corrupt, C-22). Not thread-safe (the coordinator lock guards it); pure.
    """

    def __init__(self) -> None:
        self._entries: dict[str, AtomicCommitEntry] = {}

    def regression(self, entry: AtomicCommitEntry) -> str | None:
        """Why applying ``entry`` would move its ledger backwards, or None if it would not."""
        previous = self._entries.get(entry.ledger_key)
        if previous is None or not (
            entry.sequence < previous.sequence
            or (
                entry.sequence == previous.sequence
                and entry.is_prepared
                and not previous.is_prepared
            )
        ):
            return None
        return (
            f"ledger {entry.ledger_key!r}: sequence {entry.sequence} "
            f"({state_name(entry.status)}) follows sequence {previous.sequence} "
            f"({state_name(previous.status)}); sequences only grow"
        )

    def apply(self, entry: AtomicCommitEntry) -> None:
        """Record ``entry`` as its ledger's newest (the caller checked ``regression``)."""
        self._entries[entry.ledger_key] = entry

    def entry(self, ledger_key: str) -> AtomicCommitEntry | None:
        """The newest record of ``ledger_key``."""
        return self._entries.get(ledger_key)

    def entries(self) -> tuple[AtomicCommitEntry, ...]:
        """The newest record of every ledger, sorted by key."""
        return tuple(entry for _, entry in sorted(self._entries.items()))

    def last_sequence(self, ledger_key: str) -> int | None:
        """The highest sequence ``ledger_key`` committed, or ``None`` if it never committed."""
        entry = self._entries.get(ledger_key)
        return None if entry is None else entry.sequence

    def has(self, ledger_key: str, sequence: int) -> bool:
        """Whether ``sequence`` of ``ledger_key`` committed.

        The PREPARE_COMMIT record is the commit point, so a prepared commit counts. Sequences
        of a ledger only grow, so every sequence at or below the last recorded one counts as
        committed: committing it again would commit its transactions' work twice.
        """
        last = self.last_sequence(ledger_key)
        return last is not None and sequence <= last

    def pending(self) -> tuple[AtomicCommitEntry, ...]:
        """Records in PREPARE_COMMIT without their COMPLETE_COMMIT, sorted by key (T11)."""
        return tuple(e for e in self.entries() if e.is_prepared)

    def pending_for(self, metadata: TransactionMetadata) -> AtomicCommitEntry | None:
        """The PREPARE_COMMIT record that lists this transaction with its current producer id
        and epoch: its commit point has passed, so it must never be aborted."""
        for entry in self._entries.values():
            if entry.is_prepared and any(
                ref.transactional_id == metadata.transactional_id
                and ref.producer_id == metadata.producer_id
                and ref.producer_epoch == metadata.producer_epoch
                for ref in entry.transactions
            ):
                return entry
        return None
