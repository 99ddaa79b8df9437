"""Lock-free scans while another process appends, and torn tails left by killed writers
(DESIGN §3; F-25, F-26: the readable end is the end of the last complete valid batch; P-24,
X-11: a torn tail is truncated and reported, corruption before it is an error).

Writers are real processes (``scan_workers``): their batches reach the file in two ``pwrite``
calls, with a pause or a SIGKILL in between, which is what the kernel may show a reader of any
large write, made certain.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa

from txn_log.log import Log
from txn_log.record.codec import encode_batch
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[3]
TXNLOG = str(Path(sys.executable).with_name("txnlog"))
TP = TopicPartition("shared", 0)
FIRST_SEGMENT = "00000000000000000000.log"


def spawn(module: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", f"tests.txn_log.processes.{module}", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(module: str, *args: object) -> tuple[int, list[str]]:
    """Run a worker to its end (or death); its return code and acknowledgement lines."""
    proc = spawn(module, *args)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, -signal.SIGKILL), err
    return proc.returncode, out.splitlines()


def verify(log_dir: Path, *args: str) -> tuple[int, dict[str, list[dict[str, object]]]]:
    result = subprocess.run(
        [TXNLOG, "verify", str(log_dir), "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.returncode, json.loads(result.stdout)


def read_to_the_end(log: Log, start_offset: int = 0) -> int:
    """Read from ``start_offset`` to the end; check offsets are contiguous; return the end."""
    next_offset = start_offset
    consumer = log.consumer("read_uncommitted")
    for header, records in consumer.iter_record_batches(TP, start_offset):
        assert header.base_offset == next_offset, (header.base_offset, next_offset)
        assert records.column("offset").to_pylist() == list(range(next_offset, header.next_offset))
        next_offset = header.next_offset
    return next_offset


# --- item 7: lock-free scans sharing one segment object ------------------------------------------


def test_reader_threads_sharing_a_log_see_no_false_corruption_while_a_process_appends(
    tmp_path: Path,
) -> None:
    """Issue 12 item 7. Scans of one segment object in several threads judged "invalid below
    the valid end" against a mark that *other* scans had advanced meanwhile: a batch that was
    half-written when a scan took its file size read as corruption once another thread had
    seen it completed."""
    log_dir = tmp_path / "log"
    log = Log.open(log_dir)
    log.create_topic("shared")
    batches, per_batch = 150, 20
    writer = spawn(
        "scan_workers", "write_in_pieces", log_dir, "shared", 0, batches, per_batch, 500, 2
    )
    errors: list[BaseException] = []
    reads = [0, 0, 0]

    def reader(index: int) -> None:
        try:
            while writer.poll() is None and not errors:
                read_to_the_end(log)
                reads[index] += 1
        except BaseException as error:  # reported by the test's own thread
            errors.append(error)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    out, err = writer.communicate(timeout=120)
    for thread in threads:
        thread.join(timeout=60)
    assert writer.returncode == 0, err
    assert not errors, repr(errors[0])
    assert all(reads), reads
    assert len(out.splitlines()) == batches
    assert read_to_the_end(log) == batches * per_batch
    log.close()


# --- item 8: a torn tail is cut before a roll moves past it --------------------------------------


def test_a_torn_tail_is_cut_before_an_append_rolls_a_new_segment(tmp_path: Path) -> None:
    """Issue 12 item 8. A process that had the partition open appends after a writer died
    mid-batch; the append rolls. The torn bytes used to stay in what became an older segment,
    where ``txnlog verify`` calls them corruption before the tail and cannot repair them."""
    log_dir = tmp_path / "log"
    log = Log.open(log_dir)
    log.create_topic("shared", config={"segment.bytes": "100000"})
    partition = log.partition_log(TP)  # open before the writer dies: no recovery at open
    code, acks = run("workers", "write", log_dir, "shared", 0, 4, 10, 2000, "sync")
    assert (code, len(acks)) == (0, 4)
    segment = log_dir / "shared-0" / FIRST_SEGMENT
    valid_end = segment.stat().st_size
    code, acks = run("scan_workers", "die_mid_batch", log_dir, "shared", 1, 10, 1000, 3000)
    assert (code, acks) == (-signal.SIGKILL, [])
    assert segment.stat().st_size > valid_end  # the dead writer's torn batch

    values = pa.array([b"r%d" % i + b"x" * 2000 for i in range(10)], pa.binary())
    batch = encode_batch(pa.record_batch([values], names=["value"]), now_ms=int(time.time() * 1000))
    assert partition.append(batch, sync=True).base_offset == 40
    assert [s.base_offset for s in partition.segments] == [0, 40]  # it rolled
    assert segment.stat().st_size == valid_end  # the torn bytes are gone
    code, report = verify(log_dir)
    assert (code, report["problems"]) == (0, []), report
    assert read_to_the_end(log) == 50
    log.close()


def test_an_abort_marker_written_over_a_torn_tail_keeps_its_aborted_transaction_entry(
    tmp_path: Path,
) -> None:
    """A sibling of item 8 (B-10, B-12). An ABORT's ``.txnindex`` entry is written before its
    marker; cutting a torn tail on the way to writing the marker used to drop every entry at
    or past the log end, the new one included: the aborted records became visible to
    read_committed."""
    log_dir = tmp_path / "log"
    log = Log.open(log_dir)
    log.create_topic("shared")
    producer = log.producer("doomed")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(3):
        producer.send("shared", b"aborted-%d" % i, partition=0)
    producer.flush()  # the partition is open in this process from here on
    code, acks = run("scan_workers", "die_mid_batch", log_dir, "shared", 1, 10, 1000, 3000)
    assert (code, acks) == (-signal.SIGKILL, [])
    producer.abort_transaction()
    partition = log.partition_log(TP)
    assert partition.log_end_offset == 4  # three records and the ABORT marker
    assert [t.last_offset for t in partition.collect_aborted_txns(0, 4)] == [3]
    assert log.consumer("read_committed").read(TP, 0) == []
    log.close()


# --- item 6: a torn value that holds a record batch ----------------------------------------------


def test_a_writer_killed_inside_a_value_holding_a_record_batch_leaves_a_repairable_torn_tail(
    tmp_path: Path,
) -> None:
    """Issue 12 item 6. The dead writer's batch holds one record whose value is a whole record
    batch (with the offsets the log's next batch would have). Recovery used to find that batch
    inside the torn bytes and refuse to open the partition; ``verify --repair`` refused too."""
    log_dir = tmp_path / "log"
    Log.open(log_dir).create_topic("shared")
    code, acks = run("workers", "write", log_dir, "shared", 0, 3, 10, 100, "sync")
    assert (code, len(acks)) == (0, 3)
    segment = log_dir / "shared-0" / FIRST_SEGMENT
    valid_end = segment.stat().st_size
    code, acks = run("scan_workers", "die_mid_value", log_dir, "shared", 5, 512)
    assert (code, acks) == (-signal.SIGKILL, [])
    torn = segment.stat().st_size - valid_end
    assert torn > 512
    copy = tmp_path / "copy"
    shutil.copytree(log_dir, copy)

    code, found = verify(log_dir)
    assert code == 1
    (problem,) = found["problems"]
    assert (problem["file"], problem["position"]) == (str(segment), valid_end)
    assert problem["repairable"] and "torn tail" in str(problem["problem"]), problem
    code, repaired = verify(log_dir, "--repair")
    assert (code, repaired["problems"]) == (0, []), repaired
    assert any(f"torn tail of {torn} bytes" in line for line in repaired["repaired"]), repaired
    assert segment.stat().st_size == valid_end

    log = Log.open(copy)  # opening recovers as well: the torn batch is dropped and reported
    partition = log.partition_log(TP)
    assert partition.log_end_offset == 30
    assert any(f"torn tail of {torn} bytes" in line for line in partition.last_recovery)
    assert read_to_the_end(log) == 30
    log.close()
