"""What only the Kafka backend has (issue 16 item 3): the ledger topic (compacted, read
read_committed past the last stable offset, searched from the tail) and exactly once per task
across SIGKILLed task processes, against a real ``txnlog serve``."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity, TaskSettings
from commit_protocol.kafka_backend import KafkaBackend
from commit_protocol.kafka_ledger import LedgerRecord
from commit_protocol.messages import TaskCommit
from datasource_options.location import KafkaCluster
from tests.commit_protocol.kafka_task_process import SINK, sink_named
from tests.txn_source.kafka_served import serving_a_new_log
from tests.txn_wire.serve_process import ServeProcess
from txn_log.errors import InvalidTxnStateError, ProducerFencedError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[2]
_names = iter(range(10_000))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serving_a_new_log(tmp_path_factory, "kafka-backend") as server:
        yield server


@pytest.fixture
def backend(served: ServeProcess) -> Iterator[KafkaBackend]:
    cluster = KafkaCluster.at(served.bootstrap)
    number = next(_names)
    made = KafkaBackend(cluster, ledger_topic=f"ledger-{number}", timeout_s=30)
    made.create_topic(f"out-{number}", 1)
    yield made
    made.close()


def out_topic(backend: KafkaBackend) -> str:
    return backend.ledger_topic.replace("ledger", "out")


def committed_values(served: ServeProcess, topic: str) -> list[bytes]:
    with Log.open(served.path) as log:
        consumer = log.consumer("read_committed")
        return [r.value for tp in log.partitions(topic) for r in consumer.read(tp, 0)]


def holder(served: ServeProcess, topic: str) -> Producer:
    """Another application's transaction left open on ``topic``: it holds the LSO back."""
    producer = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "holder"})
    producer.init_transactions(30)
    producer.begin_transaction()
    # keyed: the ledger topic is compacted, which refuses a record without a key (Kafka's
    # "Compacted topic cannot accept message without key", INVALID_RECORD)
    producer.produce(topic, b"not a ledger record", key=b"holder", partition=0)
    producer.flush(30)
    return producer


def test_the_ledger_topic_is_created_compacted_with_one_partition(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    assert backend.last_committed_batch("nobody") is None  # the first read creates it
    with Log.open(served.path) as log:
        assert len(log.partitions(backend.ledger_topic)) == 1
        assert log.topic_config(backend.ledger_topic).compact


def test_a_task_commit_behind_an_open_ledger_transaction_is_found_once_the_lso_passes_it(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    """The retry must not miss its earlier attempt's commit hidden behind another transaction
    (the LSO, B-03/B-05): it waits for the LSO to pass the high watermark seen after fencing
    (C-24)."""
    protocol = SinkCommitProtocol(backend, SINK)
    first = protocol.begin_task(0, 0)
    assert first is not None
    first.write(TopicPartition(out_topic(backend), 0), _rows("a"))
    other = holder(served, backend.ledger_topic)  # opens before the task's ledger record
    message = protocol.prepare_task(first, 0, 0, 0)
    assert message.committed
    with Log.open(served.path) as log:  # the commit is there, hidden behind the open one
        ledger = TopicPartition(backend.ledger_topic, 0)
        assert log.consumer("read_committed").read(ledger, 0) == []
        assert len(log.consumer("read_uncommitted").read(ledger, 0)) == 2
    release = threading.Timer(1.0, lambda: other.abort_transaction(30))
    release.start()
    try:
        assert protocol.begin_task(0, 0) is None  # skipped: it waited and found the commit
    finally:
        release.join()
    assert committed_values(served, out_topic(backend)) == [b"a"]


def test_a_ledger_held_back_too_long_fails_the_lookup_clearly(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    """Another application's transaction (its first record no ledger record: never fenced)
    stays open over a record of the key looked up: that lookup fails after its timeout,
    naming the offsets; a lookup of any other key answers at once (issue 29 item 2)."""
    backend.last_committed_batch("nobody")
    impatient = KafkaBackend(backend.cluster, ledger_topic=backend.ledger_topic, timeout_s=2)
    other = holder(served, backend.ledger_topic)
    pending = LedgerRecord(SINK.sink_id, 0, 0, ("x",))
    other.produce(backend.ledger_topic, pending.value(), pending.key, partition=0)
    other.flush(30)
    try:
        assert not impatient.task_committed("another-sink", 0, 0)
        assert not impatient.is_batch_committed(SINK.sink_id, 0)
        with pytest.raises(InvalidTxnStateError, match=r"last stable offset stayed at 0.*open"):
            impatient.task_committed(SINK.sink_id, 0, 0)
    finally:
        other.abort_transaction(30)
        impatient.close()
    assert not impatient.task_committed(SINK.sink_id, 0, 0)


def test_the_lookup_finds_a_key_far_back_and_the_newest_record_of_a_key(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    """Tail windows grow: a key 1000 records back is found, and a key written twice answers
    with its newest record (Spark's batch ids only grow per task)."""
    backend.last_committed_batch("nobody")
    producer = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "filler"})
    producer.init_transactions(30)
    producer.begin_transaction()
    records = [LedgerRecord("far", 3, 0, ("far-0",)), LedgerRecord("twice", 1, 0, ("t-0",))]
    records += [LedgerRecord(f"s{i}", 0, i, (f"s-{i}",)) for i in range(1000)]
    records += [LedgerRecord("twice", 7, 0, ("t-0",))]
    for record in records:
        producer.produce(backend.ledger_topic, record.value(), record.key, partition=0)
    producer.commit_transaction(30)
    assert backend.task_committed("far", 3, 0)
    assert not backend.task_committed("far", 4, 0)
    assert backend.task_committed("twice", 7, 0)
    assert not backend.task_committed("twice", 8, 0)
    assert not backend.task_committed("absent", 0, 0)


def run_task_process(
    served: ServeProcess,
    backend: KafkaBackend,
    *values: str,
    crash: str | None = None,
    sink: str | None = None,
    topic: str | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH")}
    if crash is not None:
        env["TXNLOG_CRASH_POINT"] = crash
    output = topic if topic is not None else out_topic(backend)
    args = [served.bootstrap, backend.ledger_topic, output, "0", "0", *values]
    if sink is not None:
        args.insert(0, f"--sink={sink}")
    return subprocess.run(
        [sys.executable, "-m", "tests.commit_protocol.kafka_task_process", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_task_killed_before_its_commit_leaves_nothing_and_its_retry_commits_once(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    killed = run_task_process(served, backend, "a", "b", crash="kafka_task.before_commit")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert committed_values(served, out_topic(backend)) == []
    retry = run_task_process(served, backend, "a", "b")
    assert retry.stdout.split() == ["committed"], retry.stderr
    assert committed_values(served, out_topic(backend)) == [b"a", b"b"]


def test_a_task_killed_after_its_commit_is_skipped_by_its_retry(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    killed = run_task_process(served, backend, "a", "b", crash="kafka_task.after_commit")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert committed_values(served, out_topic(backend)) == [b"a", b"b"]
    retry = run_task_process(served, backend, "a", "b")
    assert retry.stdout.split() == ["skipped"], retry.stderr
    assert committed_values(served, out_topic(backend)) == [b"a", b"b"]
    protocol = SinkCommitProtocol(backend, SINK)
    skipped = protocol.skipped_task(0, 0, 1)
    assert protocol.commit(0, [skipped], offsets=[]) is True
    assert backend.last_committed_batch(SINK.sink_id) == 0
    assert protocol.commit(0, [skipped]) is False


def test_the_driver_refuses_a_message_whose_task_did_not_commit(backend: KafkaBackend) -> None:
    protocol = SinkCommitProtocol(backend, SINK)
    uncommitted = TaskCommit(SINK.sink_id, 0, 0, 0, "killed-0")
    with pytest.raises(InvalidTxnStateError, match="did not commit its transaction"):
        protocol.commit(0, [uncommitted])
    assert backend.last_committed_batch(SINK.sink_id) is None


def test_a_task_open_past_its_transaction_timeout_fails_saying_so(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    """The coordinator aborts a transaction open longer than its timeout by bumping the epoch
    (C-25): to the client that is a fence like any other. A task open that long is told so,
    with the option to change and how to bound its work, instead of "a newer attempt took
    over", which sends a user looking for a zombie; a task fenced by a newer attempt within its
    timeout still says that, as a ProducerFencedError (it was confluent-kafka's SystemError
    when the fenced attempt had written after the fence: the flush raised it around the fatal
    KafkaException while serving the failed records' delivery reports)."""
    out = out_topic(backend)
    slow = SinkCommitProtocol(
        backend, sink_named("slow"), TaskSettings(transaction_timeout_ms=1000)
    )
    task = slow.begin_task(0, 0)
    assert task is not None
    task.write(TopicPartition(out, 0), _rows("a"))
    time.sleep(3)
    with pytest.raises(ProducerFencedError) as timed_out:
        task.write(TopicPartition(out, 0), _rows("b"))
        slow.prepare_task(task, 0, 0, 0)
    said = str(timed_out.value)
    assert "'slow-0'" in said and "transaction.timeout.ms=1000" in said
    assert "maxOffsetsPerTrigger" in said and "newer attempt" not in said
    assert committed_values(served, out) == []

    quick = SinkCommitProtocol(backend, sink_named("quick"))
    first = quick.begin_task(0, 0)
    assert first is not None
    first.write(TopicPartition(out, 0), _rows("c"))
    first.flush()
    assert quick.begin_task(0, 0) is not None  # a newer attempt fences the first
    with pytest.raises(ProducerFencedError) as fenced:
        first.write(TopicPartition(out, 0), _rows("d"))
        quick.prepare_task(first, 0, 0, 0)
    assert "newer attempt" in str(fenced.value)
    assert "transaction.timeout.ms" not in str(fenced.value)


def _rdkafka_threads() -> int:
    return sum(
        1 for t in Path("/proc/self/task").iterdir() if (t / "comm").read_text().startswith("rdk:")
    )


def test_a_task_transaction_dropped_open_lets_its_producer_go(backend: KafkaBackend) -> None:
    """librdkafka holds each record's delivery callback until its report is served: a
    callback bound to the transaction kept a transaction dropped with records unreported (a
    task abandoned without abort, a zombie) and its producer alive for the rest of the
    process, each with its threads and a connection reconnecting to its cluster. The same
    for a fenced attempt whose flush failed (the traceback of the error confluent-kafka
    keeps)."""
    protocol = SinkCommitProtocol(backend, sink_named("dropped"))
    backend.last_committed_batch("dropped")  # the backend's own clients (its ledger reader)
    protocol.abort(0, [None])  # and a fence's producer, gone, before counting
    gc.collect()
    before = _rdkafka_threads()
    for task_id in range(3):
        task = protocol.begin_task(0, task_id)
        assert task is not None
        task.write(TopicPartition(out_topic(backend), 0), _rows(*["x"] * 500))
        assert _rdkafka_threads() > before
        del task
    # a fenced attempt whose flush failed: confluent-kafka keeps the fatal error it raised,
    # whose traceback held the attempt's frames (and through them its producer)
    zombie = protocol.begin_task(1, 0)
    assert zombie is not None
    zombie.write(TopicPartition(out_topic(backend), 0), _rows("z"))
    zombie.flush()
    assert protocol.begin_task(1, 0) is not None  # a newer attempt, dropped at once
    with pytest.raises(ProducerFencedError):
        zombie.write(TopicPartition(out_topic(backend), 0), _rows("after the fence"))
        zombie.flush()
    del zombie
    gc.collect()
    assert _rdkafka_threads() == before


def _rows(*values: str) -> object:
    import pyarrow as pa

    return pa.record_batch([pa.array([v.encode() for v in values], pa.binary())], ["value"])


def test_a_fresh_sink_searches_the_ledger_from_where_it_began_only(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    """``df.write``'s sink starts at ``ledger_end()``: its tasks' lookups read what followed,
    and still find a commit of their own (a retried task after its first attempt committed)."""
    old = SinkCommitProtocol(backend, SINK)
    assert old.commit(0, [_committed(old, backend, 0, "old")])
    since = backend.ledger_end()
    assert since > 0
    assert backend.task_committed(SINK.sink_id, 0, 0)
    assert not backend.task_committed(SINK.sink_id, 0, 0, since=since)  # before ``since``
    write = SinkIdentity("spark-write-w1", "w1", None, ledger_since=since)
    fresh = SinkCommitProtocol(backend, write)
    first = _committed(fresh, backend, 0, "new")
    assert fresh.begin_task(0, 0) is None  # the retry finds the first attempt's commit
    assert fresh.commit(0, [first])
    assert committed_values(served, out_topic(backend)) == [b"old", b"new"]


def _committed(
    protocol: SinkCommitProtocol, backend: KafkaBackend, task: int, value: str
) -> TaskCommit:
    transaction = protocol.begin_task(0, task)
    assert transaction is not None
    transaction.write(TopicPartition(out_topic(backend), 0), _rows(value))
    return protocol.prepare_task(transaction, 0, task, 0)


def _commit_task(
    protocol: SinkCommitProtocol, topic: str, batch: int, task: int, value: str
) -> TaskCommit:
    transaction = protocol.begin_task(batch, task)
    assert transaction is not None, f"task {task} of batch {batch} was skipped"
    transaction.write(TopicPartition(topic, 0), _rows(value))
    return protocol.prepare_task(transaction, batch, task, 0)


def test_a_task_killed_inside_its_transaction_blocks_no_other_sink(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    """Issue 29 item 2 (C-24, B-03, B-05): sink A's task SIGKILLed between its ledger record and
    its commit leaves its transaction open, holding the shared ledger partition's LSO for its
    transaction.timeout.ms (900 s). Sink B, on the same ledger, runs three whole batches
    meanwhile with a 5 s lookup timeout: none of its lookups waits for A's transaction (no
    record of B's keys that could change the answer lies in the unstable range). A retry of
    B's last task, whose own ledger record now lies behind A's open transaction, fences A's
    gone writer after ``zombie_after_s`` instead of waiting 900 s, and is skipped; A's own
    retry then commits its rows exactly once."""
    killed = run_task_process(served, backend, "a", crash="kafka_task.before_commit", sink="A")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    ledger = TopicPartition(backend.ledger_topic, 0)
    with Log.open(served.path) as log:  # A's ledger record is there, its transaction open
        held = len(log.consumer("read_uncommitted").read(ledger, 0))
        assert len(log.consumer("read_committed").read(ledger, 0)) < held
    b_topic = out_topic(backend) + "-b"
    backend.create_topic(b_topic, 1)
    impatient = KafkaBackend(backend.cluster, ledger_topic=backend.ledger_topic, timeout_s=5)
    other = SinkCommitProtocol(impatient, sink_named("B"))
    try:
        for batch in range(3):
            message = _commit_task(other, b_topic, batch, 0, f"b{batch}")
            assert other.commit(batch, [message], offsets=[])
    finally:
        impatient.close()
    assert committed_values(served, b_topic) == [b"b0", b"b1", b"b2"]
    with Log.open(served.path) as log:  # A's transaction still holds the ledger back
        assert len(log.consumer("read_committed").read(ledger, 0)) < held
    fencing = KafkaBackend(
        backend.cluster, ledger_topic=backend.ledger_topic, timeout_s=30, zombie_after_s=1
    )
    try:
        assert SinkCommitProtocol(fencing, sink_named("B")).begin_task(2, 0) is None
    finally:
        fencing.close()
    retry = run_task_process(served, backend, "a", sink="A")
    assert retry.stdout.split() == ["committed"], retry.stderr
    assert committed_values(served, out_topic(backend)) == [b"a"]
    assert committed_values(served, b_topic) == [b"b0", b"b1", b"b2"]


def test_a_lookup_ends_at_an_aborted_ledger_record_below_an_open_transaction(
    served: ServeProcess, backend: KafkaBackend
) -> None:
    """Sink A's task is SIGKILLed with its ledger record sent, then sink Z's (another output
    topic) likewise: Z's open transaction holds the ledger's last stable offset just past A's
    record. A's retry fences A's attempt (its record is aborted, the ABORT marker lands after
    Z's record) and looks its key up in the window up to that offset, which ends in the
    aborted record: the lookup must end there and the retry commit A's rows once. Before:
    librdkafka does not move a read_committed consumer's position past an aborted batch it
    skips, the position never reached the window's end, and the retry (every lookup of every
    sink on the ledger) waited timeout_s and failed."""
    killed = run_task_process(served, backend, "a", crash="kafka_task.before_commit", sink="A")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    z_topic = out_topic(backend) + "-z"
    backend.create_topic(z_topic, 1)
    z = run_task_process(
        served, backend, "z", crash="kafka_task.before_commit", sink="Z", topic=z_topic
    )
    assert z.returncode == -signal.SIGKILL, z.stderr
    retry = run_task_process(served, backend, "a", sink="A")
    assert retry.stdout.split() == ["committed"], retry.stderr
    assert committed_values(served, out_topic(backend)) == [b"a"]
