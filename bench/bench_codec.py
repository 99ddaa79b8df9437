"""Throughput of the record batch codec: Arrow columns <-> Kafka v2 batches, single core.

Run: ``.venv/bin/python bench/bench_codec.py [--records N] [--repeat R]``

Encodes and decodes 1,000,000 records (16-byte keys, 100-byte values, realistic millisecond
timestamps, no headers) in batches of 1,000 records, with no compression and with lz4 and
zstd. Prints records/s and payload MB/s (key + value bytes, 10^6 bytes per MB) for the best
of ``--repeat`` runs, and PASS/MISS against the targets for the uncompressed path:
decode into Arrow >= 2,000,000 records/s, encode from Arrow >= 1,000,000 records/s. The
compressed lines are for information (codec time dominates them). Never asserts.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from txn_log.record.batch_header import Compression
from txn_log.record.codec import decode_batch, encode_batch

BATCH_RECORDS = 1_000
KEY_BYTES = 16
VALUE_BYTES = 100
NOW_MS = 1_700_000_000_000
TARGETS = {"encode": 1_000_000, "decode": 2_000_000}


def make_batches(records: int) -> list[pa.RecordBatch]:
    """Record batches of 1,000 rows; values are text-like so that codecs have work to do."""
    rng = np.random.default_rng(7)
    words = np.array([b"kafka", b"log", b"offset", b"epoch", b"commit", b"abort", b"txn", b"id"])
    batches = []
    for start in range(0, records, BATCH_RECORDS):
        count = min(BATCH_RECORDS, records - start)
        keys = [f"key-{start + i:012d}".encode() for i in range(count)]
        picks = rng.integers(0, len(words), size=(count, 20))
        values = [b" ".join(words[row])[:VALUE_BYTES].ljust(VALUE_BYTES, b".") for row in picks]
        stamps = NOW_MS + (start + np.arange(count)) // 10
        batches.append(
            pa.record_batch(
                [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(stamps)],
                names=["key", "value", "timestamp"],
            )
        )
    return batches


def best_seconds(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def report(codec: str, operation: str, records: int, seconds: float) -> None:
    rate = records / seconds
    megabytes = records * (KEY_BYTES + VALUE_BYTES) / seconds / 1e6
    target = TARGETS[operation]
    verdict = ("PASS" if rate >= target else "MISS") if codec == "none" else "info"
    print(
        f"{codec:<5} {operation:<6} {rate:>13,.0f} {megabytes:>9.1f}   >= {target:>9,}  {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pa.set_cpu_count(1)  # single core: no Arrow worker threads
    pa.set_io_thread_count(1)
    columns = make_batches(args.records)
    print(
        f"{args.records:,} records, {KEY_BYTES} B keys, {VALUE_BYTES} B values, "
        f"{BATCH_RECORDS:,} records/batch, best of {args.repeat}"
    )
    print(f"{'codec':<5} {'op':<6} {'records/s':>13} {'MB/s':>9}   {'target rec/s':>12}  result")
    for codec in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
        name = codec.name.lower()

        def encode_all(codec: Compression = codec) -> list[bytes]:
            return [encode_batch(c, now_ms=NOW_MS, compression=codec) for c in columns]

        encoded = encode_all()
        decoded_rows = sum(decode_batch(b).records.num_rows for b in encoded)
        if decoded_rows != args.records:
            print(f"{name}: decoded {decoded_rows} of {args.records} records: WRONG")
        report(name, "encode", args.records, best_seconds(encode_all, args.repeat))
        seconds = best_seconds(lambda e=encoded: [decode_batch(b) for b in e], args.repeat)
        report(name, "decode", args.records, seconds)
        size = sum(map(len, encoded))
        print(f"      {size / 1e6:.1f} MB of batches ({size / args.records:.1f} B/record)")


if __name__ == "__main__":
    main()
