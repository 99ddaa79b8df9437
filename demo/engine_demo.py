"""The engine-only demo (``python demo/engine_demo.py``).

Until the Spark source and sink land, this is the engine-only job: several writer *processes*
append idempotent, compressed batches to a 4-partition topic at the same time, one of them
retries every tenth batch (as after a lost acknowledgement); then the log is reopened and read
back, and the job verifies that every record is there exactly once, in per-writer order. It
exits non-zero if that does not hold.
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from txn_log.log import Log
from txn_log.record.batch_header import Compression
from txn_log.record.codec import decode_batch, encode_batch
from txn_log.topic_partition import TopicPartition

TOPIC = "orders"
PARTITIONS = 4
WRITERS = 2
BATCHES_PER_PARTITION = 25
RECORDS_PER_BATCH = 1000


def writer(log_dir: str, writer_id: int) -> None:
    log = Log.open(log_dir)
    codec = Compression.LZ4 if writer_id % 2 else Compression.ZSTD
    for partition in range(PARTITIONS):
        plog = log.partition_log(TopicPartition(TOPIC, partition))
        producer_id = log.producer_ids.generate_producer_id()
        for b in range(BATCHES_PER_PARTITION):
            seq = b * RECORDS_PER_BATCH
            values = [
                b"writer-%d|p%d|%08d|%s" % (writer_id, partition, seq + i, b"x" * 64)
                for i in range(RECORDS_PER_BATCH)
            ]
            keys = [b"customer-%04d" % ((seq + i) % 5000) for i in range(RECORDS_PER_BATCH)]
            data = encode_batch(
                pa.record_batch(
                    [pa.array(keys, pa.binary()), pa.array(values, pa.binary())],
                    names=["key", "value"],
                ),
                producer_id=producer_id,
                producer_epoch=0,
                base_sequence=seq,
                compression=codec,
                now_ms=int(time.time() * 1000),
            )
            first = plog.append(data)
            if b % 10 == 0:  # a retry after a "lost" acknowledgement: answered, not re-written
                retry = plog.append(data)
                if not retry.duplicate or retry.base_offset != first.base_offset:
                    raise SystemExit(f"retry of batch {b} was not de-duplicated: {retry}")
        plog.flush()
    log.close()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="txnlog-demo-") as tmp:
        log_dir = str(Path(tmp) / "log")
        Log.open(log_dir).create_topic(
            TOPIC, partitions=PARTITIONS, config={"segment.bytes": str(4 << 20)}
        )
        started = time.perf_counter()
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=writer, args=(log_dir, w)) for w in range(WRITERS)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        write_s = time.perf_counter() - started
        if any(proc.exitcode != 0 for proc in procs):
            print("a writer process failed", file=sys.stderr)
            return 1

        started = time.perf_counter()
        log = Log.open(log_dir)
        seen: Counter[bytes] = Counter()
        order_ok = True
        for tp in log.partitions(TOPIC):
            plog = log.partition_log(tp)
            last: dict[bytes, int] = {}
            for _, data in plog.read(plog.log_start_offset):
                for value in decode_batch(data).records.column("value").to_pylist():
                    who, _, seq, _ = value.split(b"|")
                    seen[b"|".join((who, tp.topic.encode(), str(tp.partition).encode(), seq))] += 1
                    order_ok &= int(seq) > last.get(who, -1)
                    last[who] = int(seq)
            print(
                f"  {tp}: log end {plog.log_end_offset}, last stable offset "
                f"{plog.last_stable_offset}, segments "
                f"{len(list((Path(log_dir) / tp.directory_name).glob('*.log')))}"
            )
        read_s = time.perf_counter() - started
        expected = WRITERS * PARTITIONS * BATCHES_PER_PARTITION * RECORDS_PER_BATCH
        duplicates = sum(c - 1 for c in seen.values() if c > 1)
        missing = expected - len(seen)
        print(
            f"records written   {expected:>10,} by {WRITERS} processes in {write_s:.2f} s "
            f"({expected / write_s:,.0f} records/s)"
        )
        print(
            f"records read      {sum(seen.values()):>10,} in {read_s:.2f} s "
            f"({sum(seen.values()) / read_s:,.0f} records/s)"
        )
        print(f"duplicates        {duplicates:>10}")
        print(f"missing           {missing:>10}")
        print(f"per-writer order  {'kept' if order_ok else 'BROKEN':>10}")
        ok = duplicates == 0 and missing == 0 and order_ok
        print("exactly once: " + ("YES" if ok else "NO"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
