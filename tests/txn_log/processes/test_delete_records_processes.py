"""DeleteRecords across real OS processes (issue 25 item 7; DESIGN §2 "Deleting records"): a
transactional producer process whose open transaction spans the new start, a read_committed
reader process following the partition, the deleting process SIGKILLed right after the call;
and DeleteRecords while other processes append, run retention and the cleaner (housekeeping),
run ``txnlog verify --repair`` and sample the start. The start is durable, never moves
backward, and no reader ever hangs or reads below it (B-03, B-04, B-17, T-10)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.txn_log.cli.test_cli import txnlog
from tests.txn_log.processes.test_housekeeping_processes import spawn
from txn_log.errors import OffsetOutOfRangeError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

T0 = TopicPartition("t", 0)
S0 = TopicPartition("s", 0)
ROOT = Path(__file__).resolve().parents[3]


def spawn_args(role: str, *args: object) -> list[str]:
    return [sys.executable, "-m", "tests.txn_log.processes.delete_records_workers", role,
            *map(str, args)]  # fmt: skip


def line(worker: subprocess.Popen[str]) -> str:
    assert worker.stdout is not None
    text = worker.stdout.readline()
    if not text:
        raise AssertionError(worker.stderr.read() if worker.stderr else "worker ended")
    return text.strip()


def until(worker: subprocess.Popen[str], expected: str) -> None:
    while line(worker) != expected:
        continue


def finish(worker: subprocess.Popen[str]) -> str:
    out, err = worker.communicate(timeout=180)
    assert worker.returncode == 0, err
    return out.strip().splitlines()[-1]


def test_a_killed_delete_inside_an_open_transaction_holds_the_lso_and_readers_jump_once(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "log"
    with Log.open(log_dir, housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1)
        producer = log.producer()
        for i in range(5):
            producer.send("t", b"v%d" % i, partition=0)
        producer.close()
    follower = spawn("delete_records_workers", "follow", log_dir, "t", 11)
    writer = subprocess.Popen(
        [*spawn_args("txn", log_dir, "t", 3)], cwd=ROOT, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        until(follower, "at 5")  # read 0..4; held at 5 by the transaction about to open
        until(writer, "open")  # its transaction holds offsets 5..7
        deleter = spawn("delete_records_workers", "delete", log_dir, "t", 6)
        assert json.loads(line(deleter)) == {"low_watermark": 6, "error": "None"}
        assert deleter.wait(timeout=60) == -signal.SIGKILL
        with Log.open(log_dir, read_only=True) as after:  # a new process's view of the files
            reader = after.partition_reader(T0)
            assert reader.log_start_offset == 6
            assert reader.last_stable_offset == 6  # not 5 (below the start), not the end
            assert [r.offset for r in after.consumer("read_uncommitted").read(T0, 6)] == [6, 7]
            assert after.consumer().read(T0, 6) == []
            with pytest.raises(OffsetOutOfRangeError):
                after.consumer().read(T0, 5)
        assert writer.stdin is not None
        writer.stdin.write("send 2\ncommit\n")
        writer.stdin.flush()
        until(writer, "done")
        report = json.loads(finish(follower))
        assert report == {"offsets": [0, 1, 2, 3, 4, 6, 7, 8, 9], "jumps": 1, "position": 11}
    finally:
        for worker in (follower, writer):
            worker.kill()
            worker.wait(timeout=30)


def test_the_start_only_moves_forward_while_others_append_clean_retain_and_repair(
    tmp_path: Path,
) -> None:
    """A compact,delete topic with small segments: one process appends, one runs housekeeping
    passes back to back (retention deletes what lies below the start, the cleaner rewrites
    below the LSO), ``txnlog verify --repair`` runs over and over, one samples the start
    lock-free, while this process moves the start forward step by step. Every sample is
    monotonic, the start ends where the last call put it, every record from it on reads back
    in order, and the log verifies clean."""
    log_dir = tmp_path / "log"
    log = Log.open(log_dir, housekeeping_interval_ms=None)
    log.create_topic("s", 1, {"cleanup.policy": "compact,delete", "segment.bytes": 2048,
                              "min.cleanable.dirty.ratio": 0.01, "retention.ms": -1})  # fmt: skip
    writer = spawn("workers", "write", log_dir, "s", 0, 400, 1, 120, "nosync")
    housekeeper = spawn("delete_records_workers", "housekeep", log_dir, 8)
    sampler = spawn("delete_records_workers", "starts", log_dir, "s", 8)
    repairs = 0
    lows: list[int] = []
    reader = log.partition_reader(S0)
    try:
        while writer.poll() is None or repairs < 3:
            end = reader.log_end_offset
            result = log.delete_records({S0: end // 2})[S0]
            assert result.error is None, result.error
            lows.append(result.low_watermark)
            if repairs < 3:
                repaired = txnlog("verify", log_dir, "--repair")
                assert repaired.returncode in (0, 1), repaired.stderr
                repairs += 1
        assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""
        starts = json.loads(finish(sampler))
        assert starts == sorted(starts) and starts[-1] <= lows[-1]
        assert json.loads(finish(housekeeper))["passes"] > 0
    finally:
        for worker in (writer, housekeeper, sampler):
            worker.kill()
            worker.wait(timeout=30)
    assert lows == sorted(lows) and lows[-1] > 0
    log.run_housekeeping()
    start = reader.log_start_offset
    assert start == lows[-1]
    segments = reader.segments
    assert segments[0].base_offset <= start and (
        len(segments) == 1 or segments[1].base_offset > start
    )  # retention deleted every segment wholly below the start, and only those
    with pytest.raises(OffsetOutOfRangeError):
        log.consumer("read_uncommitted").read(S0, start - 1)
    read = [r.offset for r in log.consumer("read_uncommitted").read(S0, start)]
    assert read == sorted(set(read)) and all(o >= start for o in read)
    assert read[-1] == reader.log_end_offset - 1  # the newest record survives every cleaning
    log.close()
    verified = txnlog("verify", log_dir)
    assert verified.returncode == 0, verified.stdout
