"""The durable log start offset of one partition: Kafka's ``log-start-offset-checkpoint``, kept
per partition (DESIGN §2, "Deleting records").

Without DeleteRecords a partition's log start offset is its first segment's base offset.
DeleteRecords (``PartitionLog.delete_records``) moves it to any offset up to the high
watermark, possibly into the middle of a segment, and records it in
``<partition>/log-start-offset-checkpoint``, 14 bytes:

    offset  width  field
    ------  -----  -----------------------------------------------------------------------
         0      2  version           int16   = 0
         2      4  crc               uint32  CRC-32C of bytes [6, 14)
         6      8  log_start_offset  int64   inclusive: the first offset readers may read

The partition's log start is then ``max(first segment's base offset, checkpoint)``: retention
deleting segments moves it by the first term, DeleteRecords by the second, and neither ever
lowers it (the file is written only by DeleteRecords, which only raises it, and by
``clamp_to_log_end``, which lowers it only to the log end, where readers already clamp it).

No file: the start was never moved (0). Written only under the partition's lock (one writer at
a time), through ``durable_file`` (a lock-free reader sees the old or the new file whole), and
only after the active segment was synced: records below it are durable before the file says
they were deleted, so a power failure cannot leave the checkpoint past the log end; only
damage from outside can (a lost fsync, files edited by hand): readers then clamp it to the log
end, a writer opening the partition lowers it to the log end (``clamp_to_log_end``) before it
appends, and ``txnlog verify`` reports it. A file that fails its checks is never guessed
around (falling back to the first segment would bring deleted records back): reading it raises
CorruptSnapshotError naming the file, and ``txnlog verify`` reports it.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import crc32c

from txn_log.errors import CorruptSnapshotError
from txn_log.storage.durable_file import is_temp_name, write_durably
from txn_log.storage.producer_snapshot import CRC_START, HEADER, check_header

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "log-start-offset-checkpoint"
CHECKPOINT_VERSION = 0
BODY = struct.Struct(
    ">q"  # log_start_offset: inclusive
)
CHECKPOINT_SIZE = CRC_START + BODY.size  # 14


def encode_log_start(log_start_offset: int) -> bytes:
    body = BODY.pack(log_start_offset)
    return HEADER.pack(CHECKPOINT_VERSION, crc32c.crc32c(body)) + body


def decode_log_start(data: bytes, source: str = CHECKPOINT_FILE) -> int:
    """The offset a whole file holds; CorruptSnapshotError names what is wrong."""
    if len(data) > CHECKPOINT_SIZE:
        raise CorruptSnapshotError(f"{source}: {len(data)} bytes, expected {CHECKPOINT_SIZE}")
    check_header(
        data, version=CHECKPOINT_VERSION, min_length=CHECKPOINT_SIZE, source=source,
        kind="log start offset checkpoint",
    )  # fmt: skip
    offset: int = BODY.unpack_from(data, CRC_START)[0]
    if offset < 0:
        raise CorruptSnapshotError(f"{source}: negative log start offset {offset}")
    return offset


def read_log_start(directory: Path) -> int:
    """The checkpointed log start of the partition in ``directory`` (inclusive); 0 when it was
    never moved (or the directory is gone). Lock-free; CorruptSnapshotError when the file does
    not read back whole."""
    path = directory / CHECKPOINT_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    return decode_log_start(data, str(path))


def write_log_start(directory: Path, log_start_offset: int) -> None:
    """Replace the checkpoint durably (the caller holds the partition lock, has checked that
    the offset only moves forward, and synced the log up to it). Temporary files of a writer
    SIGKILLed mid-write are removed first (only a lock holder writes here)."""
    for leftover in directory.glob(f".{CHECKPOINT_FILE}.*"):
        if is_temp_name(leftover.name):
            leftover.unlink(missing_ok=True)
    write_durably(
        directory / CHECKPOINT_FILE, encode_log_start(log_start_offset), fault_name="log_start"
    )


def clamp_to_log_end(directory: Path, topic_partition: str, log_end_offset: int) -> list[str]:
    """Under the partition lock (recovery, ``txnlog verify --repair``): lower a checkpoint that
    lies past the log end (outside damage, see the module docstring) to the log end, so that
    no append lands below it; what it changed, in words. An unreadable checkpoint is left for
    the operator (``txnlog verify`` reports it) and so is one within the log."""
    try:
        checkpointed = read_log_start(directory)
    except CorruptSnapshotError:
        return []
    if checkpointed <= log_end_offset:
        return []
    write_log_start(directory, log_end_offset)
    message = (
        f"{topic_partition}: the log start offset checkpoint {checkpointed} lay past the log "
        f"end {log_end_offset} (records lost after it was written?); lowered it to the log end"
    )
    logger.warning(message)
    return [message]
