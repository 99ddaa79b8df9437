"""Writers whose batches reach the file in pieces, run as real OS processes by
``test_scans_and_torn_tails``.

A ``pwrite`` is not atomic for readers: the kernel copies and publishes a large write page by
page, so a lock-free reader can see the first part of a batch. These roles append through the
real ``PartitionLog.append`` (under the partition lock, offsets assigned by the engine) but make
that window wide and certain: the segment's write is split in two ``pwrite`` calls with a pause
between them (``write_in_pieces``), or the process SIGKILLs itself after the first part, leaving
a torn batch exactly as a writer killed mid-write does (``die_mid_batch``, ``die_mid_value``).

Run as ``python -m tests.txn_log.processes.scan_workers ROLE LOG_DIR TOPIC ...``; acknowledged
batches are printed as by ``workers.write``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import pyarrow as pa

from tests.txn_log.processes.workers import write
from txn_log.log import Log
from txn_log.record.codec import encode_batch
from txn_log.storage import entry_file, segment
from txn_log.topic_partition import TopicPartition


def split_segment_writes(*, keep_back: int | None, pause_s: float, die: bool) -> None:
    """Make this process write each batch to its segment as two ``pwrite`` calls: all but the
    last ``keep_back`` bytes (half when None; at least one byte, at most all but one), then the
    rest; between them sleep ``pause_s`` or, with ``die``, SIGKILL this process."""

    def write_all(fd: int, data: bytes | memoryview, position: int) -> None:
        view = memoryview(data)
        back = len(view) // 2 if keep_back is None else keep_back
        first = min(max(len(view) - back, 1), len(view) - 1)
        entry_file.write_all(fd, view[:first], position)
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(pause_s)
        entry_file.write_all(fd, view[first:], position + first)

    segment.write_all = write_all  # type: ignore[attr-defined]  # the writer's pwrite, split


def die_mid_value(log_dir: str, topic: str, embedded_records: int, keep_back: int) -> None:
    """Append one record whose value is a whole serialized record batch (mirrored Kafka data)
    followed by 1 KiB of padding, and die with the last ``keep_back`` bytes unwritten.

    The embedded batch carries the offsets the log's own next batch would have, so only the
    framing tells it from a batch of the log.
    """
    log = Log.open(log_dir)
    partition = log.partition_log(TopicPartition(topic, 0))
    now = int(time.time() * 1000)
    embedded = encode_batch(
        pa.record_batch(
            [pa.array([b"mirrored-%d" % i for i in range(embedded_records)], pa.binary())],
            names=["value"],
        ),
        base_offset=partition.log_end_offset,
        now_ms=now,
    )
    outer = encode_batch(
        pa.record_batch([pa.array([embedded + b"p" * 1024], pa.binary())], names=["value"]),
        now_ms=now,
    )
    split_segment_writes(keep_back=keep_back, pause_s=0.0, die=True)
    partition.append(outer)


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    if role == "write_in_pieces":  # LOG TOPIC WRITER BATCHES PER_BATCH VALUE_SIZE PAUSE_MS
        split_segment_writes(keep_back=None, pause_s=float(args[6]) / 1000, die=False)
        write(args[0], args[1], int(args[2]), int(args[3]), int(args[4]), int(args[5]), False)
    elif role == "die_mid_batch":  # LOG TOPIC WRITER PER_BATCH VALUE_SIZE KEEP_BACK
        split_segment_writes(keep_back=int(args[5]), pause_s=0.0, die=True)
        write(args[0], args[1], int(args[2]), 1, int(args[3]), int(args[4]), False)
    elif role == "die_mid_value":  # LOG TOPIC EMBEDDED_RECORDS KEEP_BACK
        die_mid_value(args[0], args[1], int(args[2]), int(args[3]))
    else:
        raise SystemExit(
            f"unknown role {role!r}; valid roles are write_in_pieces, die_mid_batch, die_mid_value"
        )
