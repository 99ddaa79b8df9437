"""The producer-state snapshot file, byte for byte Kafka's (``ProducerStateManager.java``).

One file per snapshot, named ``<map end offset, 20 digits>.snapshot`` (P-22 [EXT]); the offset
is *exclusive*: the file holds the state of every batch below it. Layout, big-endian
(Kafka's ``PID_SNAPSHOT_MAP_SCHEMA``, ``PRODUCER_SNAPSHOT_VERSION = 1``):

    offset  width  field
    ------  -----  ----------------------------------------------------------------------
         0      2  version                   int16   = 1
         2      4  crc                       uint32  CRC-32C of bytes [6, end)
         6      4  producer_entries count    int32   Kafka ``ArrayOf``: non-negative length
        10   46*n  producer_entries          n entries of:
                +0      8  producer_id              int64
                +8      2  epoch                    int16   producer epoch
               +10      4  last_sequence            int32   -1 if no batch is cached
               +14      8  last_offset              int64   inclusive; -1 if no batch
               +22      4  offset_delta             int32   last_offset_delta of that batch
               +26      8  timestamp                int64   max timestamp of the last batch, ms
               +34      4  coordinator_epoch        int32   -1 before any marker (C-23)
               +38      8  current_txn_first_offset int64   -1 = no open transaction (P-25)

Decision (checklist §14.7, P-21..P-23): Kafka's layout is used instead of the seed's 26-byte
``PidEntry``; it adds the offset delta, the timestamp (for expiration, P-26) and the open
transaction's first offset (for the LSO after recovery, P-25). As in Kafka only the newest
cached batch of each producer is stored, so after a reload the de-duplication cache holds one
batch per producer until new ones arrive. Entries are written sorted by producer id.

Recovery (STYLE 6): a bad version, CRC, or length raises ``CorruptSnapshotError``; the manager
deletes that file and falls back to the previous snapshot, and finally to the log start.
``write_snapshot`` follows the engine's durable-write rule (``durable_file``): temp file, fsync,
rename, fsync of the directory. A leftover temporary file is recognised by ``is_snapshot_temp``.

Functions here are stateless and safe to call from any thread for different paths.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c

from txn_log.errors import CorruptSnapshotError
from txn_log.storage.durable_file import is_temp_name, write_durably
from txn_log.storage.producer_state_entry import BatchMetadata, ProducerStateEntry

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
TEMP_SUFFIX = ".tmp"  # ``<name>.snapshot.tmp``: the temporary name before ``durable_file``
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")

HEADER = struct.Struct(
    ">"
    "h"  # version: SNAPSHOT_VERSION
    "I"  # crc: CRC-32C of every byte from CRC_START to the end of the file
)
COUNT = struct.Struct(
    ">i"  # producer_entries array length (Kafka ArrayOf, int32)
)
ENTRY = struct.Struct(
    ">"
    "q"  # producer_id
    "h"  # epoch (producer epoch)
    "i"  # last_sequence: -1 when no batch is cached
    "q"  # last_offset: inclusive, -1 when no batch is cached
    "i"  # offset_delta: last_offset_delta of the newest cached batch
    "q"  # timestamp: max timestamp of the newest batch / last marker, ms
    "i"  # coordinator_epoch: -1 before any marker
    "q"  # current_txn_first_offset: -1 when no transaction is open
)
CRC_OFFSET = struct.calcsize(">h")  # 2
CRC_START = HEADER.size  # 6: Kafka's PRODUCER_ENTRIES_OFFSET; the count is covered
ENTRIES_OFFSET = HEADER.size + COUNT.size  # 10

if ENTRY.size != 46 or CRC_START != 6:  # pragma: no cover - layout guard
    raise ImportError("producer snapshot layout drifted from Kafka's version-1 schema")


def snapshot_file_name(offset: int) -> str:
    """``<offset, 20 digits>.snapshot`` (P-22)."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offset_of(path: Path) -> int | None:
    """The offset a snapshot file is named after, or None if ``path`` is no snapshot file."""
    match = _SNAPSHOT_NAME.match(path.name)
    return int(match.group(1)) if match else None


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The whole file for ``entries`` (sorted by producer id), CRC filled in."""
    ordered = sorted(entries, key=lambda entry: entry.producer_id)
    body = bytearray(COUNT.pack(len(ordered)))
    for entry in ordered:
        body += ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            entry.last_seq,
            entry.last_data_offset,
            entry.last_offset_delta,
            entry.last_timestamp,
            entry.coordinator_epoch,
            -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
        )
    return HEADER.pack(SNAPSHOT_VERSION, crc32c.crc32c(bytes(body))) + bytes(body)


def check_header(
    data: bytes, *, version: int, min_length: int, source: str, kind: str = "snapshot"
) -> None:
    """The checks every versioned snapshot file of the engine shares (STYLE 6): at least
    ``min_length`` bytes, ``HEADER``'s version equal to ``version``, and its CRC-32C over
    everything after ``CRC_START`` right. CorruptSnapshotError names ``source`` and what is
    wrong."""
    if len(data) < min_length:
        raise CorruptSnapshotError(
            f"{source}: truncated, {len(data)} bytes, expected at least {min_length}"
        )
    found, stored_crc = HEADER.unpack_from(data, 0)
    if found != version:
        raise CorruptSnapshotError(f"{source}: unknown {kind} version {found}, expected {version}")
    computed_crc = crc32c.crc32c(data[CRC_START:])
    if computed_crc != stored_crc:
        raise CorruptSnapshotError(
            f"{source}: CRC-32C mismatch, stored {stored_crc:#010x}, computed {computed_crc:#010x}"
        )


def decode_snapshot(data: bytes, source: str = "snapshot") -> list[ProducerStateEntry]:
    """Parse a whole file; ``source`` names it in errors. Raises CorruptSnapshotError."""
    check_header(data, version=SNAPSHOT_VERSION, min_length=ENTRIES_OFFSET, source=source)
    (count,) = COUNT.unpack_from(data, CRC_START)
    expected_size = ENTRIES_OFFSET + count * ENTRY.size
    if count < 0 or expected_size != len(data):
        raise CorruptSnapshotError(
            f"{source}: {count} entries need {expected_size} bytes, the file has {len(data)}"
        )
    return [_decode_entry(fields) for fields in ENTRY.iter_unpack(data[ENTRIES_OFFSET:])]


def _decode_entry(fields: tuple[int, ...]) -> ProducerStateEntry:
    (
        producer_id,
        epoch,
        last_seq,
        last_offset,
        offset_delta,
        timestamp,
        coordinator_epoch,
        txn_first_offset,
    ) = fields
    batches = (BatchMetadata(last_seq, last_offset, offset_delta, timestamp),)
    return ProducerStateEntry(
        producer_id=producer_id,
        producer_epoch=epoch,
        batch_metadata=batches if last_offset >= 0 else (),
        coordinator_epoch=coordinator_epoch,
        current_txn_first_offset=txn_first_offset if txn_first_offset >= 0 else None,
        last_timestamp=timestamp,
    )


def is_snapshot_temp(name: str) -> bool:
    """A temporary snapshot file left by an interrupted ``write_snapshot`` (any version)."""
    return (is_temp_name(name) and SNAPSHOT_SUFFIX + "." in name) or name.endswith(
        SNAPSHOT_SUFFIX + TEMP_SUFFIX
    )


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Read and check one snapshot file. Raises CorruptSnapshotError, or OSError if unreadable."""
    return decode_snapshot(path.read_bytes(), str(path))


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry]) -> None:
    """Write a snapshot durably (``durable_file``): a reader sees the old file, no file, or the
    whole new one, and a machine crash does not undo it.

    Raises StorageError if writing or an fsync fails (a failed fsync is fatal, not retried).
    """
    write_durably(path, encode_snapshot(entries))
