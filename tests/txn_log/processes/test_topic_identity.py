"""A topic's identity survives re-creation (Kafka's topic id): no write is ever acknowledged
into a topic that another process deleted (DESIGN §2-3; Kafka's topic ids, KIP-516).

A producer process keeps partition ``t-0`` open (its files and its cached state) while another
process deletes ``t`` and creates a new ``t``. Whatever the producer is told afterwards, an
acknowledged record must be readable, in the new topic, at the offset it was acknowledged at;
a record that could not be written must be reported as an error, never acknowledged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[3]
TP = TopicPartition("t", 0)


def _line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, f"worker ended: {proc.wait()} {proc.stderr.read() if proc.stderr else ''}"
        if line.startswith("{"):
            return dict(json.loads(line))


def _delete_and_recreate(log_dir: Path) -> None:
    """Another process deletes and re-creates the topic (the CLI an operator would use)."""
    for args in (["delete", str(log_dir), "t"], ["create", str(log_dir), "t"]):
        done = subprocess.run(
            [sys.executable, "-m", "txn_log.cli", "topics", *args],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("mode", ["idempotent", "transactional"])
def test_writes_after_the_topic_was_deleted_and_recreated_are_never_acknowledged_and_lost(
    tmp_path: Path, mode: str
) -> None:
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("t", 1)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.txn_log.processes.topic_workers", str(log_dir), "t", mode],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert _line(worker)["step"] == "acked"  # t-0 is open in the worker, state cached
        assert _line(worker)["step"] == "ready"
        _delete_and_recreate(log_dir)
        answers = []
        assert worker.stdin is not None
        for count in (5, 3):
            worker.stdin.write(f"go {count}\n")
            worker.stdin.flush()
            answers.append(_line(worker))
        worker.stdin.close()
        assert worker.wait(timeout=120) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    with Log.open(log_dir) as log:
        visible = {r.value.decode(): r.offset for r in log.consumer().read(TP, 0) if r.value}
    acked = {
        value: offset
        for answer in answers
        if answer["step"] == "acked"
        for value, offset in zip(answer["values"], answer["offsets"], strict=True)
    }
    assert acked, f"nothing was acknowledged after the re-creation: {answers}"
    lost = {value: offset for value, offset in acked.items() if visible.get(value) != offset}
    assert not lost, f"acknowledged but not in the new topic at that offset: {lost}; {answers}"
    errors = [a for a in answers if a["step"] != "acked"]
    for error in errors:  # an error is fine, if it says what happened
        assert "deleted" in error["error"] or "re-created" in error["error"], error
    assert set(visible) == set(acked)  # nothing else in the new topic either
