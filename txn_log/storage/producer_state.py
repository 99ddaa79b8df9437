"""Per-partition producer state: Kafka's ``ProducerStateManager`` (P-20..P-30, B-03, B-04).

Holds producer id -> ``ProducerStateEntry``, the open transactions ordered by first offset
(for the LSO, B-03) and the snapshot files of the partition directory (P-21..P-24).

Offsets: ``map_end_offset`` is *exclusive*: the state reflects every batch below it. A snapshot
named ``N.snapshot`` holds the state at map end offset N. ``first_unstable_offset`` is the
inclusive first offset of the earliest open transaction; the partition's last stable offset is
``min(first_unstable_offset, high watermark)``, and the high watermark when none is open (B-04).

Protocol of one append (STYLE 3, as ``UnifiedLog.append`` does it):

1. ``prepare_update(producer_id, origin)``, then ``append_data_batch`` / ``append_end_txn_marker``
   on the returned ``ProducerAppendInfo``: this validates and changes nothing shared;
2. write the batch to the segment;
3. ``update(append_info)`` and ``update_map_end_offset(next offset)``;
4. for each ``CompletedTxn``: ``last_stable_offset_for(txn)``, write the aborted-index entry
   (aborts only, B-01 step 4), then ``complete_txn(txn)``.

Decision (B-04): this embedded log has no replicas, so Kafka's "completed but not yet
replicated" transactions are not tracked: a transaction stops being unstable at ``complete_txn``.

Expiration (P-26, P-27, G-18). A producer with no open transaction expires once it has been
idle ``producer_id_expiration_ms`` (Kafka's ``producer.id.expiration.ms``, 1 day; decision: not
shortened to the topic's retention.ms as P-26 suggests, because since KIP-360 Kafka keeps the
state of a producer whose records retention deleted, so that its next batch is not refused).
Every process caches this state, so the rule must not depend on when a process last ran its
periodic pass: ``prepare_update`` and ``find_duplicate_batch`` treat an expired entry as absent
(P-28: its next non-zero sequence is then refused as out of order, the false negative G-18
accepts), and ``remove_expired_producers`` only frees memory. Idle time counts from the newest
of the entry's timestamp (Kafka: the batch's max timestamp or the marker's) and the time this
process applied that batch: record timestamps are the client's (CreateTime), and a producer
that writes old timestamps must not expire while it writes. Snapshots store that newest time,
so a reopened partition agrees. A process that learns of a batch late (replays it) may keep
the producer up to that lag longer than the others, and then validates against its true state.

Not thread-safe: the partition log serialises every call under its lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from txn_log.clock import Clock
from txn_log.errors import CorruptSnapshotError, InvalidTxnStateError, StorageError
from txn_log.record.batch_header import NO_PRODUCER_ID, NO_TIMESTAMP, BatchHeader
from txn_log.storage.durable_file import fsync_directory
from txn_log.storage.producer_append_info import (
    AppendOrigin,
    CompletedTxn,
    ProducerAppendInfo,
    TxnMetadata,
)
from txn_log.storage.producer_snapshot import (
    is_snapshot_temp,
    read_snapshot,
    snapshot_file_name,
    snapshot_offset_of,
    write_snapshot,
)
from txn_log.storage.producer_state_entry import BatchMetadata, ProducerStateEntry

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms, 1 day
SNAPSHOTS_TO_KEEP = 2  # P-23: the two newest; decision recorded in §14.7


class ProducerStateManager:
    """The producer id map of one partition and its snapshots in ``partition_dir``."""

    def __init__(
        self,
        partition_dir: Path,
        topic_partition: str,
        *,
        clock: Clock,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        read_only: bool = False,
    ) -> None:
        if producer_id_expiration_ms <= 0:
            raise ValueError(
                f"{topic_partition}: producer_id_expiration_ms must be > 0, "
                f"got {producer_id_expiration_ms}"
            )
        self._dir = partition_dir
        self._read_only = read_only  # never delete or write a file (inspection tools)
        self._topic_partition = topic_partition
        self._clock = clock
        self._expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._applied_ms: dict[int, int] = {}  # producer id -> when its last change was applied
        self._ongoing_txns: dict[int, TxnMetadata] = {}  # first offset -> transaction
        self._snapshots: dict[int, Path] = self._scan_snapshots()
        self._map_end_offset = 0
        self._last_snap_offset = 0

    @property
    def topic_partition(self) -> str:
        return self._topic_partition

    @property
    def producer_id_expiration_ms(self) -> int:
        return self._expiration_ms

    @property
    def map_end_offset(self) -> int:
        """Exclusive offset up to which the log has been applied to this state."""
        return self._map_end_offset

    def update_map_end_offset(self, offset: int) -> None:
        """Record that every batch below ``offset`` (exclusive) is applied."""
        self._map_end_offset = offset

    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """A read-only view of producer id -> entry."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The producer's entry, or None if the partition has no state for it."""
        return self._producers.get(producer_id)

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The cached batch ``header`` is a retry of (answer with its offsets, §15.1), if any;
        never one of an expired producer (P-27)."""
        entry = self._producers.get(header.producer_id)
        if entry is None or self.is_producer_expired(entry, self._clock.time_ms()):
            return None
        return entry.find_duplicate_batch(header)

    # --- the two phases of an append ---------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        """A pending change for ``producer_id``, validated against its current entry.

        An expired entry counts as absent (P-27, module docstring) and is dropped here: that
        changes nothing any validation can observe, so every process decides alike.
        """
        current = self._producers.get(producer_id)
        if current is not None and self.is_producer_expired(current, self._clock.time_ms()):
            self._forget_producer(producer_id)
            current = None
        current = current or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(self._topic_partition, producer_id, current, origin)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Install a validated change once its batches are in the log (phase 2, STYLE 3).

        Raises ValueError if the producer's entry changed since ``prepare_update``: two pending
        changes for one producer would otherwise silently overwrite each other.
        """
        producer_id = append_info.producer_id
        if producer_id == NO_PRODUCER_ID:
            raise ValueError(f"{self._topic_partition}: update for producer id {producer_id}")
        stored = self._producers.get(producer_id)
        if stored is not None and stored is not append_info.current_entry:
            raise ValueError(
                f"{self._topic_partition}: producer {producer_id} changed since this append "
                "was prepared; prepare it again"
            )
        self._producers[producer_id] = append_info.to_entry()
        self._applied_ms[producer_id] = self._clock.time_ms()
        for txn in append_info.started_transactions():
            self._ongoing_txns[txn.first_offset] = txn

    # --- transactions and the LSO ----------------------------------------------------------

    def ongoing_transactions(self) -> list[TxnMetadata]:
        """Open transactions, ordered by first offset (P-25)."""
        return [self._ongoing_txns[offset] for offset in sorted(self._ongoing_txns)]

    def first_unstable_offset(self) -> int | None:
        """Inclusive first offset of the earliest open transaction, None if none (B-03)."""
        return min(self._ongoing_txns, default=None)

    def last_stable_offset_for(self, completed_txn: CompletedTxn) -> int:
        """The LSO to write into the aborted-index entry of ``completed_txn`` (B-10).

        Kafka's ``lastStableOffset(completedTxn)``: the first offset of the earliest open
        transaction of *another* producer, else ``completed_txn.last_offset + 1``. Call it
        before ``complete_txn``.
        """
        for txn in self.ongoing_transactions():
            if txn.producer_id != completed_txn.producer_id:
                return txn.first_offset
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        """Remove a transaction closed by a marker from the open ones (B-01 step 5)."""
        txn = self._ongoing_txns.get(completed_txn.first_offset)
        if txn is None or txn.producer_id != completed_txn.producer_id:
            raise InvalidTxnStateError(
                f"{self._topic_partition}: cannot complete the transaction of producer "
                f"{completed_txn.producer_id} from offset {completed_txn.first_offset} to "
                f"{completed_txn.last_offset}: no such transaction is open (open: "
                f"{self.ongoing_transactions()})"
            )
        del self._ongoing_txns[completed_txn.first_offset]

    # --- expiration (P-26, P-27) -------------------------------------------------------------

    def is_producer_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """Idle at least the expiration time and with no open transaction (P-26)."""
        return (
            entry.current_txn_first_offset is None
            and now_ms - self.last_active_ms(entry) >= self._expiration_ms
        )

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget expired producers (P-27: their batches stay in the log); returns their ids.

        Validation already treats them as absent; this frees their memory (the periodic pass).
        """
        now = self._clock.time_ms() if now_ms is None else now_ms
        expired = [pid for pid, e in self._producers.items() if self.is_producer_expired(e, now)]
        for producer_id in expired:
            self._forget_producer(producer_id)
        return expired

    def last_active_ms(self, entry: ProducerStateEntry) -> int:
        """When ``entry`` was last active: its timestamp or when this process applied it,
        whichever is newer; what expiration counts from and what a snapshot stores."""
        return max(entry.last_timestamp, self._applied_ms.get(entry.producer_id, NO_TIMESTAMP))

    def _forget_producer(self, producer_id: int) -> None:
        del self._producers[producer_id]
        self._applied_ms.pop(producer_id, None)

    # --- truncation and recovery (P-24) ------------------------------------------------------

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None
    ) -> int:
        """Fit the state to the log ``[log_start_offset, log_end_offset)``; returns where to replay.

        Snapshots above the log end or at/below the log start are deleted (Kafka's rule). If
        the state does not end at ``log_end_offset`` it is rebuilt from the newest readable
        snapshot (corrupt ones are deleted, falling back to older ones) or, with none left,
        empty from ``log_start_offset``. The caller replays the log with origin REPLAY from the
        returned offset (inclusive) to the log end, then calls ``update_map_end_offset``.
        """
        for offset in sorted(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._delete_snapshot(offset)
        if log_end_offset != self._map_end_offset:
            self._clear()
            now = self._clock.time_ms() if now_ms is None else now_ms
            self._load_from_snapshot(log_start_offset, now)
        else:
            self._map_end_offset = max(self._map_end_offset, log_start_offset)
            latest = self.latest_snapshot_offset()
            self._last_snap_offset = log_start_offset if latest is None else latest
        return self._map_end_offset

    def reload_from_snapshots(self, log_start_offset: int, log_end_offset: int) -> int:
        """Rebuild the state after the log start moved past ``map_end_offset`` (another
        process's retention deleted segments this process had not applied yet).

        Loads the newest readable snapshot in [log_start_offset, log_end_offset], rescanning the
        directory for snapshots other processes wrote, else starts empty at the log start;
        returns where to replay from (inclusive). Unlike ``truncate_and_reload`` it deletes no
        file, so a lock-free reader may call it.
        """
        self._clear()
        self._snapshots = {
            offset: path
            for offset, path in self._scan_snapshots(remove_leftovers=False).items()
            if log_start_offset <= offset <= log_end_offset
        }
        now = self._clock.time_ms()
        for offset in sorted(self._snapshots, reverse=True):
            try:
                entries = read_snapshot(self._snapshots[offset])
            except (CorruptSnapshotError, FileNotFoundError):
                continue  # the writer that opens the partition next deletes it (P-24)
            self._load_entries(entries, now)
            self._map_end_offset = self._last_snap_offset = offset
            return offset
        self._map_end_offset = self._last_snap_offset = log_start_offset
        return log_start_offset

    def _clear(self) -> None:
        self._producers.clear()
        self._applied_ms.clear()
        self._ongoing_txns.clear()

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self._snapshots:
            offset = max(self._snapshots)
            try:
                entries = read_snapshot(self._snapshots[offset])
            except (CorruptSnapshotError, FileNotFoundError):
                self._delete_snapshot(offset)  # P-24: fall back to the previous snapshot
                continue
            self._load_entries(entries, now_ms)
            self._map_end_offset = self._last_snap_offset = offset
            return
        self._map_end_offset = self._last_snap_offset = log_start_offset

    def _load_entries(self, entries: list[ProducerStateEntry], now_ms: int) -> None:
        for entry in entries:
            if not self.is_producer_expired(entry, now_ms):
                self._load_entry(entry)

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:  # P-25: rebuild the open transactions
            txn = TxnMetadata(entry.producer_id, entry.current_txn_first_offset)
            self._ongoing_txns[txn.first_offset] = txn

    # --- snapshot files (P-21..P-23) ---------------------------------------------------------

    def take_snapshot(self) -> Path | None:
        """Write the state at ``map_end_offset`` atomically, keep the two newest (P-23).

        Does nothing and returns None when no batch was applied since the last snapshot.
        """
        if self._map_end_offset <= self._last_snap_offset:
            return None
        path = self._dir / snapshot_file_name(self._map_end_offset)
        write_snapshot(path, map(self._with_last_active, self._producers.values()))
        self._snapshots[self._map_end_offset] = path
        self._last_snap_offset = self._map_end_offset
        for offset in sorted(self._snapshots)[:-SNAPSHOTS_TO_KEEP]:
            self._delete_snapshot(offset)
        return path

    def _with_last_active(self, entry: ProducerStateEntry) -> ProducerStateEntry:
        """``entry`` stamped with when it was last active, as a snapshot stores it."""
        last_active = self.last_active_ms(entry)
        if last_active == entry.last_timestamp:
            return entry
        return replace(entry, last_timestamp=last_active)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshot files named below ``offset`` (exclusive)."""
        for snapshot_offset in sorted(self._snapshots):
            if snapshot_offset < offset:
                self._delete_snapshot(snapshot_offset)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots, default=None)

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        return sorted(self._snapshots)

    def _delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is None or self._read_only:
            return
        try:
            path.unlink(missing_ok=True)
            fsync_directory(self._dir)
        except OSError as error:
            raise StorageError(f"{self._topic_partition}: cannot delete {path}: {error}") from error

    def _scan_snapshots(self, *, remove_leftovers: bool = True) -> dict[int, Path]:
        """Snapshot files in the directory; leftovers of an interrupted write are removed
        (only under the partition lock, which every snapshot writer holds)."""
        snapshots: dict[int, Path] = {}
        if not self._dir.is_dir():
            return snapshots
        for path in self._dir.iterdir():
            if is_snapshot_temp(path.name):
                if remove_leftovers and not self._read_only:
                    path.unlink(missing_ok=True)
                continue
            offset = snapshot_offset_of(path)
            if offset is not None and path.is_file():
                snapshots[offset] = path
        return snapshots
