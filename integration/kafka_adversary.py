"""Kafka-mode queries driven the way Spark drives them, as real processes an adversary can kill
(issue 29): the driver and its tasks of ``test_kafka_adversarial.py``.

    python -m integration.kafka_adversary driver BOOTSTRAP STATE NAME TOPICS OUT MAX [MINPARTS]
    python -m integration.kafka_adversary task OUT NAME BATCH TASK ATTEMPT PARTITION

``driver`` is one run of a streaming query until it has read what was readable when it
started (Trigger.AvailableNow): Spark's micro-batch loop over a checkpoint of its own in
``STATE`` (``offsets/<n>`` written before batch *n* runs, ``commits/<n>`` after its sink
committed, so a driver killed anywhere re-runs its last uncommitted batch from the same two
positions, and batch 0 from ``initialOffset`` resolved again, as Spark does). It calls the
txnlog source (``StreamPlanner``: ``initialOffset``, ``latestOffset``, ``partitions``) and the
Kafka-mode sink (``SinkCommitProtocol.commit`` with the consumed offsets, ``abort``) exactly
as Spark's driver does, and runs each read task as a ``task`` process, two at a time (two
cores), retrying a failed attempt up to ``ATTEMPTS`` times like ``local[2,3]``. With
``ADVERSARY_TASK_CRASH=<crash point>`` its first task attempt runs armed with that
``TXNLOG_CRASH_POINT``, and with ``ADVERSARY_DRIVER_DIES_WITH_TASK=1`` the driver kills its
own process group when that attempt died (no retry fences it: a zombie transaction stays
open). It runs in a session of its own: the adversary SIGKILLs its process group (driver and
tasks, as a driver machine that dies). It prints ``batches <n>`` when it caught up.

``task`` is one attempt of write task ``TASK``: it reads its input partition (a pickled
``KafkaInputPartition``, base64) with ``read_kafka_partition`` and writes ``key`` and ``value``
to ``OUT`` with the sink's own ``write_task``; it prints its commit message (base64 pickle).

Values are unique across the run, so a duplicate or a loss in an output topic is a fact, not an
inference.
"""

from __future__ import annotations

import base64
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ATTEMPTS = 3
PARALLEL = 2
TASK_TIMEOUT_S = 180


def _sink_options(bootstrap: str, out: str) -> Any:
    from txn_sink.options import SinkOptions

    return SinkOptions.parse(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": out,
            "transaction.timeout.ms": "900000",  # Kafka's default: a zombie stays open
        }
    )


def _identity(options: Any, name: str) -> Any:
    from commit_protocol.naming import streaming_sink_id

    return options.identity(streaming_sink_id(name), name)


class TaskFailed(Exception):
    """A task failed ``ATTEMPTS`` times: the driver aborts the batch, as Spark does."""

    def __init__(self, messages: list[Any]) -> None:
        super().__init__("a task failed every attempt")
        self.messages = messages


class Checkpoint:
    """Spark's offset and commit logs, one file a batch."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "offsets").mkdir(parents=True, exist_ok=True)
        (root / "commits").mkdir(parents=True, exist_ok=True)

    def last_planned(self) -> int | None:
        batches = [int(p.name) for p in (self.root / "offsets").iterdir() if p.name.isdigit()]
        return max(batches) if batches else None

    def offsets(self, batch: int) -> Any:
        from offsets.partition_offsets import PartitionOffsets

        return PartitionOffsets.from_json((self.root / "offsets" / str(batch)).read_text())

    def write_offsets(self, batch: int, end: Any) -> None:
        _write_atomically(self.root / "offsets" / str(batch), end.to_json())

    def committed(self, batch: int) -> bool:
        return (self.root / "commits" / str(batch)).exists()

    def write_commit(self, batch: int) -> None:
        _write_atomically(self.root / "commits" / str(batch), "{}")


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def run_driver(argv: list[str]) -> int:
    from offsets.admission import AdmissionLimit
    from txn_source.options import parse_source_options
    from txn_source.stream_planner import StreamPlanner

    bootstrap, state, name, topics, out, max_rows, *rest = argv
    source = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topics,
        "startingOffsets": "earliest",
        "failOnDataLoss": "false",
        "kafkaConsumer.pollTimeoutMs": "30000",
    }
    if rest:
        source["minPartitions"] = rest[0]
    planner = StreamPlanner(parse_source_options(source, streaming=True))
    checkpoint = Checkpoint(Path(state))
    crash = os.environ.get("ADVERSARY_TASK_CRASH")
    limit = AdmissionLimit(max_rows=int(max_rows))
    planner.fix_target()
    batches = 0
    while True:
        last = checkpoint.last_planned()
        if last is not None and not checkpoint.committed(last):
            batch, end = last, checkpoint.offsets(last)
        else:
            batch = 0 if last is None else last + 1
            start = _start(checkpoint, planner, batch)
            end = planner.latest_offset(start, limit)
            if end == start:
                break  # caught up with the target
            checkpoint.write_offsets(batch, end)
        start = _start(checkpoint, planner, batch)
        tasks = planner.plan(start, end)
        try:
            messages = _run_tasks(tasks, out, name, batch, crash)
        except TaskFailed as failed:
            _abort(bootstrap, out, name, batch, failed.messages)
            return 1
        crash = None
        _commit(bootstrap, out, name, batch, messages, end)
        checkpoint.write_commit(batch)
        batches += 1
    planner.close()
    print(f"batches {batches}", flush=True)
    return 0


def _start(checkpoint: Checkpoint, planner: Any, batch: int) -> Any:
    """Where batch ``batch`` starts: the previous batch's end, or (batch 0) ``initialOffset``
    resolved now, as Spark asks a Python source again on a restart."""
    return checkpoint.offsets(batch - 1) if batch > 0 else planner.initial_offsets()


def _run_tasks(tasks: list[Any], out: str, name: str, batch: int, crash: str | None) -> list[Any]:
    """Every task's commit message, each task tried up to ``ATTEMPTS`` times, ``PARALLEL`` at
    once; exit 1 (after ``abort``) when one never succeeds."""
    attempts = [0] * len(tasks)
    messages: list[Any] = [None] * len(tasks)
    waiting = list(range(len(tasks)))
    running: dict[int, subprocess.Popen[str]] = {}
    while waiting or running:
        while waiting and len(running) < PARALLEL:
            index = waiting.pop(0)
            first = not running and not any(attempts) and all(m is None for m in messages)
            armed = crash if first else None
            running[index] = _task_process(
                tasks[index], out, name, batch, index, attempts[index], armed
            )
        index, proc = _first_done(running)
        stdout, stderr = proc.communicate()
        del running[index]
        if proc.returncode == 0:
            messages[index] = pickle.loads(base64.b64decode(stdout.split()[-1]))
            continue
        attempts[index] += 1
        failure = f"task {index} of batch {batch} failed ({proc.returncode}): {stderr[-800:]}"
        print(failure, file=sys.stderr, flush=True)
        if crash is not None and os.environ.get("ADVERSARY_DRIVER_DIES_WITH_TASK"):
            os.killpg(0, signal.SIGKILL)  # the armed task died, then its driver: no retry
        crash = None
        if attempts[index] >= ATTEMPTS:
            for other in running.values():
                other.kill()
            raise TaskFailed(messages)
        waiting.insert(0, index)
    return messages


def _first_done(running: dict[int, subprocess.Popen[str]]) -> tuple[int, subprocess.Popen[str]]:
    deadline = time.monotonic() + TASK_TIMEOUT_S
    while time.monotonic() < deadline:
        for index, proc in running.items():
            if proc.poll() is not None:
                return index, proc
        time.sleep(0.02)
    raise SystemExit(f"no task finished within {TASK_TIMEOUT_S} s")


def _task_process(
    partition: Any, out: str, name: str, batch: int, task: int, attempt: int, crash: str | None
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH")}
    if crash is not None:
        env["TXNLOG_CRASH_POINT"] = crash
    encoded = base64.b64encode(pickle.dumps(partition)).decode()
    args = [out, name, str(batch), str(task), str(attempt), encoded]
    return subprocess.Popen(
        [sys.executable, "-m", "integration.kafka_adversary", "task", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _commit(bootstrap: str, out: str, name: str, batch: int, messages: list[Any], end: Any) -> None:
    from commit_protocol.batch_commit import SinkCommitProtocol
    from txn_sink.topics import open_backend

    options = _sink_options(bootstrap, out)
    backend = open_backend(options)
    consumed = [(tp.topic, tp.partition, offset) for tp, offset in end.entries]
    offsets = [entry for entry in consumed if backend.topic_exists(entry[0])]
    protocol = SinkCommitProtocol(backend, _identity(options, name), options.task_settings)
    protocol.commit(batch, messages, offsets)


def _abort(bootstrap: str, out: str, name: str, batch: int, messages: list[Any]) -> None:
    from commit_protocol.batch_commit import SinkCommitProtocol
    from txn_sink.topics import open_backend

    options = _sink_options(bootstrap, out)
    SinkCommitProtocol(open_backend(options), _identity(options, name)).abort(batch, messages)


def run_task(argv: list[str]) -> int:
    from txn_sink.input_schema import InputColumns
    from txn_sink.task_writer import write_task

    out, name, batch, task, attempt, encoded = argv
    partition = pickle.loads(base64.b64decode(encoded))
    options = _sink_options(partition.cluster.client_config()["bootstrap.servers"], out)
    columns = InputColumns(("key", "value"))
    message, _ = write_task(
        options,
        columns,
        _identity(options, name),
        int(batch),
        (int(task), int(attempt)),
        _records(partition),
    )
    print(base64.b64encode(pickle.dumps(message)).decode(), flush=True)
    return 0


def _records(partition: Any) -> Iterator[Any]:
    from txn_source.kafka_partition import read_kafka_partition

    for batch in read_kafka_partition(partition):
        yield batch.select(["key", "value"])


def main(argv: list[str]) -> int:
    role, *rest = argv
    if role == "driver":
        return run_driver(rest)
    return run_task(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
