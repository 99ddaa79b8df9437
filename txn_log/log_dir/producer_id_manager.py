"""Producer id allocation: unique for the life of a log directory (P-01, P-02, M-13).

Each process reserves a block of ids at a time from ``producer-ids`` (next free id, int64, and
its CRC-32C), under the file's own lock, and hands them out from memory (M-13: blocks keep the
cost of uniqueness off the common path). A process that dies loses the rest of its block; ids
are never handed out twice, which is all P-02 asks.

The block is reserved durably before any id of it is handed out: the new file is written with
the engine's durable-write rule (``durable_file``: temp file, fsync, rename, directory fsync).
Without the directory fsync a machine crash could undo the rename, and the next process would
reserve the same block again. Crash points ``producer_ids.after_temp_fsync`` and
``producer_ids.after_rename`` let tests kill a process between the steps.

    producer-ids file:  version int16 (=0) | next_free_id int64 | crc uint32 (CRC-32C of the 10
                        bytes before it)
"""

from __future__ import annotations

import struct
import threading
from pathlib import Path

import crc32c

from txn_log.errors import CorruptRecordError
from txn_log.file_lock import FileLock
from txn_log.storage.durable_file import write_durably

RECORD = struct.Struct(
    ">"
    "h"  # version
    "q"  # next_free_id
    "I"  # crc32c of version + next_free_id
)
VERSION = 0
DEFAULT_BLOCK_SIZE = 1000


class ProducerIdManager:
    """Hands out producer ids; safe across threads and processes."""

    def __init__(self, log_dir: Path, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        self._path = log_dir / "producer-ids"
        self._lock = FileLock(log_dir / "producer-ids.lock")
        self._block_size = block_size
        self._next = 0
        self._end = 0  # exclusive end of this process's block
        self._mutex = threading.Lock()

    def generate_producer_id(self) -> int:
        with self._mutex:
            if self._next >= self._end:
                self._next = self._reserve_block()
                self._end = self._next + self._block_size
            producer_id = self._next
            self._next += 1
            return producer_id

    def _reserve_block(self) -> int:
        """The first id of a block now durably reserved for this process (P-02)."""
        with self._lock:
            start = self._read_next_free()
            payload = struct.pack(">hq", VERSION, start + self._block_size)
            data = payload + struct.pack(">I", crc32c.crc32c(payload))
            write_durably(self._path, data, fault_name="producer_ids")
            return start

    def _read_next_free(self) -> int:
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return 0
        if len(data) != RECORD.size:
            raise CorruptRecordError(
                f"{self._path}: {len(data)} bytes, expected {RECORD.size}; producer ids can no "
                "longer be guaranteed unique"
            )
        version, next_free, crc = RECORD.unpack(data)
        if version != VERSION or crc != crc32c.crc32c(data[:-4]):
            raise CorruptRecordError(
                f"{self._path}: bad version {version} or CRC; producer ids can no longer be "
                "guaranteed unique"
            )
        return int(next_free)
