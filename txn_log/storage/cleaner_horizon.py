"""What the log cleaner has done to a partition, for the state snapshots taken of it (C-22, C-02).

A state snapshot (``state_snapshot``) is tied to the batch that ends at its offset by that
batch's CRC. The cleaner rewrites or removes such batches, so a snapshot loader needs to know
whether a changed batch is the cleaner's doing, and whether the cleaner removed anything the
snapshot's tail must replay. The cleaner records both in ``<partition>/cleaner-horizon``,
durably, *before* it swaps in a cleaned segment (so no process ever sees a cleaned segment the
file does not cover); each value only grows:

    offset  width  field
    ------  -----  -----------------------------------------------------------------------
         0      2  version             int16   = 1
         2      4  crc                 uint32  CRC-32C of bytes [6, 22)
         6      8  cleaned_end_offset  int64   exclusive: segments below it may be rewritten
        14      8  removed_end_offset  int64   exclusive: every tombstone or COMMIT/ABORT marker
                                               the cleaner removed lies below it

What the cleaner removes otherwise (a record superseded by a newer one with its key, aborted
data) needs no record: a snapshot holds the state below its offset, and whatever supersedes a
record after it comes after it too, in the snapshot's tail.

No file: the partition was never cleaned (both 0). A file that fails its checks: unknown, so
``removed_end_offset`` is taken as unbounded (no snapshot trusts what the cleaner left) and
``cleaned_end_offset`` as 0. Written only under the partition's ``.cleaner.lock`` (one writer),
through ``durable_file`` (readers see the old or the new file whole); read without a lock.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from txn_log.errors import CorruptSnapshotError
from txn_log.storage.durable_file import is_temp_name, write_durably
from txn_log.storage.producer_snapshot import CRC_START, HEADER, check_header

HORIZON_FILE = "cleaner-horizon"
HORIZON_VERSION = 1
BODY = struct.Struct(
    ">"
    "q"  # cleaned_end_offset: exclusive
    "q"  # removed_end_offset: exclusive
)
UNBOUNDED = 2**63 - 1


@dataclass(frozen=True, slots=True)
class CleanerHorizon:
    """See the module docstring; offsets exclusive."""

    cleaned_end_offset: int = 0
    removed_end_offset: int = 0

    def merged(self, cleaned_end_offset: int, removed_end_offset: int) -> CleanerHorizon:
        return CleanerHorizon(
            max(self.cleaned_end_offset, cleaned_end_offset),
            max(self.removed_end_offset, removed_end_offset),
        )


def encode_horizon(horizon: CleanerHorizon) -> bytes:
    body = BODY.pack(horizon.cleaned_end_offset, horizon.removed_end_offset)
    return HEADER.pack(HORIZON_VERSION, crc32c.crc32c(body)) + body


def decode_horizon(data: bytes, source: str = HORIZON_FILE) -> CleanerHorizon:
    """Parse and check a whole file; CorruptSnapshotError names what is wrong."""
    size = CRC_START + BODY.size
    check_header(data, version=HORIZON_VERSION, min_length=size, source=source, kind="horizon")
    if len(data) != size:
        raise CorruptSnapshotError(f"{source}: {len(data)} bytes, expected {size}")
    cleaned, removed = BODY.unpack_from(data, CRC_START)
    if cleaned < 0 or removed < 0:
        raise CorruptSnapshotError(f"{source}: negative offsets {cleaned}, {removed}")
    return CleanerHorizon(cleaned, removed)


def read_horizon(directory: Path) -> CleanerHorizon:
    """The partition's horizon; (0, 0) when never cleaned, unbounded removals when the file
    does not read back whole (never trust what cannot be checked)."""
    path = directory / HORIZON_FILE
    try:
        return decode_horizon(path.read_bytes(), str(path))
    except FileNotFoundError:
        return CleanerHorizon()
    except (CorruptSnapshotError, OSError):
        return CleanerHorizon(0, UNBOUNDED)


def advance_horizon(directory: Path, cleaned_end_offset: int, removed_end_offset: int) -> None:
    """Raise the recorded horizon to cover a segment about to be swapped in (durably, before
    the swap; under the cleaner lock, so a temporary file of an earlier writer is a leftover of
    one SIGKILLed, removed here). A corrupt file is replaced by an unbounded one."""
    for leftover in directory.glob(f".{HORIZON_FILE}.*"):  # of a writer SIGKILLed mid-write
        if is_temp_name(leftover.name):
            leftover.unlink(missing_ok=True)
    current = read_horizon(directory)
    merged = current.merged(cleaned_end_offset, removed_end_offset)
    if merged != current or not (directory / HORIZON_FILE).exists():
        write_durably(
            directory / HORIZON_FILE, encode_horizon(merged), fault_name="cleaner.horizon"
        )
