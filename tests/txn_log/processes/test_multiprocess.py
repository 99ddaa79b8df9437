"""Many OS processes on one partition (DESIGN §3): writers under the file lock, a lock-free
reader that never sees a half-written batch, and SIGKILLed writers whose acknowledged batches
all survive while their torn tails are truncated (TESTING.md scenarios 4 and 6)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from txn_log.log import Log
from txn_log.record.codec import decode_batch
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[3]
TP = TopicPartition("shared", 0)


def spawn(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.txn_log.processes.workers", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_all_values(log_dir: Path) -> tuple[list[str], list[int]]:
    log = Log.open(log_dir)
    values: list[str] = []
    offsets: list[int] = []
    for _, batch in log.partition_log(TP).read(0):
        decoded = decode_batch(batch)
        offsets.extend(decoded.records.column("offset").to_pylist())
        values.extend(
            v.split(b"|")[0].decode() for v in decoded.records.column("value").to_pylist()
        )
    log.close()
    return values, offsets


def test_concurrent_writer_processes_and_a_lock_free_reader(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    Log.open(log_dir).create_topic("shared", config={"segment.bytes": str(256 * 1024)})
    writers, batches, per_batch = 3, 40, 50
    total = writers * batches * per_batch
    reader = spawn("read", log_dir, "shared", total, 120)
    procs = [
        spawn("write", log_dir, "shared", w, batches, per_batch, 200, "nosync")
        for w in range(writers)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert len(out.splitlines()) == batches
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    seen = json.loads(out)

    expected = {f"w{w}-{s:010d}" for w in range(writers) for s in range(batches * per_batch)}
    values, offsets = read_all_values(log_dir)
    assert Counter(values) == Counter(expected)  # no loss, no duplicate
    assert offsets == list(range(total))
    for w in range(writers):  # each writer's order is kept
        mine = [v for v in values if v.startswith(f"w{w}-")]
        assert mine == sorted(mine)
    # the reader, running during the writes, saw exactly the same log, in the same order
    assert seen["values"] == values and seen["offsets"] == offsets
    assert len(list((log_dir / "shared-0").glob("*.log"))) > 1  # segments rolled under load


def test_sigkilled_writers_lose_no_acknowledged_batch(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    log_dir = tmp_path / "log"
    Log.open(log_dir).create_topic("shared", config={"segment.bytes": str(4 << 20)})
    acknowledged: list[dict[str, int]] = []
    for round_ in range(6):
        proc = spawn("write", log_dir, "shared", round_, 1000, 200, 2000, "sync")
        assert proc.stdout is not None
        first = proc.stdout.readline()  # its first acknowledgement: past start-up, mid-stream
        time.sleep(rng.uniform(0.0, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        lines = [first, *out.splitlines()]
        acknowledged.extend(json.loads(line) for line in lines if line.startswith("{"))
        # the next open recovers: every acknowledged batch is there, nothing torn is readable
        values, offsets = read_all_values(log_dir)
        assert offsets == list(range(len(offsets)))
        present = Counter(values)
        for ack in acknowledged:
            first = f"w{ack['writer']}-{ack['batch'] * 200:010d}"
            assert present[first] == 1, (seed, ack)
        assert all(count == 1 for count in present.values())
    assert acknowledged, f"no writer got to acknowledge anything (seed={seed})"


def test_torn_tail_is_truncated_and_reported(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    Log.open(log_dir).create_topic("shared")
    proc = spawn("write", log_dir, "shared", 0, 5, 10, 100, "sync")
    proc.communicate(timeout=60)
    segment = log_dir / "shared-0" / "00000000000000000000.log"
    size = segment.stat().st_size
    with segment.open("r+b") as f:
        f.truncate(size - 7)  # the last batch loses its final bytes
    log = Log.open(log_dir)
    partition = log.partition_log(TP)
    assert partition.log_end_offset == 40
    assert any("torn tail" in line for line in partition.last_recovery)
    assert segment.stat().st_size < size - 7
    values, _ = read_all_values(log_dir)
    assert len(values) == 40


@pytest.mark.parametrize("sync", ["sync", "nosync"])
def test_writer_process_resumes_after_another_process_wrote(tmp_path: Path, sync: str) -> None:
    log_dir = tmp_path / "log"
    log = Log.open(log_dir)
    log.create_topic("shared")
    partition = log.partition_log(TP)
    assert partition.log_end_offset == 0
    proc = spawn("write", log_dir, "shared", 7, 3, 10, 50, sync)
    proc.communicate(timeout=60)
    assert partition.log_end_offset == 30  # this process's cache caught up from the files
    assert partition.last_stable_offset == 30
