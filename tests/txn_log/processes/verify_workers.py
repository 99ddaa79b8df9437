"""Worker programs that hold a partition in a state only a live writer shows, for the
``txnlog verify`` tests (issue 12 item 4).

Run as ``python -m tests.txn_log.processes.verify_workers ROLE LOG_DIR TOPIC``:

- ``append-paused``: appends one idempotent batch through the real ``PartitionLog.append``
  (partition lock held), stopping after half of its bytes reached the segment, as a writer
  descheduled inside its write does; prints ``{"paused": ...}``, waits for a line on stdin,
  writes the rest and prints the acknowledgement ``{"base_offset": ..., "last_offset": ...}``.
- ``abort-paused``: a transaction whose ABORT stops after its ``.txnindex`` entry is durable
  and before its marker is written (the ``marker.after_txn_index`` point, B-10); prints
  ``{"paused": ...}``, waits for a line on stdin, finishes the abort, prints ``{"aborted": ...}``.
- ``churn``: creates, fills (rolling segments), trims by retention and deletes topics
  ``churn-<i>`` in a loop, ``LOG_DIR TOPIC`` giving the log and the number of rounds; prints
  ``{"rounds": n}`` at the end.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import txn_log.storage.partition_log as partition_log_module
import txn_log.storage.segment as segment_module
from tests.txn_log.processes.workers import make_batch
from txn_log.log import Log
from txn_log.record.codec import encode_batch
from txn_log.topic_partition import TopicPartition


def pause(**state: Any) -> None:
    print(json.dumps({"paused": state}), flush=True)
    sys.stdin.readline()


def append_paused(log_dir: str, topic: str) -> None:
    log = Log.open(log_dir)
    partition = log.partition_log(TopicPartition(topic, 0))
    write_all = segment_module.write_all

    def half_then_pause(fd: int, data: bytes | memoryview, position: int) -> None:
        view = memoryview(data)
        half = len(view) // 2
        write_all(fd, view[:half], position)
        pause(position=position, size=len(view), written=half)
        write_all(fd, view[half:], position + half)

    segment_module.write_all = half_then_pause  # type: ignore[assignment]
    batch = encode_batch(
        make_batch(9, 0, 50, 1000),
        producer_id=log.producer_ids.generate_producer_id(),
        producer_epoch=0,
        base_sequence=0,
        now_ms=int(time.time() * 1000),
    )
    result = partition.append(batch, sync=True)
    print(json.dumps({"base_offset": result.base_offset, "last_offset": result.last_offset}))


def abort_paused(log_dir: str, topic: str) -> None:
    log = Log.open(log_dir)
    crash_point = partition_log_module.crash_point

    def pause_at(name: str) -> None:
        if name == "marker.after_txn_index":
            pause(point=name)
        crash_point(name)

    partition_log_module.crash_point = pause_at  # type: ignore[assignment]
    producer = log.producer("paused-abort")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"to be aborted", partition=0)
    producer.flush()
    producer.abort_transaction()
    print(json.dumps({"aborted": producer.producer_id}), flush=True)


def churn(log_dir: str, rounds: int) -> None:
    log = Log.open(log_dir)
    for i in range(rounds):
        producer = log.producer()  # a re-created topic knows no producer: start afresh
        topic = f"churn-{i % 3}"
        config = {"segment.bytes": "4096", "retention.bytes": "8192"}
        log.create_topic(topic, partitions=2, config=config)
        for n in range(60):
            producer.send(topic, b"x" * 200, partition=n % 2)
            if n % 10 == 9:
                producer.flush()
        for partition in log.partitions(topic):
            log.partition_log(partition).delete_old_segments()
        log.delete_topic(topic)
    print(json.dumps({"rounds": rounds}), flush=True)


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    if role == "append-paused":
        append_paused(args[0], args[1])
    elif role == "abort-paused":
        abort_paused(args[0], args[1])
    elif role == "churn":
        churn(args[0], int(args[1]))
    else:
        raise SystemExit(
            f"unknown role {role!r}; valid roles are append-paused, abort-paused, churn"
        )
