"""A process that keeps partition ``t-0`` open and appends to it while another process alters
the topic's config (``test_config_alter_processes.py``, ``test_configs_cli.py``).

``Worker(LOG_DIR, "serve")`` starts ``python -m tests.txn_log.processes.config_workers LOG_DIR
serve``, which opens the log (no background housekeeping), opens ``t-0`` for writing, appends
one record (so the partition and its config are cached), prints ``{"step": "ready"}``, then
answers one JSON command per stdin line with one JSON line:

    {"op": "append", "size": N, "key": "k" | null, "codec": C}
        one record of N value bytes, in codec C (0 none .. 4 zstd), as a client batch:
        {"ok": true, "offset": O, "log_append_time_ms": T, "segments": S}, S the .log files
        of the partition directory now; or {"ok": false, "error": "<ErrorClass>: ..."}
    {"op": "housekeeping"}
        one housekeeping pass: {"ok": true, "cleaned_records": R, "deleted_segments": [..],
        "log_start_offset": L}

``python -m tests.txn_log.processes.config_workers LOG_DIR loop MARKER``: appends records of
2,000 bytes to ``t-0`` as fast as it can, printing each outcome (``{"acked": offset}`` or
``{"refused": "<ErrorClass>: ..."}``), until the file MARKER exists (the other process created
it once its alteration returned); then appends one more and prints its outcome as
``{"after_marker": ...}`` (as ``append`` above) and exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from txn_log.errors import TxnLogError
from txn_log.log import Log
from txn_log.record.batch_header import Compression
from txn_log.record.codec import encode_records
from txn_log.storage.partition_log import PartitionLog
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
ROOT = Path(__file__).resolve().parents[3]


class Worker:
    """This program in its own process, driven by a test one command at a time."""

    def __init__(self, log_dir: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.txn_log.processes.config_workers", str(log_dir), *args],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip

    def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        line = self.proc.stdout.readline()
        assert line, f"worker ended: {self.proc.wait()} {self.proc.stderr.read()}"
        return dict(json.loads(line))

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.line()

    def append(self, size: int, key: str | None = "k", codec: int = 0) -> dict[str, Any]:
        return self.ask(op="append", size=size, key=key, codec=codec)

    def stop(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def report(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def append(log_dir: Path, partition: PartitionLog, command: dict[str, Any]) -> dict[str, Any]:
    key = command.get("key")
    now_ms = int(time.time() * 1000)  # retention judges records by their timestamps
    batch = encode_records(
        [(None if key is None else key.encode(), b"v" * command["size"], now_ms, ())],
        now_ms=now_ms,
        compression=Compression(command.get("codec", 0)),
    )
    try:
        result = partition.append(batch)
    except TxnLogError as error:
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}
    segments = len(list((log_dir / TP.directory_name).glob("*.log")))
    return {
        "ok": True,
        "offset": result.base_offset,
        "log_append_time_ms": result.log_append_time_ms,
        "segments": segments,
    }


def housekeeping(log: Log) -> dict[str, Any]:
    done = log.run_housekeeping()
    mine = done.partitions.get(TP) if done.partitions else None
    return {
        "ok": True,
        "cleaned_records": sum(
            s.records_removed for s in done.cleaned if s.topic_partition == str(TP)
        ),
        "deleted_segments": list(mine.deleted_segments) if mine else [],
        "log_start_offset": mine.log_start_offset if mine else None,
    }


def serve(log_dir: Path) -> None:
    log = Log.open(log_dir, housekeeping_interval_ms=None)
    partition = log.partition_log(TP)
    append(log_dir, partition, {"size": 10, "key": "warm"})
    report(step="ready")
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "append":
            print(json.dumps(append(log_dir, partition, command)), flush=True)
        elif command["op"] == "housekeeping":
            print(json.dumps(housekeeping(log)), flush=True)
    log.close()


def loop(log_dir: Path, marker: Path) -> None:
    log = Log.open(log_dir, housekeeping_interval_ms=None)
    partition = log.partition_log(TP)
    report(step="ready")
    while not marker.exists():
        answer = append(log_dir, partition, {"size": 2000})
        if answer["ok"]:
            report(acked=answer["offset"])
        else:
            report(refused=answer["error"])
    report(after_marker=append(log_dir, partition, {"size": 2000}))
    log.close()


if __name__ == "__main__":
    if sys.argv[2] == "serve":
        serve(Path(sys.argv[1]))
    else:
        loop(Path(sys.argv[1]), Path(sys.argv[3]))
