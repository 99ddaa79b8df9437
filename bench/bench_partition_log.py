"""Append and read through a partition log, beside raw sequential file I/O of the same bytes.

Prints records/s and MB/s for: append (offset assignment, CRC check, index upkeep, producer
state) and read (lock-free batch iteration, CRC check) of pre-encoded batches, and a plain
``os.write`` / ``os.read`` of exactly the same bytes in the same chunks; then the ratio.
Target (issue 2): append+read within 3x of raw file I/O for 1 KB values. Never asserts.

    .venv/bin/python bench/bench_partition_log.py [--records N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from txn_log.clock import SYSTEM_CLOCK
from txn_log.record.codec import encode_batch
from txn_log.storage.partition_log import PartitionLog
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition


def make_batches(records: int, per_batch: int, value_size: int) -> list[bytes]:
    keys = pa.array([b"k%015d" % i for i in range(per_batch)], pa.binary())
    values = pa.array([os.urandom(value_size) for _ in range(per_batch)], pa.binary())
    columns = pa.record_batch([keys, values], names=["key", "value"])
    return [
        encode_batch(
            columns,
            producer_id=1,
            producer_epoch=0,
            base_sequence=b * per_batch,
            now_ms=1_700_000_000_000,
        )
        for b in range(records // per_batch)
    ]


def bench_log(directory: Path, batches: list[bytes]) -> tuple[float, float]:
    log = PartitionLog.open(
        directory,
        TopicPartition("bench", 0),
        TopicConfig(segment_bytes=256 << 20, max_message_bytes=64 << 20),
        clock=SYSTEM_CLOCK,
    )
    started = time.perf_counter()
    for data in batches:
        log.append(data)
    log.flush()
    append_s = time.perf_counter() - started
    started = time.perf_counter()
    read_bytes = sum(len(data) for _, data in log.read(0))
    read_s = time.perf_counter() - started
    if read_bytes != sum(map(len, batches)):
        raise SystemExit(f"read {read_bytes} bytes, wrote {sum(map(len, batches))}")
    log.close()
    return append_s, read_s


def bench_raw(path: Path, batches: list[bytes]) -> tuple[float, float]:
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for data in batches:
        os.write(fd, data)
    os.fdatasync(fd)
    os.close(fd)
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    total = 0
    for data in batches:
        total += len(os.pread(fd, len(data), total))
    os.close(fd)
    return write_s, time.perf_counter() - started


def report(label: str, records: int, nbytes: int, seconds: float) -> None:
    print(
        f"  {label:<28} {records / seconds:>12,.0f} records/s {nbytes / seconds / 1e6:>9,.1f} MB/s"
    )


def run(records: int, value_size: int, per_batch: int) -> None:
    batches = make_batches(records, per_batch, value_size)
    nbytes = sum(map(len, batches))
    print(
        f"{records:,} records, {value_size}-byte values, 16-byte keys, {per_batch} per batch "
        f"({nbytes / 1e6:,.1f} MB)"
    )
    with tempfile.TemporaryDirectory(prefix="txnlog-bench-") as tmp:
        append_s, read_s = bench_log(Path(tmp) / "log", batches)
        write_s, raw_read_s = bench_raw(Path(tmp) / "raw", batches)
    report("partition log append", records, nbytes, append_s)
    report("partition log read", records, nbytes, read_s)
    report("raw file write", records, nbytes, write_s)
    report("raw file read", records, nbytes, raw_read_s)
    ratio = (append_s + read_s) / (write_s + raw_read_s)
    print(f"  append+read / raw write+read = {ratio:.2f}x")
    return_ratio.append((value_size, ratio))


return_ratio: list[tuple[int, float]] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    run(args.records, 100, 1000)
    run(max(args.records // 5, 1000), 1024, 1000)
    for value_size, ratio in return_ratio:
        if value_size == 1024:
            verdict = "PASS" if ratio <= 3.0 else "MISS"
            print(
                f"target append+read within 3x of raw I/O for 1 KB values: {ratio:.2f}x {verdict}"
            )


if __name__ == "__main__":
    main()
