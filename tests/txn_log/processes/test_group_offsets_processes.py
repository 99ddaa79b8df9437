"""Group offsets across processes: one group's open transaction hides no other group's offsets.

Kafka keeps pending transactional offsets per group and producer (O-04, O-05), so an open
transaction with offsets for group G1 never delays group G2's offset fetch. Every process here
is a real OS process (``group_workers.py``); the parent keeps one ``Log`` open throughout, so its
cache catches up incrementally while the others write (DESIGN §3).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[3]
WORKER_TIMEOUT_S = 60
IN0 = TopicPartition("in", 0)
OUT0 = TopicPartition("out", 0)


def command(*args: object) -> list[str]:
    return [sys.executable, "-m", "tests.txn_log.processes.group_workers", *map(str, args)]


def run_worker(*args: object) -> list[dict[str, Any]]:
    proc = subprocess.run(
        command(*args), cwd=ROOT, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def committed_elsewhere(log_dir: Path, group: str) -> int | None:
    """What a fresh process reads for ``group`` on ``in-0``."""
    [line] = run_worker("committed", log_dir, group, IN0.topic, IN0.partition)
    offset: int | None = line["offset"]
    return offset


def committed_here(log: Log, group: str) -> int | None:
    found = log.committed(group, [IN0])[IN0]
    return None if found is None else found.offset


class Holder:
    """A worker process holding a transaction open with offsets for one group."""

    def __init__(self, log_dir: Path, transactional_id: str, group: str, offset: int) -> None:
        self.proc = subprocess.Popen(
            command("hold", log_dir, transactional_id, group, IN0.topic, IN0.partition, offset),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the offsets are in the log
        assert line, self.proc.communicate(timeout=WORKER_TIMEOUT_S)[1]
        assert json.loads(line)["step"] == "open"

    def finish(self, outcome: str) -> None:
        out, err = self.proc.communicate(outcome + "\n", timeout=WORKER_TIMEOUT_S)
        assert self.proc.returncode == 0, err
        assert json.loads(out)["step"] == outcome

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=WORKER_TIMEOUT_S)


def new_log(log_dir: Path) -> Log:
    log = Log.open(log_dir)
    log.create_topic("in", partitions=1)
    log.create_topic("out", partitions=1)
    return log


def test_open_offsets_transaction_of_one_group_hides_no_other_groups_commit(
    tmp_path: Path,
) -> None:
    """Issue 12 item 1, O-04, O-05: while process A1 holds G1's offsets in an open transaction
    (and A3 holds G3's), process B's plain commit of G2 = 42 reads as 42 at once in a fresh
    process and in the parent; G1 and G3 stay invisible; at A1's COMMIT G1 appears, at A3's
    ABORT G3 never does, and G2 is untouched by either."""
    log_dir = tmp_path / "log"
    log = new_log(log_dir)
    assert committed_here(log, "G2") is None  # the parent's cache starts before everything
    holders = [Holder(log_dir, "txn-g1", "G1", 7), Holder(log_dir, "txn-g3", "G3", 9)]
    try:
        assert run_worker("commit", log_dir, "G2", IN0.topic, IN0.partition, 42) == [
            {"step": "done"}
        ]
        assert committed_elsewhere(log_dir, "G2") == 42
        assert committed_here(log, "G2") == 42
        assert committed_elsewhere(log_dir, "G1") is None  # O-04: still open
        assert committed_here(log, "G1") is None
        assert committed_here(log, "G3") is None

        holders[0].finish("commit")
        holders[1].finish("abort")
    finally:
        for holder in holders:
            holder.kill()
    assert committed_elsewhere(log_dir, "G1") == 7
    assert committed_here(log, "G1") == 7
    assert committed_elsewhere(log_dir, "G3") is None  # aborted: dropped (O-05)
    assert committed_here(log, "G3") is None
    assert committed_elsewhere(log_dir, "G2") == 42
    assert committed_here(log, "G2") == 42
    assert sorted(log.group_offsets.groups()) == ["G1", "G2"]


def test_copier_restarting_beside_another_groups_open_transaction_copies_exactly_once(
    tmp_path: Path,
) -> None:
    """Issue 12 item 1, O-01: a consume-transform-produce copier (group G2) commits its input
    offsets with each output transaction while an unrelated G1 transaction holds offsets open.
    SIGKILLed after 4 of 10 records, it restarts in a new process from committed(G2) = 4 and
    finishes: the output holds each of the 10 inputs exactly once, in order."""
    log_dir = tmp_path / "log"
    log = new_log(log_dir)
    inputs = [b"record-%02d" % i for i in range(10)]
    producer = log.producer()
    for value in inputs:
        producer.send(IN0.topic, value, partition=0)
    producer.flush()
    holder = Holder(log_dir, "unrelated", "G1", 3)
    try:
        proc = subprocess.run(
            command("copy", log_dir, "copier", "G2", "in", "out", 4),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=WORKER_TIMEOUT_S,
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        first = [json.loads(line) for line in proc.stdout.splitlines()]
        assert first[0] == {"step": "start", "offset": 0}
        assert [line["offset"] for line in first[1:]] == [1, 2, 3, 4]

        second = run_worker("copy", log_dir, "copier", "G2", "in", "out", -1)
        assert second[0] == {"step": "start", "offset": 4}, second
        assert [line["offset"] for line in second[1:]] == list(range(5, 11))
    finally:
        holder.kill()
    output = [r.value for r in Log.open(log_dir).consumer().read(OUT0, 0)]
    assert output == [value.upper() for value in inputs]
    assert committed_here(log, "G2") == 10
    assert committed_here(log, "G1") is None
