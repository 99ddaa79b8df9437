"""Validation of one producer's appends to one partition: Kafka's ``ProducerAppendInfo``.

A ``ProducerAppendInfo`` starts from the producer's current (immutable) ``ProducerStateEntry``,
checks each batch or marker against the state *as updated by the previous ones*, and builds the
next entry. Nothing shared changes here: the ``ProducerStateManager`` installs ``to_entry()``
only after the batch reached the log (STYLE 3). A rejected batch leaves this object as it was.

Rules for a data batch from a client (P-10 steps 3-6, §15 behaviour 2):

    stored state              batch                               outcome
    ------------------------  ----------------------------------  ---------------------------
    unknown producer          seq == 0                            insert
    unknown producer          seq != 0                            OutOfOrderSequenceError
    epoch e                   epoch < e                           InvalidProducerEpochError
    epoch e, last seq s       epoch e, seq == s + 1 (mod 2^31)    append (P-12: 2^31-1 -> 0)
    epoch e, last seq s       epoch e, seq behind s + 1           DuplicateSequenceError *
    epoch e, last seq s       epoch e, seq ahead of s + 1         OutOfOrderSequenceError
    epoch e, no cached batch  epoch e, seq != 0 (after a bump)    OutOfOrderSequenceError
    epoch e                   epoch > e, seq == 0                 append, epoch := new
    epoch e                   epoch > e, seq != 0                 OutOfOrderSequenceError

    * a retry of one of the last five batches is found first by ``find_duplicate_batch`` and
      answered with its original offsets; only older ones reach this error.

"Behind" and "ahead" are serial-number comparisons modulo 2^31 (RFC 1982 style): a sequence up
to 2^30 - 1 past the expected one is a gap, anything further round the circle is behind it.

Transactions: the first transactional batch while none is open starts one at the batch's base
offset; a non-transactional batch while one is open is InvalidTxnStateError. Markers (B-01):
an older producer epoch is InvalidProducerEpochError, an older coordinator epoch
TransactionCoordinatorFencedError (C-23); a marker with no open transaction (a duplicate,
C-20) is harmless and completes nothing.

Origins, as in Kafka: CLIENT is fully validated, COORDINATOR (batches the coordinator writes
itself, e.g. transactional offset commits, O-04) checks epochs but carries no sequences, and
REPLAY (rebuilding state from the log, P-24) applies what the log holds without any check,
because the log is the source of truth (P-20).

Not thread-safe; used under the partition log's lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from txn_log.errors import (
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from txn_log.record.batch_header import NO_PRODUCER_EPOCH, BatchHeader
from txn_log.storage.producer_state_entry import (
    SEQUENCE_MODULUS,
    BatchMetadata,
    ProducerStateEntry,
    increment_sequence,
)

_HALF_SEQUENCE_SPACE = SEQUENCE_MODULUS // 2


class AppendOrigin(Enum):
    """Where an append comes from, which decides how much is validated (Kafka's enum)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLAY = "replay"


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """A transaction that started in this append: producer and first offset (inclusive)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction closed by a marker (B-01): offsets inclusive, ``last_offset`` = the marker.

    ``last_offset`` is the offset of the COMMIT/ABORT control batch, as Kafka writes it into
    the aborted-transaction index (B-10).
    """

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerAppendInfo:
    """The pending change of one producer's state on one partition (validate, then change)."""

    def __init__(
        self,
        topic_partition: str,
        producer_id: int,
        current_entry: ProducerStateEntry,
        origin: AppendOrigin,
    ) -> None:
        if current_entry.producer_id != producer_id:
            raise ValueError(
                f"{topic_partition}: state of producer {current_entry.producer_id} given "
                f"for producer {producer_id}"
            )
        self._topic_partition = topic_partition
        self._producer_id = producer_id
        self._current_entry = current_entry
        self._origin = origin
        self._updated_entry = current_entry
        self._transactions: list[TxnMetadata] = []

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def origin(self) -> AppendOrigin:
        return self._origin

    @property
    def current_entry(self) -> ProducerStateEntry:
        """The entry this append info was prepared from (what the manager must still hold)."""
        return self._current_entry

    def to_entry(self) -> ProducerStateEntry:
        """The producer's entry after every batch and marker accepted so far."""
        return self._updated_entry

    def started_transactions(self) -> tuple[TxnMetadata, ...]:
        """Transactions opened by the accepted batches, in offset order."""
        return tuple(self._transactions)

    # --- data batches ----------------------------------------------------------------------

    def append_data_batch(self, header: BatchHeader, *, base_offset: int | None = None) -> None:
        """Validate a data batch of this producer and apply it to the pending entry.

        ``base_offset`` is the batch's assigned first offset (inclusive) when ``header`` does
        not carry it yet; by default ``header.base_offset``. Raises the errors of the module
        table; on any error nothing changes.
        """
        first_offset = header.base_offset if base_offset is None else base_offset
        self._check_data_header(header, first_offset)
        entry = self._updated_entry
        if self._origin is not AppendOrigin.REPLAY:
            self._check_producer_epoch(header.producer_epoch, first_offset)
        if self._origin is AppendOrigin.CLIENT:
            self._check_sequence(header.producer_epoch, header.base_sequence, first_offset)
        if entry.current_txn_first_offset is not None and not header.is_transactional:
            raise InvalidTxnStateError(
                f"{self._where(first_offset)}: expected a transactional batch, since the "
                f"transaction opened at offset {entry.current_txn_first_offset} is still open, "
                "but got a non-transactional one"
            )
        batch = BatchMetadata(
            last_seq=header.last_sequence,
            last_offset=first_offset + header.last_offset_delta,
            offset_delta=header.last_offset_delta,
            timestamp=header.max_timestamp,
        )
        updated = entry.with_batch(header.producer_epoch, batch)
        if entry.current_txn_first_offset is None and header.is_transactional:
            updated = updated.with_txn_started(first_offset)
            self._transactions.append(TxnMetadata(self._producer_id, first_offset))
        self._updated_entry = updated

    def _check_data_header(self, header: BatchHeader, first_offset: int) -> None:
        if header.is_control:
            raise InvalidRecordError(
                f"{self._where(first_offset)}: a control batch is not a data batch; "
                "markers go through append_end_txn_marker"
            )
        if header.producer_id != self._producer_id:
            raise ValueError(
                f"{self._where(first_offset)}: batch carries producer id {header.producer_id}"
            )

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self._updated_entry.producer_epoch
        if producer_epoch < current:
            raise InvalidProducerEpochError(
                f"{self._where(offset)}: epoch {producer_epoch} is older than the stored "
                f"epoch {current} (expected >= {current})"
            )

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        entry = self._updated_entry
        if entry.producer_epoch == NO_PRODUCER_EPOCH or producer_epoch != entry.producer_epoch:
            # P-10 step 3 (unknown producer, P-28) and step 6 (newer epoch): only 0 may start.
            if first_seq != 0:
                known = (
                    "unknown producer"
                    if entry.producer_epoch == NO_PRODUCER_EPOCH
                    else (f"new epoch {producer_epoch} after stored epoch {entry.producer_epoch}")
                )
                raise OutOfOrderSequenceError(
                    f"{self._where(offset)}: {known} must start at sequence 0, "
                    f"got sequence {first_seq} at epoch {producer_epoch}"
                )
            return
        last_seq = entry.last_seq  # -1 once a bump emptied the cache: 0 is due next
        expected = increment_sequence(last_seq, 1)
        if first_seq == expected:
            return
        if not entry.is_empty and (first_seq - expected) % SEQUENCE_MODULUS >= _HALF_SEQUENCE_SPACE:
            raise DuplicateSequenceError(
                f"{self._where(offset)}: sequence {first_seq} at epoch {producer_epoch} is a "
                f"duplicate older than the last cached batches (expected {expected}, last "
                f"sequence {last_seq})"
            )
        raise OutOfOrderSequenceError(
            f"{self._where(offset)}: out-of-order sequence {first_seq} at epoch "
            f"{producer_epoch}: expected {expected} (last sequence {last_seq})"
        )

    # --- transaction markers -----------------------------------------------------------------

    def append_end_txn_marker(
        self,
        control_type_is_commit: bool,
        producer_epoch: int,
        coordinator_epoch: int,
        marker_offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        """Validate a COMMIT/ABORT marker at ``marker_offset`` and close the transaction.

        Returns the completed transaction, or None when none was open (a duplicate marker,
        C-20, or a marker for a producer new to this partition, P-19): harmless, and nothing
        goes into the LSO or the aborted-transaction index for it.
        """
        entry = self._updated_entry
        if self._origin is not AppendOrigin.REPLAY:
            self._check_producer_epoch(producer_epoch, marker_offset)
            if coordinator_epoch < entry.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"{self._where(marker_offset)}: marker from coordinator epoch "
                    f"{coordinator_epoch} (zombie), expected >= {entry.coordinator_epoch}, the "
                    f"epoch of the last coordinator that wrote a marker; producer epoch "
                    f"{producer_epoch}"
                )
        completed = None
        if entry.current_txn_first_offset is not None:
            completed = CompletedTxn(
                producer_id=self._producer_id,
                first_offset=entry.current_txn_first_offset,
                last_offset=marker_offset,
                is_aborted=not control_type_is_commit,
            )
        self._updated_entry = entry.with_txn_ended(producer_epoch, coordinator_epoch, timestamp)
        return completed

    def _where(self, offset: int) -> str:
        return f"producer {self._producer_id} on {self._topic_partition} at offset {offset}"

    def __repr__(self) -> str:
        entry = self._updated_entry
        return (
            f"ProducerAppendInfo(producer_id={self._producer_id}, origin={self._origin.name}, "
            f"producer_epoch={entry.producer_epoch}, last_seq={entry.last_seq}, "
            f"current_txn_first_offset={entry.current_txn_first_offset}, "
            f"started_transactions={self._transactions})"
        )
