"""A reference to one transaction of an atomic commit (DESIGN §4 "Atomic commit").

``TxnRef`` names a transaction by what pins it to one producer instance: its transactional id,
producer id and epoch. A caller that opened transactions in many processes lists them by
``TxnRef`` in ``TransactionCoordinator.commit_transactions`` (``atomic_commit``), and the atomic
commit record (``atomic_commit_format``) stores them; a transaction whose id has since moved to
another producer id or epoch (fenced, timed out) can never be committed by its old reference.
Pure value; immutable.
"""

from __future__ import annotations

from dataclasses import dataclass

from txn_log.coordinator.transaction_metadata import MAX_PRODUCER_EPOCH, MAX_PRODUCER_ID


@dataclass(frozen=True, slots=True)
class TxnRef:
    """One transaction of an atomic commit: its id, producer id and epoch.

    Invariants: the id is not empty; the producer id is in 0..2^63-1 and the epoch in
    0..2^15-1 (the record's int64 and int16), else ValueError.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int

    def __post_init__(self) -> None:
        if (
            not self.transactional_id
            or not 0 <= self.producer_id <= MAX_PRODUCER_ID
            or not 0 <= self.producer_epoch <= MAX_PRODUCER_EPOCH
        ):
            raise ValueError(f"invalid transaction reference {self}")
