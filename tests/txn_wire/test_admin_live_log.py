"""DeleteTopics and CreatePartitions on a live log (issue 25; DESIGN §3: the server is one
more peer of the directory). Real processes: ``txnlog serve``, engine writers and readers
(``admin_live_workers``), and confluent-kafka clients through the server.

- A topic deleted through AdminClient.delete_topics while a transactional writer writes it:
  the deletion waits out open transactions (CONCURRENT_TRANSACTIONS, retried), then removes
  the whole topic; the writer is told so by a typed error and never acknowledged again; the
  log verifies clean and nothing else changed.
- A topic grown through AdminClient.create_partitions while readers read it and a producer
  writes it: the readers find the new partitions and every acknowledged record, once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.txn_wire.serve_process import TXNLOG, ServeProcess, start_serve
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60
CONCURRENT_TRANSACTIONS = KafkaError.CONCURRENT_TRANSACTIONS


@pytest.fixture
def live_log(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("t", 2)
        log.create_topic("keep", 1)
        producer = log.producer()
        for i in range(5):
            producer.send("keep", b"kept-%d" % i, partition=0)
        producer.flush()
    return path


@pytest.fixture
def served(live_log: Path) -> Iterator[ServeProcess]:
    server = start_serve(live_log)
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Worker:
    """An ``admin_live_workers`` process and the lines it printed, read by a thread."""

    process: subprocess.Popen[str]
    lines: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, role: str, log_dir: Path, topic: str) -> Worker:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.txn_wire.admin_live_workers", role, str(log_dir), topic],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        worker = cls(process)
        threading.Thread(target=worker._collect, daemon=True).start()
        return worker

    def _collect(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def wait_for(self, what: str, count: int = 1, after: int = 0) -> None:
        deadline = time.monotonic() + WAIT_S
        while sum(1 for x in self.lines[after:] if x["step"] == what) < count:
            assert self.process.poll() is None, self.stderr()
            assert time.monotonic() < deadline, f"no {count} {what} after {after}: {self.lines}"
            time.sleep(0.01)

    def stop(self) -> int:
        """Close its stdin (it stops) and wait for it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=WAIT_S)
        time.sleep(0.1)  # the collecting thread reads the last lines
        return code

    def stderr(self) -> str:
        if self.process.poll() is None:
            return "(running)"
        return self.process.stderr.read() if self.process.stderr else ""

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def delete_until_done(server: ServeProcess, topic: str) -> int:
    """Delete ``topic`` through the server, retrying CONCURRENT_TRANSACTIONS (a transaction
    writing it is open); returns how many times it was told to retry."""
    client = AdminClient({"bootstrap.servers": server.bootstrap})
    retries = 0
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            client.delete_topics([topic], operation_timeout=10)[topic].result(WAIT_S)
            return retries
        except KafkaException as error:
            assert error.args[0].code() == CONCURRENT_TRANSACTIONS, error
            assert time.monotonic() < deadline, f"still {error} after {retries} retries"
            retries += 1
            time.sleep(0.002)


def assert_deleted_cleanly(log_dir: Path) -> None:
    """``txnlog verify`` finds no problem; nothing of ``t`` is left; ``keep`` is whole; no
    transaction is left open."""
    verify = subprocess.run(
        [TXNLOG, "verify", str(log_dir)], capture_output=True, text=True, timeout=WAIT_S
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert sorted(p.name for p in log_dir.glob("t-*")) == []
    assert not (log_dir / "topics" / "t.json").exists()
    with Log.open(log_dir) as log:
        assert log.topics() == ["keep"]
        kept = log.consumer().read(TopicPartition("keep", 0), 0)
        assert [r.value for r in kept] == [b"kept-%d" % i for i in range(5)]
        assert log.coordinator.open_transactions() == []


def test_deleting_a_topic_an_engine_writer_process_writes_leaves_the_log_consistent(
    live_log: Path, served: ServeProcess
) -> None:
    writer = Worker.start("write", live_log, "t")
    try:
        writer.wait_for("acked", 5)
        retries = delete_until_done(served, "t")
        deleted_at = len(writer.lines)
        writer.wait_for("error", 3, after=deleted_at)
        assert writer.stop() == 0, writer.stderr()
    finally:
        writer.kill()
    after = writer.lines[deleted_at:]
    first_error = next(i for i, x in enumerate(after) if x["step"] == "error")
    assert [x for x in after[first_error:] if x["step"] == "acked"] == [], after
    errors = {x["error"].split(":")[0] for x in writer.lines if x["step"] != "acked"}
    assert errors <= {"UnknownTopicOrPartitionError", "UnknownTopicIdError"}, writer.lines
    print(f"DeleteTopics retried {retries} time(s) (CONCURRENT_TRANSACTIONS); writer: {errors}")
    assert_deleted_cleanly(live_log)


@dataclass
class TransactionalWriter:
    """A confluent-kafka transactional producer committing rounds through the server, in a
    thread: what each round came to."""

    bootstrap: str
    rounds: list[tuple[str, str]] = field(default_factory=list)  # (outcome, error)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": "live-confluent",
                "linger.ms": 2,
                "message.timeout.ms": 3000,
                "topic.metadata.propagation.max.ms": 1000,
                "transaction.timeout.ms": 10000,
            }
        )
        producer.init_transactions(WAIT_S)
        while not self.stop.is_set():
            try:
                producer.begin_transaction()
                for partition in (0, 1):
                    producer.produce("t", value=b"v", partition=partition)
                producer.commit_transaction(WAIT_S)
                self.rounds.append(("committed", ""))
            except KafkaException as error:
                # confluent-kafka keeps the exceptions it raised: their tracebacks would keep
                # this frame and its producer (reconnecting to the stopped server) for good
                error.__traceback__ = None
                self.rounds.append(("error", error.args[0].str()))
                if error.args[0].fatal() or not self._aborted(producer):
                    return
        producer.flush(WAIT_S)

    def _aborted(self, producer: Producer) -> bool:
        try:
            producer.abort_transaction(WAIT_S)
        except KafkaException as error:
            error.__traceback__ = None  # as in run
            self.rounds.append(("abort-error", error.args[0].str()))
            return False
        return True


def test_deleting_a_topic_a_confluent_transactional_producer_writes_through_the_server(
    live_log: Path, served: ServeProcess
) -> None:
    """The writer's rounds: committed until the deletion, then failed, never committed
    again (its client decides how: a batch that timed out waiting for the vanished topic, an
    abort it may be refused); the server lives on and the log is consistent."""
    writer = TransactionalWriter(served.bootstrap)
    thread = threading.Thread(target=writer.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while len(writer.rounds) < 5:
        assert time.monotonic() < deadline and thread.is_alive(), writer.rounds
        time.sleep(0.01)
    retries = delete_until_done(served, "t")
    deleted_at = len(writer.rounds)
    while not any(outcome != "committed" for outcome, _ in writer.rounds[deleted_at:]):
        assert time.monotonic() < deadline + WAIT_S and thread.is_alive(), writer.rounds
        time.sleep(0.05)
    writer.stop.set()
    thread.join(WAIT_S)
    after = writer.rounds[deleted_at:]
    failed = next(i for i, (outcome, _) in enumerate(after) if outcome != "committed")
    assert ("committed", "") not in after[failed:], after
    print(f"DeleteTopics retried {retries} time(s); the writer after it: {after[failed:]}")
    assert served.process.poll() is None
    assert_deleted_cleanly(live_log)


def test_growing_a_topic_while_readers_read_it_loses_nothing(
    live_log: Path, served: ServeProcess
) -> None:
    """An engine reader process and a confluent consumer (a group member, through the
    server) read ``t`` while a producer writes it by key and an AdminClient grows it from 2
    partitions to 4: both find partitions 2 and 3, and every acknowledged record."""
    reader = Worker.start("read", live_log, "t")
    consumed: set[tuple[int, int]] = set()
    consuming = threading.Event()
    consumer_thread = threading.Thread(
        target=consume, args=(served.bootstrap, consumed, consuming), daemon=True
    )
    consumer_thread.start()
    acked: set[tuple[int, int]] = set()
    grown = threading.Event()
    writer_thread = threading.Thread(
        target=write_keyed, args=(served.bootstrap, acked, grown), daemon=True
    )
    try:
        reader.wait_for("partitions")
        writer_thread.start()
        time.sleep(0.5)
        client = AdminClient({"bootstrap.servers": served.bootstrap})
        client.create_partitions([NewPartitions("t", 4)])["t"].result(WAIT_S)
        grown.set()
        writer_thread.join(WAIT_S)
        assert not writer_thread.is_alive()
        assert {p for p, _ in acked} == {0, 1, 2, 3}
        deadline = time.monotonic() + WAIT_S
        while not acked <= consumed:
            assert time.monotonic() < deadline, f"consumer missed {sorted(acked - consumed)}"
            time.sleep(0.1)
        consuming.set()
        assert reader.stop() == 0, reader.stderr()
    finally:
        consuming.set()
        reader.kill()
    assert {x["count"] for x in reader.lines if x["step"] == "partitions"} == {2, 4}
    [read] = [x["records"] for x in reader.lines if x["step"] == "read"]
    seen = [(partition, offset) for partition, offset, _ in read]
    assert len(seen) == len(set(seen)), "the engine reader read a record twice"
    assert set(seen) == acked
    assert consumed == acked


def write_keyed(bootstrap: str, acked: set[tuple[int, int]], grown: threading.Event) -> None:
    """Keyed records (the client's partitioner spreads them over the partitions it knows)
    until the topic has grown and records reached partitions 2 and 3."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "topic.metadata.refresh.interval.ms": 200,
        }
    )

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        acked.add((message.partition(), message.offset()))

    i = 0
    deadline = time.monotonic() + WAIT_S
    while not (grown.is_set() and {2, 3} <= {p for p, _ in acked}):
        assert time.monotonic() < deadline, sorted(acked)
        producer.produce("t", key=b"k%d" % i, value=b"v%d" % i, on_delivery=delivered)
        producer.poll(0)
        i += 1
        time.sleep(0.002)
    assert producer.flush(WAIT_S) == 0


def consume(bootstrap: str, consumed: set[tuple[int, int]], done: threading.Event) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "growing-readers",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    consumer.subscribe(["t"])
    while not done.is_set():
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            consumed.add((message.partition(), message.offset()))
    consumer.close()
