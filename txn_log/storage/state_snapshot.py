"""Snapshots of a keyed internal topic's replayed state (C-22 start-up, DESIGN §2).

The coordinator (``__transaction_state``) and the group offset store (``__consumer_offsets``)
rebuild their state by replaying their partition. A snapshot stores that state, as the records
that replay into it, taken at an *exclusive* partition offset ``end_offset``; a process loads the
newest valid snapshot and replays only the tail from ``end_offset``. One file per snapshot, in
the partition's own directory, named ``<end_offset, 20 digits>.state-snapshot`` (a suffix the
segment, index and producer-snapshot code all ignore). The framing is the producer snapshot's
(``producer_snapshot.HEADER``: version, then CRC-32C of every later byte), then, big-endian:

    offset  width  field
    ------  -----  ----------------------------------------------------------------------
         0      2  version                 int16   = 2
         2      4  crc                     uint32  CRC-32C of bytes [6, end)
         6      2  kind                    int16   1 = coordinator, 2 = group offsets
         8     16  topic_id                bytes   the partition's topic id (KIP-516), 0s if none
        24      8  end_offset              int64   exclusive; the file holds state below it
        32      8  last_batch_base_offset  int64   the batch ending at end_offset; -1 if none
        40      4  last_batch_crc          uint32  that batch's CRC-32C (0 if none)
        44      4  count                   int32   records that follow
        48      *  records, each:
                +0      8  producer_id     int64   -1 unless the record is pending for it
                +8      8  record_offset   int64   the record's offset in the log; -1 if unused
               +16      4  key length      int32   then the key bytes
                   +20  4  value length    int32   -1 = null (then no bytes), else the bytes

Validity on load (STYLE 6: fall back, never load wrong state). A file with a bad version (a
version-1 file, without topic id, included), kind, CRC, length or name is skipped
(``CorruptSnapshotError`` logged) and the next older one is tried, finally none (full replay).
A decoded snapshot is then checked against the log (``unusable_because``) and ignored the same
way when:

- its topic id is not the partition's (the partition was deleted and re-created);
- its ``end_offset`` is past the partition's log end (the log was truncated);
- the log cleaner removed a tombstone or marker at or after ``end_offset``
  (``cleaner_horizon.removed_end_offset`` > ``end_offset``): the tail would replay without it;
- the batch that ends at ``end_offset`` is not its fingerprint (base offset and CRC), unless
  the cleaner explains the difference: ``end_offset`` is within what the cleaner has rewritten
  (``cleaned_end_offset``) and the batch there now has the same base offset (rebuilt with fewer
  records) or no batch ends there (removed, a hole: T-05). What the cleaner removes below the
  offset is in the snapshot already, and what supersedes a record after it comes after it, in
  the tail; so restore + tail still equals a full replay (of the cleaned log, and of the log
  before cleaning). A log truncated below a snapshot by recovery loses the snapshot with it
  (``delete_past``, as Kafka deletes producer snapshots past a truncation), so a log written
  again and then cleaned is never taken for a cleaned one.

Writing (``StateSnapshotDir.write``) uses the engine's one durable-write rule (``durable_file``):
temporary file, fsync, rename, directory fsync. A reader sees a whole old file, a whole new file
or none; a SIGKILL leaves at worst a hidden temporary file, removed by the next writer.
Process safety: any number of readers without a lock; writers hold the lock their owner names
(the coordinator lock, or the group offset store's snapshot lock), which makes ``prune`` and
leftover removal safe. A reader racing a prune may find a file gone: it tries the next one.
"""

from __future__ import annotations

import base64
import logging
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Protocol, TypeVar

import crc32c

from txn_log.errors import CorruptRecordError, CorruptSnapshotError, OffsetOutOfRangeError
from txn_log.record.batch_header import BatchHeader
from txn_log.storage.cleaner_horizon import CleanerHorizon, read_horizon
from txn_log.storage.durable_file import is_temp_name, write_durably
from txn_log.storage.producer_snapshot import CRC_START, HEADER, check_header

logger = logging.getLogger(__name__)
_S = TypeVar("_S")

STATE_SNAPSHOT_VERSION = 2
STATE_SNAPSHOT_SUFFIX = ".state-snapshot"
SNAPSHOTS_KEPT = 2
_NAME = re.compile(r"^(\d{20})\.state-snapshot$")

PREAMBLE = struct.Struct(
    ">"
    "h"  # kind: SnapshotKind
    "16s"  # topic_id: the partition's, raw; zeros when it has none
    "q"  # end_offset: exclusive
    "q"  # last_batch_base_offset: -1 when end_offset is 0
    "I"  # last_batch_crc
    "i"  # count of records
)
RECORD_HEAD = struct.Struct(
    ">"
    "q"  # producer_id: -1 unless pending for a producer
    "q"  # record_offset: -1 when unused
    "i"  # key length (then the key)
)
LENGTH = struct.Struct(">i")  # value length, -1 = null
RECORDS_OFFSET = HEADER.size + PREAMBLE.size  # 48
NO_TOPIC_ID = bytes(16)

if RECORDS_OFFSET != 48 or CRC_START != 6:  # pragma: no cover - layout guard
    raise ImportError("state snapshot layout drifted from its documented offsets")


class PartitionReader(Protocol):
    """What snapshots need of a partition (``storage.partition_reader.PartitionReader`` has it;
    a protocol, because the loader below that reader deletes snapshots: ``delete_past``)."""

    @property
    def topic_id(self) -> str | None: ...

    @property
    def log_end_offset(self) -> int: ...

    def read(
        self, start_offset: int, end_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]: ...


class SnapshotKind(IntEnum):
    """Whose state a snapshot holds (a file of the wrong kind is refused)."""

    COORDINATOR = 1
    GROUP_OFFSETS = 2


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    """One record of the state: a key, a value (``None``: a tombstone/deletion), and two
    integers whose meaning the owner gives (-1 when it does not use them)."""

    key: bytes
    value: bytes | None
    producer_id: int = -1
    record_offset: int = -1


@dataclass(frozen=True, slots=True)
class BatchFingerprint:
    """The batch that ends at a snapshot's ``end_offset``: its base offset and CRC-32C."""

    base_offset: int
    crc: int


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """A decoded snapshot: state of every record below ``end_offset`` (exclusive)."""

    kind: SnapshotKind
    end_offset: int
    last_batch: BatchFingerprint | None
    records: tuple[SnapshotRecord, ...]
    topic_id: bytes = NO_TOPIC_ID  # raw 16 bytes (``raw_topic_id``)


def raw_topic_id(topic_id: str | None) -> bytes:
    """A printed topic id (URL-safe base64 of 16 bytes) as its 16 bytes; zeros for None."""
    if topic_id is None:
        return NO_TOPIC_ID
    raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    return raw if len(raw) == 16 else NO_TOPIC_ID


def state_snapshot_file_name(end_offset: int) -> str:
    """``<end_offset, 20 digits>.state-snapshot``."""
    return f"{end_offset:020d}{STATE_SNAPSHOT_SUFFIX}"


def encode_state_snapshot(snapshot: StateSnapshot) -> bytes:
    """The whole file, CRC filled in."""
    last = snapshot.last_batch
    body = bytearray(
        PREAMBLE.pack(
            snapshot.kind,
            snapshot.topic_id,
            snapshot.end_offset,
            -1 if last is None else last.base_offset,
            0 if last is None else last.crc,
            len(snapshot.records),
        )
    )
    for record in snapshot.records:
        body += RECORD_HEAD.pack(record.producer_id, record.record_offset, len(record.key))
        body += record.key
        if record.value is None:
            body += LENGTH.pack(-1)
        else:
            body += LENGTH.pack(len(record.value)) + record.value
    return HEADER.pack(STATE_SNAPSHOT_VERSION, crc32c.crc32c(bytes(body))) + bytes(body)


def decode_state_snapshot(
    data: bytes, kind: SnapshotKind, source: str = "state snapshot"
) -> StateSnapshot:
    """Parse and check a whole file of ``kind``; CorruptSnapshotError names what is wrong."""
    check_header(
        data,
        version=STATE_SNAPSHOT_VERSION,
        min_length=RECORDS_OFFSET,
        source=source,
        kind="state snapshot",
    )
    found_kind, topic_id, end_offset, last_base, last_crc, count = PREAMBLE.unpack_from(
        data, HEADER.size
    )
    if found_kind != kind:
        raise CorruptSnapshotError(f"{source}: snapshot kind {found_kind}, expected {kind:d}")
    if end_offset < 0 or count < 0:
        raise CorruptSnapshotError(f"{source}: negative end offset {end_offset} or count {count}")
    records = []
    position = RECORDS_OFFSET
    try:
        for _ in range(count):
            producer_id, record_offset, key_length = RECORD_HEAD.unpack_from(data, position)
            position += RECORD_HEAD.size
            key = _take(data, position, key_length, source)
            position += key_length
            (value_length,) = LENGTH.unpack_from(data, position)
            position += LENGTH.size
            value = None if value_length == -1 else _take(data, position, value_length, source)
            position += max(value_length, 0)
            records.append(SnapshotRecord(key, value, producer_id, record_offset))
    except struct.error as error:
        raise CorruptSnapshotError(f"{source}: truncated record: {error}") from None
    if position != len(data):
        raise CorruptSnapshotError(
            f"{source}: {count} records end at byte {position}, the file has {len(data)}"
        )
    last = None if last_base < 0 else BatchFingerprint(last_base, last_crc)
    return StateSnapshot(SnapshotKind(found_kind), end_offset, last, tuple(records), topic_id)


def _take(data: bytes, position: int, length: int, source: str) -> bytes:
    if length < 0 or position + length > len(data):
        raise CorruptSnapshotError(
            f"{source}: a field of {length} bytes at byte {position} overruns the file "
            f"({len(data)} bytes)"
        )
    return data[position : position + length]


def fingerprint_at(reader: PartitionReader, end_offset: int) -> BatchFingerprint | None:
    """The batch of ``reader`` that ends exactly at ``end_offset`` (exclusive); ``None`` at
    offset 0. Raises ValueError if no batch ends there (not a batch boundary)."""
    if end_offset == 0:
        return None
    for header, _ in reader.read(end_offset - 1, end_offset):
        if header.next_offset == end_offset:
            return BatchFingerprint(header.base_offset, header.crc)
        break
    raise ValueError(f"no batch ends at offset {end_offset}")


def unusable_because(
    reader: PartitionReader, snapshot: StateSnapshot, horizon: CleanerHorizon
) -> str | None:
    """Why ``snapshot`` does not describe ``reader``'s log as the cleaner described in
    ``horizon`` left it (see the module docstring), or ``None`` if it does."""
    if snapshot.topic_id != raw_topic_id(reader.topic_id):
        return "it was taken of another topic id (the partition was deleted and re-created)"
    end = reader.log_end_offset
    if snapshot.end_offset > end:
        return f"its offset {snapshot.end_offset} is past the log end {end} (log truncated)"
    if horizon.removed_end_offset > snapshot.end_offset:
        return (
            f"the log cleaner removed tombstones or markers up to offset "
            f"{horizon.removed_end_offset - 1}, at or after its offset {snapshot.end_offset}"
        )
    if snapshot.last_batch is None:
        return None
    try:
        found: BatchFingerprint | None = fingerprint_at(reader, snapshot.end_offset)
    except (ValueError, OffsetOutOfRangeError):
        found = None
    if found == snapshot.last_batch:
        return None
    cleaned = snapshot.end_offset <= horizon.cleaned_end_offset
    if cleaned and (found is None or found.base_offset == snapshot.last_batch.base_offset):
        return None  # the cleaner rewrote or removed that batch
    return (
        f"the batch ending at {snapshot.end_offset} is {found}, it was taken after "
        f"{snapshot.last_batch} (log truncated and rewritten)"
    )


def delete_past(directory: Path, end_offset: int) -> list[str]:
    """Delete the state snapshots of ``directory`` whose offset is past ``end_offset`` (the log
    end after a truncation, under the partition lock); one line per file deleted."""
    done = []
    for kind in SnapshotKind:
        snapshots = StateSnapshotDir(directory, kind)
        for offset in snapshots.offsets():
            if offset > end_offset:
                snapshots.path_of(offset).unlink(missing_ok=True)
                done.append(f"deleted state snapshot {snapshots.path_of(offset)} past the log end")
    return done


class StateSnapshotDir:
    """The state snapshots of one kind in one partition directory (see the module docstring
    for who may call what without a lock)."""

    def __init__(self, directory: Path, kind: SnapshotKind) -> None:
        self.directory = directory
        self.kind = kind
        self.refused_through = -1  # the newest offset whose snapshot ``load_newest`` skipped

    def usable_offsets(self) -> list[int]:
        """``offsets`` without the snapshots this object's load found unusable: an owner
        deciding whether a snapshot is due must not count one that no process can load (the
        cleaner removed markers after it...), or every process would replay the whole log
        until the log grows a whole interval past it."""
        return [offset for offset in self.offsets() if offset > self.refused_through]

    def offsets(self) -> list[int]:
        """End offsets of the snapshot files present, ascending."""
        try:
            names = [p.name for p in self.directory.iterdir()]
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_NAME.match, names) if m is not None)

    def path_of(self, end_offset: int) -> Path:
        return self.directory / state_snapshot_file_name(end_offset)

    def read(self, end_offset: int) -> StateSnapshot:
        """One file, checked; CorruptSnapshotError (or OSError, e.g. pruned meanwhile)."""
        path = self.path_of(end_offset)
        snapshot = decode_state_snapshot(path.read_bytes(), self.kind, str(path))
        if snapshot.end_offset != end_offset:
            raise CorruptSnapshotError(
                f"{path}: holds offset {snapshot.end_offset}, its name says {end_offset}"
            )
        return snapshot

    def load_newest(self, reader: PartitionReader) -> StateSnapshot | None:
        """The newest snapshot that reads back whole and matches ``reader``'s log, or None."""
        horizon = read_horizon(self.directory)  # before the log: it covers what we read
        for end_offset in reversed(self.offsets()):
            try:
                snapshot = self.read(end_offset)
            except FileNotFoundError:
                continue  # pruned meanwhile: a newer one exists
            except (CorruptSnapshotError, OSError) as problem:
                logger.warning("ignoring state snapshot: %s", problem)
                self.refused_through = max(self.refused_through, end_offset)
                continue
            mismatch = unusable_because(reader, snapshot, horizon)
            if mismatch is None:
                return snapshot
            logger.warning("ignoring state snapshot %s: %s", self.path_of(end_offset), mismatch)
            self.refused_through = max(self.refused_through, end_offset)
        return None

    def load_restored(
        self, reader: PartitionReader, restore: Callable[[StateSnapshot], _S]
    ) -> tuple[_S, int] | None:
        """``(restore(newest valid snapshot), its end offset)``, or None to replay the log from
        its start: no usable snapshot, or one whose records do not restore (CorruptRecordError,
        logged). The one loading step of every owner of a state snapshot."""
        snapshot = self.load_newest(reader)
        if snapshot is None:
            return None
        try:
            return restore(snapshot), snapshot.end_offset
        except CorruptRecordError as problem:
            logger.warning(
                "%s unusable, replaying the log from its start: %s",
                self.path_of(snapshot.end_offset),
                problem,
            )
            return None

    def write(
        self,
        reader: PartitionReader,
        end_offset: int,
        records: Sequence[SnapshotRecord],
        *,
        fault_name: str,
    ) -> None:
        """Write the snapshot of the state at ``end_offset`` (a batch boundary of ``reader``'s
        log, already durable), then keep only the newest ``SNAPSHOTS_KEPT``. Caller holds the
        owner's snapshot lock. Raises StorageError."""
        self.remove_leftovers()
        snapshot = StateSnapshot(
            self.kind,
            end_offset,
            fingerprint_at(reader, end_offset),
            tuple(records),
            raw_topic_id(reader.topic_id),
        )
        data = encode_state_snapshot(snapshot)
        write_durably(self.path_of(end_offset), data, fault_name=fault_name)
        self.prune()

    def prune(self) -> None:
        """Delete all but the newest ``SNAPSHOTS_KEPT`` snapshots (under the snapshot lock)."""
        for end_offset in self.offsets()[:-SNAPSHOTS_KEPT]:
            self.path_of(end_offset).unlink(missing_ok=True)

    def remove_leftovers(self) -> None:
        """Temporary files of interrupted writes (under the snapshot lock: no writer is live)."""
        try:
            paths = list(self.directory.iterdir())
        except FileNotFoundError:
            return
        for path in paths:
            if is_temp_name(path.name) and STATE_SNAPSHOT_SUFFIX + "." in path.name:
                path.unlink(missing_ok=True)
