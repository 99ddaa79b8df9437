"""Group offsets in ``__consumer_offsets`` (§5 of the checklist: O-01..O-07).

Records use Kafka's own offset-commit layout, so its tools can read them:

    key   (OffsetCommitKey v1):   version int16 = 1 | group string | topic string | partition int32
    value (OffsetCommitValue v3): version int16 = 3 | offset int64 | leader_epoch int32
                                  | metadata string | commit_timestamp int64
    a null value deletes the offset; strings are int16 length + UTF-8

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

Start-up from a snapshot (issue 14): the first catch-up of a store loads the newest valid
group offset snapshot (``state_snapshot``, kind GROUP_OFFSETS: every materialized record, with
its log offset, deletions included, and every producer's pending transactional records) and
reads only the partition after it; a bad or stale snapshot falls back to an older one or to the
start. A writable store that has read ``snapshot_interval_offsets`` offsets past the newest
snapshot writes a new one, if it gets the snapshot lock at once (``group-offsets.lock`` in the
log directory: a reader never waits for it), after an fsync of the partition.

Validation comes first (STYLE 3): group ids, offsets and metadata that Kafka's OffsetCommit
would refuse raise typed errors before anything is written or registered with the coordinator
(INVALID_GROUP_ID: empty or over the int16 string's 32,767 UTF-8 bytes; OFFSET_METADATA_TOO_LARGE:
over ``offset.metadata.max.bytes``, Kafka's default 4,096 bytes; offsets int64 ≥ 0).
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Iterable, Mapping

from txn_log.errors import (
    ConfigError,
    CorruptRecordError,
    InvalidGroupIdError,
    OffsetMetadataTooLargeError,
    TxnLogError,
)
from txn_log.file_lock import FileLock
from txn_log.group.group_metadata import (
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupOffsetEntry,
)
from txn_log.group.group_metadata import OffsetAndMetadata as OffsetAndMetadata  # exported here
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
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, validate_topic_name
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

OFFSETS_PARTITION = TopicPartition(CONSUMER_OFFSETS_TOPIC, 0)
KEY_VERSION = 1
VALUE_VERSION = 3
MAX_GROUP_ID_BYTES = 32_767  # the protocol's int16-length string
MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes default
MAX_INT32 = (1 << 31) - 1
MAX_INT64 = (1 << 63) - 1
_INT16 = struct.Struct(">h")
_PARTITION = struct.Struct(">i")
_VALUE_FIXED = struct.Struct(
    ">"
    "h"  # version
    "q"  # offset
    "i"  # leader_epoch
)
_TIMESTAMP = struct.Struct(">q")  # commit_timestamp
DEFAULT_SNAPSHOT_INTERVAL_OFFSETS = 2000
"""A new group offset snapshot once the partition has this many offsets past the newest one."""
SNAPSHOT_LOCK_FILE = "group-offsets.lock"


# --- validation (before anything is written) --------------------------------------------------


def _preview(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "…"


def _utf8(text: str, error: type[TxnLogError], what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as cause:
        raise error(f"{what} {_preview(text)} is not valid UTF-8: {cause.reason}") from None


def validate_group_id(group_id: object, where: str = "") -> str:
    """``group_id`` if Kafka would accept it: a non-empty string of at most 32,767 UTF-8 bytes
    (INVALID_GROUP_ID). ``where`` names the partition in messages, when there is one."""
    suffix = f" (committing {where})" if where else ""
    if not isinstance(group_id, str) or not group_id:
        raise InvalidGroupIdError(f"group id must be a non-empty string, got {group_id!r}{suffix}")
    size = len(_utf8(group_id, InvalidGroupIdError, "group id"))
    if size > MAX_GROUP_ID_BYTES:
        raise InvalidGroupIdError(
            f"group id {_preview(group_id)} is {size} bytes of UTF-8{suffix}; at most "
            f"{MAX_GROUP_ID_BYTES} bytes fit the protocol's int16 string"
        )
    return group_id


def validate_offset(tp: TopicPartition | str, committed: OffsetAndMetadata) -> None:
    """Refuse what Kafka's OffsetCommit refuses, naming ``tp`` (a partition or a description):
    an offset outside int64 ≥ 0, a leader epoch outside -1..int32, metadata that is not a string
    or is over 4,096 UTF-8 bytes (OFFSET_METADATA_TOO_LARGE)."""
    offset, epoch, metadata = committed.offset, committed.leader_epoch, committed.metadata
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ConfigError(f"offset {offset!r} for {tp} must be an integer ≥ 0")
    if offset > MAX_INT64:
        raise ConfigError(f"offset {offset} for {tp} does not fit an int64 (max {MAX_INT64})")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or not -1 <= epoch <= MAX_INT32:
        raise ConfigError(f"leader epoch {epoch!r} for {tp} must be -1 or an int32 ≥ 0")
    if not isinstance(metadata, str):
        raise ConfigError(f"offset metadata for {tp} must be a str, got {type(metadata).__name__}")
    size = len(_utf8(metadata, OffsetMetadataTooLargeError, f"offset metadata for {tp}"))
    if size > MAX_METADATA_BYTES:
        raise OffsetMetadataTooLargeError(
            f"offset metadata for {tp} is {size} bytes of UTF-8; at most {MAX_METADATA_BYTES} "
            "(Kafka's offset.metadata.max.bytes default)"
        )


def _validate_partition(tp: object) -> TopicPartition:
    if not isinstance(tp, TopicPartition):
        raise ConfigError(f"offsets must be keyed by TopicPartition, got {tp!r}")
    validate_topic_name(tp.topic)
    if tp.partition > MAX_INT32:
        raise ConfigError(f"partition {tp.partition} of {tp.topic!r} does not fit an int32")
    return tp


def normalize_offsets(
    offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Accept plain ints or OffsetAndMetadata; refuse, naming the partition, anything Kafka's
    OffsetCommit would refuse (see ``validate_offset``). Changes nothing."""
    if not isinstance(offsets, Mapping):
        raise ConfigError(f"offsets must be a mapping of TopicPartition to offset, got {offsets!r}")
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, committed in offsets.items():
        _validate_partition(tp)
        om = committed if isinstance(committed, OffsetAndMetadata) else OffsetAndMetadata(committed)
        validate_offset(tp, om)
        out[tp] = om
    return out


# --- records ---------------------------------------------------------------------------------


def _string(data: bytes) -> bytes:
    return _INT16.pack(len(data)) + data


def _read_string(buf: bytes, position: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(buf, position)
    position += _INT16.size
    if length < 0 or position + length > len(buf):
        raise CorruptRecordError(f"offset commit record: bad string length {length}")
    return buf[position : position + length].decode(), position + length


def encode_key(group_id: str, topic_partition: TopicPartition) -> bytes:
    """OffsetCommitKey v1; a typed error (never a raw struct.error) for what does not fit."""
    validate_group_id(group_id, str(topic_partition))
    _validate_partition(topic_partition)
    return (
        _INT16.pack(KEY_VERSION)
        + _string(group_id.encode())
        + _string(topic_partition.topic.encode())
        + _PARTITION.pack(topic_partition.partition)
    )


def encode_value(
    committed: OffsetAndMetadata,
    commit_timestamp_ms: int,
    topic_partition: TopicPartition | None = None,
) -> bytes:
    """OffsetCommitValue v3; a typed error naming ``topic_partition`` for what does not fit."""
    validate_offset(topic_partition or "an offset commit", committed)
    return (
        _VALUE_FIXED.pack(VALUE_VERSION, committed.offset, committed.leader_epoch)
        + _string(committed.metadata.encode())
        + _TIMESTAMP.pack(commit_timestamp_ms)
    )


def decode_record(
    key: bytes | None, value: bytes | None
) -> tuple[str, TopicPartition, OffsetAndMetadata | None] | None:
    """(group, partition, offset or None for a deletion); None for other record kinds (Kafka
    keeps group metadata, key version 2, in the same topic)."""
    if key is None or len(key) < _INT16.size:
        raise CorruptRecordError("offset commit record without a key")
    (version,) = _INT16.unpack_from(key, 0)
    if version not in (0, 1):
        return None
    try:
        group_id, position = _read_string(key, _INT16.size)
        topic, position = _read_string(key, position)
        (partition,) = _PARTITION.unpack_from(key, position)
        tp = TopicPartition(topic, partition)
        if value is None:
            return group_id, tp, None
        _, offset, leader_epoch = _VALUE_FIXED.unpack_from(value, 0)
        metadata, _ = _read_string(value, _VALUE_FIXED.size)
    except struct.error as error:
        raise CorruptRecordError(f"truncated offset commit record: {error}") from None
    return group_id, tp, OffsetAndMetadata(offset, metadata, leader_epoch)


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

    def close(self) -> None:
        """Release the snapshot lock file's descriptor."""
        self._snapshot_lock.close()

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

    def committed(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where it has none): plain commits and those of
        committed transactions; never those of open or aborted ones (O-04)."""
        validate_group_id(group_id)
        with self._mutex:
            self._catch_up()
            return {tp: self._groups.committed((group_id, tp)) for tp in partitions}

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
