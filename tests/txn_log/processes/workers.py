"""Worker programs run as real OS processes by the concurrency and crash tests.

Run as ``python -m tests.txn_log.processes.workers ROLE LOG_DIR ...``; each role prints one line
per acknowledged action to stdout (flushed), so the parent learns what was acknowledged even
when it kills the worker with SIGKILL.
"""

from __future__ import annotations

import json
import sys
import time

import pyarrow as pa

from txn_log.log import Log
from txn_log.record.codec import decode_batch, encode_batch
from txn_log.topic_partition import TopicPartition


def make_batch(writer: int, first_seq: int, count: int, value_size: int) -> pa.RecordBatch:
    pad = b"x" * max(value_size - 24, 0)
    values = [b"w%d-%010d|" % (writer, first_seq + i) + pad for i in range(count)]
    keys = [b"k%d" % writer] * count
    return pa.record_batch(
        [pa.array(keys, pa.binary()), pa.array(values, pa.binary())], names=["key", "value"]
    )


def write(
    log_dir: str, topic: str, writer: int, batches: int, per_batch: int, value_size: int, sync: bool
) -> None:
    """Append ``batches`` idempotent batches; print the offsets of each acknowledged one."""
    log = Log.open(log_dir)
    partition = log.partition_log(TopicPartition(topic, 0))
    producer_id = log.producer_ids.generate_producer_id()
    for b in range(batches):
        seq = b * per_batch
        data = encode_batch(
            make_batch(writer, seq, per_batch, value_size),
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=seq,
            now_ms=int(time.time() * 1000),
        )
        result = partition.append(data, sync=sync)
        print(
            json.dumps(
                {
                    "writer": writer,
                    "batch": b,
                    "base_offset": result.base_offset,
                    "last_offset": result.last_offset,
                }
            ),
            flush=True,
        )


def read(log_dir: str, topic: str, expected: int, timeout_s: float) -> None:
    """Tail the partition lock-free until ``expected`` records were seen; print what was seen."""
    log = Log.open(log_dir)
    partition = log.partition_log(TopicPartition(topic, 0))
    seen: list[str] = []
    offsets: list[int] = []
    next_offset = 0
    deadline = time.monotonic() + timeout_s
    while len(seen) < expected and time.monotonic() < deadline:
        for _, batch in partition.read(next_offset):
            decoded = decode_batch(batch)  # verifies the CRC: a torn read would raise
            for offset, value in zip(
                decoded.records.column("offset").to_pylist(),
                decoded.records.column("value").to_pylist(),
                strict=True,
            ):
                if offset >= next_offset:
                    offsets.append(offset)
                    seen.append(value.split(b"|")[0].decode())
            next_offset = decoded.header.next_offset
    print(json.dumps({"values": seen, "offsets": offsets}), flush=True)


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    if role == "write":
        write(
            args[0],
            args[1],
            int(args[2]),
            int(args[3]),
            int(args[4]),
            int(args[5]),
            args[6] == "sync",
        )
    elif role == "read":
        read(args[0], args[1], int(args[2]), float(args[3]))
    else:
        raise SystemExit(f"unknown role {role!r}; valid roles are write, read")
