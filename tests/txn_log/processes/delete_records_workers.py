"""Worker programs for the DeleteRecords process tests, run as real OS processes.

Run as ``python -m tests.txn_log.processes.delete_records_workers ROLE LOG_DIR ...``; each role
prints one line per step (flushed), so the parent knows where it is.

Roles:
    txn LOG_DIR TOPIC COUNT       a transactional producer: sends COUNT records (flushed) and
                                  prints ``open``; on each stdin line ``send N`` sends N more
                                  (prints ``sent``), on ``commit`` commits and prints ``done``
    delete LOG_DIR TOPIC OFFSET   DeleteRecords on partition 0, prints the low watermark, then
                                  SIGKILLs itself: no close, no flush, no ``finally``
    follow LOG_DIR TOPIC END      a read_committed reader of partition 0 from offset 0 until its
                                  position reaches END: jumps to the log start when told its
                                  position was deleted (as ``failOnDataLoss=false``); prints
                                  ``at N`` whenever its position moves, then the offsets it
                                  read and how often it jumped, as JSON
    housekeep LOG_DIR SECONDS     housekeeping passes (retention, the cleaner) back to back
                                  for SECONDS; prints the passes run
    starts LOG_DIR TOPIC SECONDS  samples partition 0's log start, lock-free, for SECONDS;
                                  prints every value seen, in order, as JSON
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from txn_log.errors import OffsetOutOfRangeError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def txn(log_dir: str, topic: str, count: int) -> None:
    log = Log.open(log_dir, housekeeping_interval_ms=None)
    producer = log.producer("spanning", transaction_timeout_ms=600_000)
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(count):
        producer.send(topic, b"t%d" % i, partition=0)
    producer.flush()
    print("open", flush=True)
    for line in sys.stdin:
        command = line.split()
        if command[0] == "send":
            for i in range(int(command[1])):
                producer.send(topic, b"u%d" % i, partition=0)
            producer.flush()
            print("sent", flush=True)
        elif command[0] == "commit":
            producer.commit_transaction()
            print("done", flush=True)
            return


def delete(log_dir: str, topic: str, offset: int) -> None:
    log = Log.open(log_dir, housekeeping_interval_ms=None)
    result = log.delete_records({TopicPartition(topic, 0): offset})[TopicPartition(topic, 0)]
    print(json.dumps({"low_watermark": result.low_watermark, "error": str(result.error)}),
          flush=True)  # fmt: skip
    os.kill(os.getpid(), signal.SIGKILL)


def follow(log_dir: str, topic: str, end: int) -> None:
    log = Log.open(log_dir, read_only=True)
    consumer = log.consumer("read_committed")
    tp = TopicPartition(topic, 0)
    position, read, jumps = 0, [], 0
    deadline = time.monotonic() + 120
    while position < end and time.monotonic() < deadline:
        try:
            plan = consumer.read_plan(tp, position)
            records = consumer.read(tp, position)
        except OffsetOutOfRangeError:
            jumps += 1
            position = consumer.start_offset(tp)
            continue
        read += [r.offset for r in records]
        moved = max([position, plan.end, *(r.offset + 1 for r in records)])
        if moved != position:
            print(f"at {moved}", flush=True)
        position = moved
        if not records:
            time.sleep(0.02)
    print(json.dumps({"offsets": read, "jumps": jumps, "position": position}), flush=True)


def housekeep(log_dir: str, seconds: float) -> None:
    log = Log.open(log_dir, housekeeping_interval_ms=None)
    passes, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        passes += log.run_housekeeping().ran
    log.close()
    print(json.dumps({"passes": passes}), flush=True)


def starts(log_dir: str, topic: str, seconds: float) -> None:
    log = Log.open(log_dir, read_only=True)
    reader = log.partition_reader(TopicPartition(topic, 0))
    seen: list[int] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = reader.log_start_offset
        if not seen or seen[-1] != start:
            seen.append(start)
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    if role == "txn":
        txn(args[0], args[1], int(args[2]))
    elif role == "delete":
        delete(args[0], args[1], int(args[2]))
    elif role == "follow":
        follow(args[0], args[1], int(args[2]))
    elif role == "housekeep":
        housekeep(args[0], float(args[1]))
    elif role == "starts":
        starts(args[0], args[1], float(args[2]))
    else:
        raise SystemExit(f"unknown role {role!r}; valid: txn, delete, follow, housekeep, starts")
