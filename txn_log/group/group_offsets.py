"""The group offset store over ``__consumer_offsets`` (§5 of the checklist: O-01..O-07).

Its records are Kafka's own offset-commit layout (``group_offsets_format``: OffsetCommitKey v1,
OffsetCommitValue v3), so Kafka's tools read them, and what they may hold is validated there,
before anything is written or registered with the coordinator (STYLE 3).

Plain commits are ordinary appends. Transactional commits (``send_offsets_to_transaction``)
are appended as *transactional* batches of the committing producer (origin COORDINATOR: epoch
checked, no sequence, O-03), so they become visible exactly when the transaction's COMMIT
marker lands and never after an ABORT (O-04, O-05).

Reading is the group coordinator's job, not a consumer's: ``GroupOffsetStore`` reads the
partition up to its *log end*, control batches included, and keeps the transactional offsets
pending per producer id until that producer's marker (``group_metadata``), as Kafka's group
coordinator does. It does not stop at the last stable offset: that bound (B-05) is for
read_committed consumers of a partition, and applied here it would let one group's open
transaction hide every offset committed after it, by any group, until that transaction ends.

Start-up from a snapshot (DESIGN §2): the first catch-up of a store loads the newest valid
group offset snapshot (``state_snapshot``, kind GROUP_OFFSETS: every materialized record, with
its log offset, deletions included, and every producer's pending transactional records) and
reads only the partition after it; a bad or stale snapshot falls back to an older one or to the
start. A writable store that has read ``snapshot_interval_offsets`` offsets past the newest
snapshot writes a new one, if it gets the snapshot lock at once (``group-offsets.lock`` in the
log directory: a reader never waits for it), after an fsync of the partition.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from txn_log.errors import CorruptRecordError, GroupIdNotFoundError, TxnLogError
from txn_log.file_lock import FileLock
from txn_log.group.group_activity import GroupActivity
from txn_log.group.group_metadata import (
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupOffsetEntry,
)
from txn_log.group.group_metadata import OffsetAndMetadata as OffsetAndMetadata  # exported here
from txn_log.group.group_offsets_format import (
    decode_record,
    encode_key,
    encode_value,
    normalize_offsets,
    validate_group_id,
)
from txn_log.log_dir.log_manager import LogManager
from txn_log.record.batch_header import BatchHeader, is_crc_valid
from txn_log.record.control import ControlType
from txn_log.storage.partition_reader import PartitionReader
from txn_log.storage.producer_append_info import AppendOrigin
from txn_log.storage.replay import read_control_record
from txn_log.storage.state_snapshot import (
    SnapshotKind,
    SnapshotRecord,
    StateSnapshot,
    StateSnapshotDir,
)
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

OFFSETS_PARTITION = TopicPartition(CONSUMER_OFFSETS_TOPIC, 0)
DEFAULT_SNAPSHOT_INTERVAL_OFFSETS = 2000
"""A new group offset snapshot once the partition has this many offsets past the newest one."""
SNAPSHOT_LOCK_FILE = "group-offsets.lock"


# --- the store -------------------------------------------------------------------------------


class GroupOffsetStore:
    """Reads and writes group offsets of one log, in ``log_manager``'s offsets partition.

    Thread-safe: one mutex guards the cache and its catch-up. Process-safe like every reader:
    it takes no lock, and reads only whole batches below the partition's log end, so it sees a
    prefix of what other processes appended and catches up on the next call (DESIGN §3).
    """

    def __init__(
        self,
        log_manager: LogManager,
        *,
        snapshot_interval_offsets: int = DEFAULT_SNAPSHOT_INTERVAL_OFFSETS,
    ) -> None:
        self._log = log_manager
        self._mutex = threading.Lock()
        self._applied = 0  # offsets partition position read so far (exclusive)
        self._groups = GroupMetadata()
        self.snapshot_interval_offsets = snapshot_interval_offsets
        self._snapshots: StateSnapshotDir | None = None  # set by the first catch-up
        self.started_from_snapshot: int | None = None
        """The offset of the snapshot the first catch-up loaded; None: it replayed from 0."""
        self._snapshot_offset = 0  # the newest snapshot this store knows of (exclusive)
        self._snapshot_lock = FileLock(log_manager.path / SNAPSHOT_LOCK_FILE)
        self.activity = GroupActivity(log_manager.path)
        """Which groups have members in some process (``group_activity``)."""

    def close(self) -> None:
        """Release the snapshot lock file's descriptor and any group this process holds."""
        self._snapshot_lock.close()
        self.activity.release_all()

    def snapshot_entries(self) -> list[GroupOffsetEntry]:
        """The whole replayed state, caught up (``GroupMetadata.snapshot_entries``)."""
        with self._mutex:
            self._catch_up()
            return self._groups.snapshot_entries()

    def encode_batch(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        transactional: bool = False,
    ) -> bytes:
        """One batch holding an offset-commit record per partition."""
        from txn_log.record.codec import encode_records

        now = self._log.clock.time_ms()
        records = [
            (encode_key(group_id, tp), encode_value(om, now, tp), now, ())
            for tp, om in sorted(offsets.items())
        ]
        return encode_records(
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=transactional,
            now_ms=now,
        )

    def commit(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        """Commit outside any transaction: visible at once (durable before returning)."""
        validate_group_id(group_id)
        normalized = normalize_offsets(offsets)
        if normalized:
            plog = self._log.partition_log(OFFSETS_PARTITION)
            plog.append(
                self.encode_batch(group_id, normalized), sync=True, origin=AppendOrigin.COORDINATOR
            )
            self.maybe_snapshot()

    def reset_offsets(
        self,
        group_id: str,
        plan: Callable[
            [dict[TopicPartition, OffsetAndMetadata]],
            Mapping[TopicPartition, int | OffsetAndMetadata],
        ],
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Commit the offsets ``plan`` gives for the group's committed offsets, while the group
        has no members (Kafka's AlterConsumerGroupOffsets, which kafka-consumer-groups
        --reset-offsets sends): the group is held inactive (``GroupActivity.inactive``) from
        before ``plan`` reads the committed offsets until the commit is durable, so no member
        joins, and no member commits, in between. GroupNotEmptyError (68) at once if it has
        members; the offsets are validated before anything is written. Returns what it
        committed (nothing is written for an empty plan)."""
        validate_group_id(group_id)
        with self.activity.inactive(group_id):
            current = self.groups().get(group_id, {})
            normalized = normalize_offsets(plan(current))
            self.commit(group_id, normalized)
            return normalized

    def delete_group(self, group_id: str) -> list[TopicPartition]:
        """Delete every committed offset of ``group_id`` (Kafka's DeleteGroups): one batch of
        tombstones (an offset-commit key with a null value, as Kafka writes them) appended
        durably through the same partition lock as every commit, while the group is held
        inactive. Returns the partitions whose offsets it deleted.

        GroupNotEmptyError (68) if the group has members; GroupIdNotFoundError (69) if it has
        no committed offsets, naming the groups that have. A transactional offset commit still
        pending (its transaction open) is deleted too, as Kafka deletes it: a tombstone is
        appended for its partition, and being later in the log it wins over the pending
        record when the transaction's COMMIT marker materializes that."""
        validate_group_id(group_id)
        self._check_exists(group_id)
        with self.activity.inactive(group_id):
            return self._delete_committed(group_id, None, must_exist=True)

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, live: bool = False
    ) -> list[TopicPartition]:
        """Delete the group's committed offsets of ``partitions`` only (Kafka's OffsetDelete,
        kafka-consumer-groups --delete-offsets): one batch of tombstones, for those of them
        that have a committed offset, appended durably as ``delete_group``'s are. A tombstone
        names its partition, so the group's other offsets, and a commit of another partition
        appended meanwhile by any process, stay as they are. Returns the partitions whose
        offsets it deleted, sorted (a partition without one is left alone: nothing is written
        when none has one). A transactional commit still pending for a named partition is
        deleted too, as in ``delete_group``.

        By default the group is held inactive for the check and the write
        (``GroupActivity.inactive``): GroupNotEmptyError (68) at once if a process has members
        of it, GroupIdNotFoundError (69) if it has no committed offset at all. ``live`` is for
        the group coordinator that holds the group's members in this process (``txnlog
        serve``'s): it has decided that no member subscribes to the topics of ``partitions``
        (Kafka's GROUP_SUBSCRIBED_TO_TOPIC rule) and keeps the group active meanwhile, so the
        group is not held, and exists whether or not it has offsets."""
        validate_group_id(group_id)
        asked = set(partitions)
        if live:
            return self._delete_committed(group_id, asked, must_exist=False)
        self._check_exists(group_id)
        with self.activity.inactive(group_id):
            return self._delete_committed(group_id, asked, must_exist=True)

    def _check_exists(self, group_id: str) -> None:
        """GroupIdNotFoundError, before any lock file is made, for a group that has no offset
        and never had members or a tool here: naming groups that do not exist makes no files
        (a hostile DeleteGroups of a million names must not leave a million lock files). A
        group that a commit creates after this check was deleted 'before' it, as in Kafka."""
        if self.activity.has_lock_files(group_id):
            return  # known here: ``inactive`` decides (members: GroupNotEmptyError)
        with self._mutex:
            self._catch_up()
            if not self._groups.group_partitions(group_id):
                raise self._not_found(group_id)

    def _not_found(self, group_id: str) -> GroupIdNotFoundError:
        """Call with ``_mutex`` held."""
        names = self._groups.group_ids()
        shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        return GroupIdNotFoundError(
            f"group {group_id!r} has no committed offsets; groups: {shown or '(none)'}"
        )

    def _delete_committed(
        self, group_id: str, asked: set[TopicPartition] | None, *, must_exist: bool
    ) -> list[TopicPartition]:
        """Tombstones for the group's committed and pending offsets of ``asked`` (None: all
        of them), as Kafka's ``deleteOffsets`` / ``deleteAllOffsets`` write them."""
        with self._mutex:
            self._catch_up()
            held = self._groups.group_partitions(group_id)
            if must_exist and not held:
                raise self._not_found(group_id)
        deleted = sorted(held if asked is None else asked & held)
        if deleted:
            self._append_tombstones(group_id, deleted)
        return deleted

    def _append_tombstones(self, group_id: str, partitions: list[TopicPartition]) -> None:
        from txn_log.record.codec import encode_records

        now = self._log.clock.time_ms()
        records = [(encode_key(group_id, tp), None, now, ()) for tp in partitions]
        plog = self._log.partition_log(OFFSETS_PARTITION)
        plog.append(encode_records(records, now_ms=now), sync=True, origin=AppendOrigin.COORDINATOR)
        self.maybe_snapshot()

    def committed(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where it has none): plain commits and those of
        committed transactions; never those of open or aborted ones (O-04)."""
        validate_group_id(group_id)
        with self._mutex:
            self._catch_up()
            return {tp: self._groups.committed((group_id, tp)) for tp in partitions}

    def unstable(self, group_id: str) -> frozenset[TopicPartition]:
        """The partitions for which ``group_id`` has a transactional offset commit whose
        transaction has not ended (its producer's marker not yet in the log): what a
        consumer asking for stable offsets must wait out (KIP-447's require_stable)."""
        validate_group_id(group_id)
        with self._mutex:
            self._catch_up()
            return frozenset(self._groups.pending_partitions(group_id))

    def groups(self) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """Every group with its committed offsets."""
        with self._mutex:
            self._catch_up()
            out: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
            for (group_id, tp), om in sorted(self._groups.all_committed().items()):
                out.setdefault(group_id, {})[tp] = om
            return out

    def _catch_up(self) -> None:
        """Apply every batch from ``_applied`` to the log end, in log order (O-05).

        A batch is decoded whole before any of it is applied, and ``_applied`` moves past it
        only then, so a corrupt batch raises and leaves the cache as it was before that batch.
        """
        plog = self._log.partition_reader(OFFSETS_PARTITION)
        if self._snapshots is None:
            self._snapshots = StateSnapshotDir(plog.directory, SnapshotKind.GROUP_OFFSETS)
            self._load_snapshot(self._snapshots, plog)
        end = plog.log_end_offset
        start = max(self._applied, plog.log_start_offset)  # retention may have removed a prefix
        if end <= start:
            return
        for header, batch in plog.read(start, end):
            if header.next_offset <= self._applied:
                continue
            if header.is_control:
                self._apply_marker(header, batch)
            else:
                self._apply_commits(header, batch)
            self._applied = header.next_offset
        self._maybe_snapshot(self._snapshots, plog)

    def maybe_snapshot(self) -> None:
        """Catch up and write a snapshot if one is due (writers call it after appending, so a
        log only ever written to still gets snapshots). Never waits, never raises: a busy
        store or snapshot lock, or a problem reading, leaves it to the next call."""
        if self._log.read_only:
            return
        end = self._log.partition_reader(OFFSETS_PARTITION).log_end_offset
        if end - self._snapshot_offset < self.snapshot_interval_offsets:
            return
        if not self._mutex.acquire(blocking=False):
            return
        try:
            self._catch_up()
        except TxnLogError as problem:
            logger.warning("group offset snapshot skipped: %s", problem)
        finally:
            self._mutex.release()

    def _load_snapshot(self, snapshots: StateSnapshotDir, plog: PartitionReader) -> None:
        """Start from the newest valid snapshot (first catch-up of this object only)."""
        loaded = snapshots.load_restored(plog, restore_snapshot)
        if loaded is not None:
            self._groups, self._applied = loaded
            self._snapshot_offset = self.started_from_snapshot = self._applied

    def _maybe_snapshot(self, snapshots: StateSnapshotDir, plog: PartitionReader) -> None:
        """Write a snapshot of the state at ``_applied`` if it is due and the snapshot lock is
        free; a failure is logged, never raised (the caller only wanted to read)."""
        if self._log.read_only:
            return
        if self._applied - self._snapshot_offset < self.snapshot_interval_offsets:
            return
        if not self._snapshot_lock.try_acquire():
            return
        try:
            known = snapshots.usable_offsets()  # another process may have written a newer one
            if known and self._applied - known[-1] < self.snapshot_interval_offsets:
                self._snapshot_offset = max(self._snapshot_offset, known[-1])
                return
            self._log.partition_log(OFFSETS_PARTITION).flush()  # the offset must be durable
            snapshots.write(
                plog, self._applied, snapshot_records(self._groups), fault_name="offsets_snapshot"
            )
            self._snapshot_offset = self._applied
        except (TxnLogError, OSError, ValueError) as problem:  # StorageError, a log truncated
            logger.warning("group offset snapshot at %d not written: %s", self._applied, problem)
        finally:
            self._snapshot_lock.release()

    def _apply_marker(self, header: BatchHeader, batch: memoryview) -> None:
        if not is_crc_valid(batch, header):
            raise CorruptRecordError(
                f"{OFFSETS_PARTITION}: control batch at offset {header.base_offset} fails its "
                "CRC-32C check"
            )
        marker = read_control_record(header, batch)
        if marker.control_type in (ControlType.COMMIT, ControlType.ABORT):
            self._groups.complete_pending_txn(
                header.producer_id, marker.control_type is ControlType.COMMIT
            )

    def _apply_commits(self, header: BatchHeader, batch: memoryview) -> None:
        from txn_log.record.codec import iter_records

        commits = []
        for record in iter_records(batch):
            decoded = decode_record(record.key, record.value)
            if decoded is not None:
                group_id, tp, om = decoded
                commits.append(((group_id, tp), CommitRecordMetadataAndOffset(record.offset, om)))
        producer_id = header.producer_id if header.is_transactional else None
        for key, commit in commits:
            self._groups.on_offset_commit(key, commit, producer_id)


# --- snapshots ---------------------------------------------------------------------------------


def snapshot_records(groups: GroupMetadata) -> list[SnapshotRecord]:
    """Each entry of ``groups`` as an offset-commit record (commit timestamp 0: not state)."""
    return [
        SnapshotRecord(
            encode_key(group_id, tp),
            None if record.committed is None else encode_value(record.committed, 0, tp),
            -1 if producer_id is None else producer_id,
            record.record_offset,
        )
        for producer_id, (group_id, tp), record in groups.snapshot_entries()
    ]


def restore_snapshot(snapshot: StateSnapshot) -> GroupMetadata:
    """The state a group offset snapshot holds; CorruptRecordError if a record is not one."""
    groups = GroupMetadata()
    for record in snapshot.records:
        decoded = decode_record(record.key, record.value)
        if decoded is None:
            raise CorruptRecordError(
                f"group offset snapshot at {snapshot.end_offset}: a record that is no offset commit"
            )
        group_id, tp, committed = decoded
        commit = CommitRecordMetadataAndOffset(record.record_offset, committed)
        producer_id = None if record.producer_id < 0 else record.producer_id
        groups.on_offset_commit((group_id, tp), commit, producer_id)
    return groups
