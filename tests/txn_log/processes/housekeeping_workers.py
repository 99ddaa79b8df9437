"""Worker programs for the housekeeping and producer-id tests, run as real OS processes.

Run as ``python -m tests.txn_log.processes.housekeeping_workers ROLE LOG_DIR ...``. Each role
prints one line per step to stdout (flushed), so the parent knows where the worker is even when
it stops or kills it.

Roles:
    hold_housekeeping LOG_DIR        take the housekeeping lock as a pass does, then sleep
                                     (a process stopped in the middle of a pass)
    hold_partition LOG_DIR TOPIC     take a partition's lock as an append does, then sleep
                                     (a writer stopped in the middle of an append)
    issue_ids LOG_DIR COUNT BLOCK    generate COUNT producer ids, blocks of BLOCK, one per line
    tail LOG_DIR TOPIC END TIMEOUT   read partition 0 lock-free up to offset END while retention
                                     deletes under it; jump to the log start when told the data
                                     is gone (as ``failOnDataLoss=false``); print a summary
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from txn_log.errors import OffsetOutOfRangeError
from txn_log.log import Log
from txn_log.log_dir.housekeeping import HousekeepingLock
from txn_log.log_dir.producer_id_manager import ProducerIdManager
from txn_log.record.codec import decode_batch
from txn_log.topic_partition import TopicPartition


def hold_housekeeping(log_dir: str) -> None:
    lock = HousekeepingLock(Path(log_dir))
    if not lock.try_acquire():
        raise SystemExit("the housekeeping lock is already held")
    print("held", flush=True)
    time.sleep(600)


def hold_partition(log_dir: str, topic: str) -> None:
    log = Log.open(log_dir, housekeeping_interval_ms=None)
    partition = log.partition_log(TopicPartition(topic, 0))
    with partition._lock:  # as ``append`` holds it while it writes one batch
        print("held", flush=True)
        time.sleep(600)


def issue_ids(log_dir: str, count: int, block_size: int) -> None:
    manager = ProducerIdManager(Path(log_dir), block_size=block_size)
    for _ in range(count):
        print(manager.generate_producer_id(), flush=True)


def tail(log_dir: str, topic: str, end: int, timeout_s: float) -> None:
    log = Log.open(log_dir, housekeeping_interval_ms=None)
    partition = log.partition_log(TopicPartition(topic, 0))
    next_offset, records, jumps, last = 0, 0, 0, -1
    deadline = time.monotonic() + timeout_s
    while next_offset < end and time.monotonic() < deadline:
        try:
            for _, batch in partition.read(next_offset):
                decoded = decode_batch(batch)  # checks the CRC: a torn or foreign read raises
                offsets = decoded.records.column("offset").to_pylist()
                fresh = [o for o in offsets if o >= next_offset]
                if fresh and fresh[0] <= last:
                    raise SystemExit(f"offset {fresh[0]} after {last}: not increasing")
                records += len(fresh)
                last = fresh[-1] if fresh else last
                next_offset = decoded.header.next_offset
        except OffsetOutOfRangeError:
            jumps += 1
            next_offset = max(next_offset, partition.log_start_offset)
    print(json.dumps({"next_offset": next_offset, "records": records, "jumps": jumps}), flush=True)


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    if role == "hold_housekeeping":
        hold_housekeeping(args[0])
    elif role == "hold_partition":
        hold_partition(args[0], args[1])
    elif role == "issue_ids":
        issue_ids(args[0], int(args[1]), int(args[2]))
    elif role == "tail":
        tail(args[0], args[1], int(args[2]), float(args[3]))
    else:
        raise SystemExit(
            f"unknown role {role!r}; valid roles are hold_housekeeping, hold_partition, "
            "issue_ids, tail"
        )
