"""What one partition remembers about one producer id (P-20): Kafka's ``ProducerStateEntry``.

Both types here are immutable values (STYLE 8). A ``ProducerAppendInfo`` derives a new entry
from the current one with the ``with_*`` methods and the ``ProducerStateManager`` swaps it in
only after the write succeeded (STYLE 3), so a rejected batch can never leave half an update.

Sequences are int32 values that wrap from 2^31 - 1 to 0 (P-12); every sequence arithmetic
here is modulo ``SEQUENCE_MODULUS``. Offsets are absolute log offsets; ``last_offset`` and
``first_offset`` are both *inclusive*.

Not thread-safe on purpose: the values are immutable, and the partition log serialises the
manager that holds them under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from txn_log.record.batch_header import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
)

NUM_BATCHES_TO_RETAIN = 5
"""How many recent batches per producer are kept for de-duplication (Kafka's constant, P-15)."""

SEQUENCE_MODULUS = 1 << 31
"""Sequences live in [0, 2^31): after 2^31 - 1 comes 0 (P-12)."""

NO_COORDINATOR_EPOCH = -1
NO_OFFSET = -1


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping at 2^31 (P-12)."""
    return (sequence + increment) % SEQUENCE_MODULUS


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` wrapping at 2^31 (Kafka's ``decrementSequence``)."""
    return (sequence - decrement) % SEQUENCE_MODULUS


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended data batch, as remembered for de-duplication (P-10 step 5).

    ``last_offset`` is inclusive; ``offset_delta`` = last offset - first offset of the batch
    (its ``last_offset_delta``); ``timestamp`` is the batch's max timestamp in ms.
    """

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        """Sequence of the batch's first record (P-09), wrapping at 2^31 (P-12)."""
        if self.last_seq == NO_SEQUENCE:
            return NO_SEQUENCE
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        """Offset of the batch's first record, inclusive."""
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    """The state of one producer id on one partition (P-20, C-23).

    Invariants: ``batch_metadata`` holds at most ``NUM_BATCHES_TO_RETAIN`` batches, all of
    ``producer_epoch``, oldest first (a new epoch empties it); ``current_txn_first_offset`` is
    the inclusive first offset of the producer's open transaction, or ``None`` when none is
    open (P-25); ``coordinator_epoch`` is the epoch of the last coordinator that wrote a marker
    for this producer (-1 before any, C-23); ``last_timestamp`` drives expiration (P-26).
    An entry with ``producer_epoch == -1`` stands for a producer the partition has never seen.
    """

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: tuple[BatchMetadata, ...] = ()
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int | None = None
    last_timestamp: int = NO_TIMESTAMP

    def __post_init__(self) -> None:
        if len(self.batch_metadata) > NUM_BATCHES_TO_RETAIN:
            raise ValueError(
                f"producer {self.producer_id}: {len(self.batch_metadata)} cached batches, "
                f"at most {NUM_BATCHES_TO_RETAIN} are kept"
            )

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        """The entry of a producer id this partition has no state for (P-10 step 3)."""
        return cls(producer_id)

    @property
    def is_empty(self) -> bool:
        """No data batch of the current epoch is cached (new producer, or just after a bump)."""
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        """First sequence of the oldest cached batch, -1 when none is cached."""
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        """Last sequence of the newest cached batch, -1 when none is cached."""
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        """Inclusive last offset of the newest cached batch, -1 when none is cached."""
        return self.batch_metadata[-1].last_offset if self.batch_metadata else NO_OFFSET

    @property
    def last_offset_delta(self) -> int:
        """``offset_delta`` of the newest cached batch, 0 when none is cached."""
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The cached batch a retried ``header`` duplicates, if any (P-10 step 5, §15.1).

        A duplicate has this entry's epoch and exactly the first and last sequence of one of
        the last ``NUM_BATCHES_TO_RETAIN`` batches; the log answers it with the original
        offsets instead of appending it again.
        """
        if header.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(header.base_sequence, header.last_sequence)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch whose sequences are exactly ``first_seq..last_seq`` (inclusive)."""
        for batch in self.batch_metadata:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def with_batch(self, producer_epoch: int, batch: BatchMetadata) -> ProducerStateEntry:
        """This entry after appending ``batch``; a different epoch first empties the cache."""
        cached = self.batch_metadata if producer_epoch == self.producer_epoch else ()
        cached = (*cached, batch)[-NUM_BATCHES_TO_RETAIN:]
        # built field by field rather than by ``dataclasses.replace``, which looks every
        # field up again (three of these per transactional batch and marker)
        return ProducerStateEntry(
            self.producer_id,
            producer_epoch,
            cached,
            self.coordinator_epoch,
            self.current_txn_first_offset,
            batch.timestamp,
        )

    def with_txn_started(self, first_offset: int) -> ProducerStateEntry:
        """This entry with an open transaction whose first offset (inclusive) is given."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.batch_metadata,
            self.coordinator_epoch,
            first_offset,
            self.last_timestamp,
        )

    def with_txn_ended(
        self, producer_epoch: int, coordinator_epoch: int, timestamp: int
    ) -> ProducerStateEntry:
        """This entry after a COMMIT/ABORT marker (B-01, Kafka's ``update(epoch, coord, ts)``).

        The transaction is closed and the coordinator epoch recorded (C-23); a newer producer
        epoch replaces the stored one and empties the cache, so the next data batch of that
        epoch must start at sequence 0 (P-18, P-19).
        """
        cached = self.batch_metadata if producer_epoch == self.producer_epoch else ()
        return ProducerStateEntry(
            self.producer_id, producer_epoch, cached, coordinator_epoch, None, timestamp
        )
