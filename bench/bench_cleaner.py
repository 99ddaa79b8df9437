"""The log cleaner on one compacted partition: how long a cleaning takes, how much it shrinks
the log, and how long it holds the partition lock (the swaps) versus the whole cleaning.

Writes ``--records`` keyed records (``--keys`` distinct keys, 100-byte values, batches of 100,
one segment per ``--segment-mb``), then cleans twice: a first full cleaning, then a second
one after 10 % more records (only the dirty section feeds the map). Prints records/s of
cleaning, bytes before/after, and the longest and total time the partition lock was held.
No target is asserted: the brief asks that the lock is held only for the swap.

    .venv/bin/python bench/bench_cleaner.py [--records N] [--keys K]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from txn_log.clock import SYSTEM_CLOCK
from txn_log.record.codec import encode_batch
from txn_log.storage.log_cleaner import clean_partition
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.segment import LogSegment
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

PER_BATCH = 100


def append_records(log: PartitionLog, first: int, count: int, keys: int) -> None:
    for start in range(first, first + count, PER_BATCH):
        ids = range(start, start + PER_BATCH)
        columns = pa.record_batch(
            [
                pa.array([b"key-%08d" % (i % keys) for i in ids], pa.binary()),
                pa.array([os.urandom(50).hex().encode() for _ in ids], pa.binary()),
            ],
            names=["key", "value"],
        )
        log.append(encode_batch(columns, producer_id=1, producer_epoch=0, base_sequence=start,
                                now_ms=SYSTEM_CLOCK.time_ms()))  # fmt: skip


@contextmanager
def lock_timer(log: PartitionLog, holds: list[float]) -> Iterator[None]:
    original = PartitionLog.maintenance_locked

    @contextmanager
    def timed(self: PartitionLog, *, wait: bool = True) -> Iterator[list[LogSegment]]:
        with original(self, wait=wait) as segments:
            began = time.perf_counter()
            yield segments
            holds.append(time.perf_counter() - began)

    PartitionLog.maintenance_locked = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        PartitionLog.maintenance_locked = original  # type: ignore[method-assign]


def size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def clean_once(log: PartitionLog, label: str, records: int) -> None:
    holds: list[float] = []
    before = size(log.directory)
    began = time.perf_counter()
    with lock_timer(log, holds):
        stats = clean_partition(log, SYSTEM_CLOCK.time_ms(), force=True)
    elapsed = time.perf_counter() - began
    print(
        f"{label}: {elapsed:.2f} s for {records:,} records in the log ({records / elapsed:,.0f} "
        f"records/s); {len(stats.segments_cleaned)} segments rewritten; log {before:,} -> "
        f"{size(log.directory):,} bytes; {stats.records_removed:,} records removed; partition "
        f"lock held {sum(holds) * 1000:.1f} ms in {len(holds)} holds (longest "
        f"{max(holds) * 1000:.1f} ms), {sum(holds) / elapsed:.1%} of the cleaning"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=5_000)
    parser.add_argument("--segment-mb", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        config = TopicConfig.from_mapping(
            {"cleanup.policy": "compact", "segment.bytes": str(args.segment_mb << 20)}
        )
        log = PartitionLog.open(Path(root), TopicPartition("bench", 0), config)
        append_records(log, 0, args.records, args.keys)
        log.roll()
        clean_once(log, "first cleaning", args.records)
        extra = args.records // 10
        append_records(log, args.records, extra, args.keys)
        log.roll()
        clean_once(log, "second cleaning (10 % dirty)", args.records + extra)
        log.close()


if __name__ == "__main__":
    main()
