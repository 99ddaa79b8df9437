"""The commit protocol's contract, run against every backend (STYLE item 9, issue 16 item 5).

Each backend comes with a small harness: how to read what read_committed readers see, how to
move time forward and which transactions are open. The embedded backend runs on a fresh log
directory per test; the Kafka backend runs over one ``txnlog serve`` per module (a real
subprocess, reached through confluent-kafka), each test with its own output and ledger topics
and with the transactions earlier tests left open aborted first. What differs by design (a
Kafka batch is not atomic: each task commits its own transaction, so its rows are visible
before the driver's commit; the cluster cannot list open transactions, so zombies stay open
until fenced or timed out; timeouts run on the server's clock) is asserted per backend.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pytest

from commit_protocol.backend import LogBackend, TaskCommitBackend
from commit_protocol.batch_commit import (
    AtomicBatchCommit,
    PerTaskCommit,
    SinkCommitProtocol,
    SinkIdentity,
    TaskSettings,
)
from commit_protocol.embedded import EmbeddedBackend
from commit_protocol.kafka_backend import KafkaBackend
from commit_protocol.messages import TaskCommit
from datasource_options.location import KafkaCluster
from tests.txn_wire.serve_process import ServeProcess, start_serve
from txn_log.clock import ManualClock
from txn_log.consumer.consumer import ConsumerRecord
from txn_log.errors import (
    ConfigError,
    FencedError,
    InvalidTxnStateError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortableError,
    TxnLogError,
)
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

SINK = SinkIdentity("spark-query-q1", "sink", "group-1")
_KAFKA_TESTS = itertools.count()


@dataclass
class Harness:
    backend: LogBackend
    topic: str
    read_values: Callable[[str], list[bytes]]
    advance: Callable[[int], None]
    open_transactions: Callable[[], list[str]]
    read_records: Callable[[TopicPartition], list[ConsumerRecord]] = lambda tp: []

    @property
    def per_task_commit(self) -> bool:
        """Whether each task commits its own transaction (a ``TaskCommitBackend``)."""
        return isinstance(self.backend, TaskCommitBackend)


def _records_of(log: Log) -> Callable[[TopicPartition], list[ConsumerRecord]]:
    return lambda tp: log.consumer("read_committed").read(tp, 0)


def _observer(log: Log) -> tuple[Callable[[str], list[bytes]], Callable[[], list[str]]]:
    def read_values(topic: str) -> list[bytes]:
        consumer = log.consumer("read_committed")
        return [r.value for tp in log.partitions(topic) for r in consumer.read(tp, 0)]

    def open_transactions() -> list[str]:
        return sorted(md.transactional_id for md in log.coordinator.open_transactions(""))

    return read_values, open_transactions


def embedded_harness(path: Path) -> Iterator[Harness]:
    clock = ManualClock()
    log = Log.open(path / "log", clock=clock)
    log.create_topic("out", partitions=3)
    log.create_topic("src", partitions=2)
    read_values, open_transactions = _observer(log)
    yield Harness(
        EmbeddedBackend(log), "out", read_values, clock.advance, open_transactions, _records_of(log)
    )
    log.close()


def kafka_harness(served: ServeProcess) -> Iterator[Harness]:
    """The Kafka backend over ``served``; this process opens the same directory as a peer to
    observe it (read_committed reads, open transactions) and to abort leftovers."""
    number = next(_KAFKA_TESTS)
    log = Log.open(served.path)
    for metadata in log.coordinator.open_transactions(""):  # earlier tests' zombies
        log.coordinator.abort_transaction(metadata.transactional_id)
    cluster = KafkaCluster.at(served.bootstrap)
    backend = KafkaBackend(cluster, ledger_topic=f"ledger-{number}", timeout_s=30)
    topic = f"out-{number}"
    backend.create_topic(topic, 3)
    read_values, open_transactions = _observer(log)
    yield Harness(backend, topic, read_values, _sleep_ms, open_transactions, _records_of(log))
    backend.close()
    log.close()


def _sleep_ms(ms: int) -> None:
    time.sleep(ms / 1000)


@pytest.fixture(scope="module")
def kafka_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    path = tmp_path_factory.mktemp("kafka") / "log"
    with Log.open(path) as log:
        log.create_topic("src", partitions=2)
    served = start_serve(path)
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(params=["embedded", "kafka"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "embedded":
        yield from embedded_harness(tmp_path)
    else:
        yield from kafka_harness(request.getfixturevalue("kafka_server"))


def rows(*values: str) -> pa.RecordBatch:
    return pa.record_batch([pa.array([v.encode() for v in values], pa.binary())], names=["value"])


def run_task(
    harness: Harness,
    protocol: SinkCommitProtocol,
    batch_id: int,
    task_id: int,
    writes: dict[int, list[str]],
    attempt: int = 0,
) -> TaskCommit:
    txn = protocol.begin_task(batch_id, task_id)
    if txn is None:
        return protocol.skipped_task(batch_id, task_id, attempt)
    for partition, values in writes.items():
        txn.write(TopicPartition(harness.topic, partition), rows(*values))
    return protocol.prepare_task(txn, batch_id, task_id, attempt)


def test_the_backends_class_picks_its_commit_protocol(harness: Harness) -> None:
    """An ``AtomicCommitBackend`` runs the atomic batch commit, a ``TaskCommitBackend`` the
    per-task commit; a protocol built for the other kind refuses the backend."""
    expected, other = (
        (PerTaskCommit, AtomicBatchCommit)
        if harness.per_task_commit
        else (AtomicBatchCommit, PerTaskCommit)
    )
    assert type(SinkCommitProtocol(harness.backend, SINK)) is expected
    assert type(expected(harness.backend, SINK)) is expected
    with pytest.raises(ConfigError, match=expected.__name__):
        other(harness.backend, SINK)


def test_a_backend_of_neither_kind_has_no_commit_protocol() -> None:
    with pytest.raises(ConfigError, match="neither an AtomicCommitBackend nor"):
        SinkCommitProtocol(object(), SINK)  # type: ignore[arg-type]


def test_batch_is_invisible_until_the_driver_commits_then_visible_at_once(
    harness: Harness,
) -> None:
    """Embedded: the batch is atomic. Kafka: each task's rows are visible once the task
    committed its own transaction (by design: librdkafka cannot commit another process's
    transaction), before the driver records the batch."""
    protocol = SinkCommitProtocol(harness.backend, SINK)
    first = run_task(harness, protocol, 0, 0, {0: ["a", "b"], 1: ["c"]})
    if harness.per_task_commit:
        assert first.committed
        assert sorted(harness.read_values(harness.topic)) == [b"a", b"b", b"c"]
    else:
        assert not first.committed
        assert harness.read_values(harness.topic) == []
    second = run_task(harness, protocol, 0, 1, {1: ["d"], 2: ["e"]})
    if not harness.per_task_commit:
        assert harness.read_values(harness.topic) == []
    assert not harness.backend.is_batch_committed(SINK.sink_id, 0)
    assert first.record_count == 3
    assert [(p.partition, p.record_count) for p in second.partitions] == [(1, 1), (2, 1)]
    assert protocol.commit(0, [first, second]) is True
    assert sorted(harness.read_values(harness.topic)) == [b"a", b"b", b"c", b"d", b"e"]
    assert harness.open_transactions() == []


def test_keys_timestamps_and_headers_arrive_as_written_in_order(harness: Harness) -> None:
    """Every record column a task may send (value, key, timestamp, headers; nulls where they
    are allowed), into one partition as several input batches of both shapes (with and
    without timestamps and headers), comes out exactly so, in the order written (a null
    timestamp is the time of the write, on each backend's own clock)."""
    protocol = SinkCommitProtocol(harness.backend, SINK)
    headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    full = pa.record_batch(
        [
            pa.array([b"v0", None, b"v2"], pa.binary()),
            pa.array([b"k0", b"k1", None], pa.binary()),
            pa.array([1_700_000_000_000, None, 1_700_000_000_002], pa.timestamp("ms")),
            pa.array([[{"key": "h", "value": b"x"}], None, []], headers_type),
        ],
        names=["value", "key", "timestamp", "headers"],
    )
    plain = pa.record_batch(
        [pa.array([b"v3", b"v4"], pa.binary()), pa.array([None, b"k4"], pa.binary())],
        names=["value", "key"],
    )
    txn = protocol.begin_task(0, 0)
    assert txn is not None
    tp = TopicPartition(harness.topic, 1)
    for batch in (full, plain, full.slice(2)):
        txn.write(tp, batch)
    assert protocol.commit(0, [protocol.prepare_task(txn, 0, 0, 0)])
    records = harness.read_records(tp)
    assert [(r.value, r.key) for r in records] == [
        (b"v0", b"k0"),
        (None, b"k1"),
        (b"v2", None),
        (b"v3", None),
        (b"v4", b"k4"),
        (b"v2", None),
    ]
    assert [list(r.headers) for r in records] == [[("h", b"x")], [], [], [], [], []]
    stamps = [r.timestamp_ms for r in records]
    assert stamps[0] == 1_700_000_000_000 and stamps[2] == stamps[5] == 1_700_000_000_002


def test_a_full_producer_buffer_is_waited_out_without_losing_or_repeating_a_row(
    harness: Harness,
) -> None:
    """With ``buffer.memory`` far below what a batch holds, sending waits for room again and
    again (librdkafka's BufferError, in both of the Kafka task's send loops); every row lands
    once, in order."""
    protocol = SinkCommitProtocol(harness.backend, SINK, TaskSettings(buffer_memory=4096))
    values = [b"%0100d" % i for i in range(3000)]
    stamped = pa.record_batch(
        [pa.array(values[2000:], pa.binary()), pa.array([5] * 1000, pa.timestamp("ms"))],
        names=["value", "timestamp"],
    )
    txn = protocol.begin_task(0, 0)
    assert txn is not None
    tp = TopicPartition(harness.topic, 2)
    txn.write(tp, pa.record_batch([pa.array(values[:2000], pa.binary())], names=["value"]))
    txn.write(tp, stamped)
    assert protocol.commit(0, [protocol.prepare_task(txn, 0, 0, 0)])
    assert [r.value for r in harness.read_records(tp)] == values


def test_a_second_commit_of_the_same_batch_is_a_no_op(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    message = run_task(harness, protocol, 0, 0, {0: ["a"]})
    assert protocol.commit(0, [message]) is True
    assert protocol.commit(0, [message]) is False
    assert harness.read_values(harness.topic) == [b"a"]


def test_a_rerun_of_a_committed_batch_writes_nothing(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    assert protocol.commit(0, [run_task(harness, protocol, 0, 0, {0: ["a"]})])
    rerun = run_task(harness, protocol, 0, 0, {0: ["a"]}, attempt=1)
    assert rerun.skipped and rerun.record_count == 0
    assert protocol.commit(0, [rerun]) is False
    assert harness.read_values(harness.topic) == [b"a"]


def test_a_retried_task_leaves_no_duplicate(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    failed = protocol.begin_task(0, 0)
    assert failed is not None
    failed.write(TopicPartition(harness.topic, 0), rows("a", "b"))
    failed.flush()  # the attempt dies here, its data durable but uncommitted
    retry = run_task(harness, protocol, 0, 0, {0: ["a", "b"]}, attempt=1)
    assert protocol.commit(0, [retry])
    assert harness.read_values(harness.topic) == [b"a", b"b"]


def test_a_stale_attempt_is_fenced_and_cannot_commit(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    other = run_task(harness, protocol, 0, 1, {2: ["other"]})
    stale = protocol.begin_task(0, 0)
    assert stale is not None
    stale.write(TopicPartition(harness.topic, 0), rows("stale"))
    stale_message = protocol.prepare_task(stale, 0, 0, 0)
    speculative = run_task(harness, protocol, 0, 0, {0: ["fresh"]}, attempt=1)  # fences ``stale``
    if harness.per_task_commit:
        # the "stale" attempt committed its task before the copy began: the copy is fenced
        # in, reads the ledger and skips; whichever attempt commits first wins, exactly once
        assert speculative.skipped
        with pytest.raises(InvalidTxnStateError, match="already ended"):
            stale.write(TopicPartition(harness.topic, 1), rows("late"))
        assert protocol.commit(0, [stale_message, other])
        assert protocol.commit(0, [speculative, other]) is False
        assert sorted(harness.read_values(harness.topic)) == [b"other", b"stale"]
        return
    with pytest.raises(FencedError):
        stale.write(TopicPartition(harness.topic, 1), rows("late"))
    with pytest.raises(ProducerFencedError, match="sink-0"):
        protocol.commit(0, [stale_message, other])
    assert harness.read_values(harness.topic) == []  # nothing partial: not even task 1's rows
    assert protocol.commit(0, [speculative, other])
    assert sorted(harness.read_values(harness.topic)) == [b"fresh", b"other"]


def test_an_attempt_fenced_before_it_finished_fails_instead_of_reporting_success(
    harness: Harness,
) -> None:
    """A speculative copy that starts after the original wrote everything fences it (C-14).
    The original must then fail its task (Spark takes the copy's result), not return a
    message whose commit could only fail the whole micro-batch."""
    protocol = SinkCommitProtocol(harness.backend, SINK)
    original = protocol.begin_task(0, 0)
    assert original is not None
    original.write(TopicPartition(harness.topic, 0), rows("a"))
    copy = run_task(harness, protocol, 0, 0, {0: ["a"]}, attempt=1)  # fences ``original``
    with pytest.raises(FencedError):
        protocol.prepare_task(original, 0, 0, 0)
    assert protocol.commit(0, [copy])
    assert harness.read_values(harness.topic) == [b"a"]


def test_abort_leaves_nothing_visible_and_nothing_open(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    done = run_task(harness, protocol, 0, 0, {0: ["a"], 1: ["b"]})
    failing = protocol.begin_task(0, 1)
    assert failing is not None
    failing.write(TopicPartition(harness.topic, 2), rows("c"))  # then the task fails: no message
    if harness.per_task_commit:
        # a committed task cannot be undone: only the task without a message is fenced
        assert protocol.abort(0, [done, None]) == ["sink-1"]
        assert harness.open_transactions() == []
        assert sorted(harness.read_values(harness.topic)) == [b"a", b"b"]
        rerun = run_task(harness, protocol, 0, 0, {0: ["a"], 1: ["b"]}, attempt=1)
        assert rerun.skipped  # the re-run of the batch skips the committed task
        assert protocol.commit(0, [rerun, run_task(harness, protocol, 0, 1, {2: ["c"]}, 1)])
        assert sorted(harness.read_values(harness.topic)) == [b"a", b"b", b"c"]
        return
    assert protocol.abort(0, [done, None]) == ["sink-0", "sink-1"]
    assert harness.read_values(harness.topic) == []
    assert harness.open_transactions() == []
    # the batch can still be written afresh and committed
    assert protocol.commit(0, [run_task(harness, protocol, 0, 0, {0: ["a"]}, attempt=1)])
    assert harness.read_values(harness.topic) == [b"a"]


def test_commit_aborts_zombies_of_the_prefix_only(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    zombie = protocol.begin_task(0, 7)  # a task of a bigger earlier run that never finished
    assert zombie is not None
    zombie.write(TopicPartition(harness.topic, 0), rows("zombie"))
    neighbour = SinkCommitProtocol(harness.backend, SinkIdentity("other", "sink-1", None))
    foreign = neighbour.begin_task(0, 0)  # "sink-1-0": not a task of prefix "sink"
    assert foreign is not None
    foreign.write(TopicPartition(harness.topic, 1), rows("foreign"))
    assert protocol.commit(0, [run_task(harness, protocol, 0, 0, {2: ["a"]})])
    if harness.per_task_commit:
        # the cluster cannot list open transactions (no ListTransactions in confluent-kafka):
        # a zombie stays open until a task with its id fences it or its timeout aborts it
        # (G-14)
        assert harness.open_transactions() == ["sink-1-0", "sink-7"]
        protocol.begin_task(1, 7)  # the next run's task 7 fences it
        assert harness.open_transactions() == ["sink-1-0"]
    else:
        assert harness.open_transactions() == ["sink-1-0"]
    assert harness.read_values(harness.topic) == [b"a"]


def test_a_changed_prefix_is_refused_once_a_batch_committed_under_the_old_one(
    harness: Harness,
) -> None:
    """A task fences its zombies by its own transactional id only (C-24): after a restart under
    another ``transactional.id.prefix``, an attempt of the unfinished batch left open under the
    old prefix is fenced by nobody, and in Kafka mode it may still commit beside the re-run's
    output (a duplicate); embedded, it holds the LSO until its timeout. So a sink whose ledger
    names task transactions of another prefix refuses to start, naming both prefixes and what
    to do; the same prefix, and a sink the ledger does not know yet, pass."""
    protocol = SinkCommitProtocol(harness.backend, SINK)
    protocol.check_prefix()  # nothing committed yet: any prefix
    assert protocol.commit(0, [run_task(harness, protocol, 0, 0, {0: ["a"]})])
    protocol.check_prefix()
    renamed = SinkCommitProtocol(harness.backend, replace(SINK, prefix="sink-renamed"))
    with pytest.raises(ConfigError) as refused:
        renamed.check_prefix()
    said = str(refused.value)
    assert "transactional.id.prefix" in said
    assert "'sink-renamed'" in said and "'sink'" in said
    assert SINK.sink_id in said and "batch 0" in said
    assert "new checkpoint" in said
    # a prefix that merely starts like the old one is another prefix ("sink-1" is no task of
    # "sink"), and the other way round
    for other in ("sin", "sink-0", "sink-1"):
        with pytest.raises(ConfigError):
            SinkCommitProtocol(harness.backend, replace(SINK, prefix=other)).check_prefix()
    stranger = SinkCommitProtocol(harness.backend, SinkIdentity("spark-query-q2", "any", None))
    stranger.check_prefix()
    assert harness.read_values(harness.topic) == [b"a"]


def test_group_offsets_commit_with_the_batch_only(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    partitions = [TopicPartition("src", 0), TopicPartition("src", 1)]
    message = run_task(harness, protocol, 0, 0, {0: ["a"]})
    assert harness.backend.committed_offsets("group-1", partitions) == dict.fromkeys(partitions)
    protocol.commit(0, [message], offsets=[("src", 0, 10), ("src", 1, 4)])
    assert harness.backend.committed_offsets("group-1", partitions) == dict(
        zip(partitions, [10, 4], strict=True)
    )
    protocol.commit(1, [run_task(harness, protocol, 1, 0, {0: ["b"]})], offsets=[("src", 0, 12)])
    assert harness.backend.committed_offsets("group-1", partitions)[partitions[0]] == 12


def test_a_timed_out_task_transaction_fails_the_commit(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK, TaskSettings(transaction_timeout_ms=1000))
    if harness.per_task_commit:
        # each task committed before it returned: a later timeout cannot undo it; a task
        # still open past its timeout is aborted by the server and cannot commit
        done = run_task(harness, protocol, 0, 0, {0: ["a"]})
        slow = protocol.begin_task(0, 1)
        assert slow is not None
        slow.write(TopicPartition(harness.topic, 1), rows("late"))
        slow.flush()
        harness.advance(5_000)
        with pytest.raises(TxnLogError, match="sink-1"):
            protocol.prepare_task(slow, 0, 1, 0)
        slow.abort()
        assert harness.read_values(harness.topic) == [b"a"]
        assert protocol.commit(0, [done, run_task(harness, protocol, 0, 1, {1: ["b"]}, 1)])
        assert sorted(harness.read_values(harness.topic)) == [b"a", b"b"]
        return
    slow = run_task(harness, protocol, 0, 0, {0: ["a"]})
    quick = run_task(harness, protocol, 0, 1, {1: ["b"]})
    harness.advance(5_000)
    with pytest.raises(TxnLogError, match="sink-0"):
        protocol.commit(0, [slow, quick])
    protocol.abort(0, [slow, quick])
    assert harness.read_values(harness.topic) == []
    assert harness.backend.last_committed_batch(SINK.sink_id) is None


def test_a_task_that_wrote_nothing_still_commits(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    empty = run_task(harness, protocol, 3, 0, {})
    full = run_task(harness, protocol, 3, 1, {0: ["a"]})
    assert protocol.commit(3, [empty, full])
    assert harness.backend.is_batch_committed(SINK.sink_id, 3)
    assert harness.backend.is_batch_committed(SINK.sink_id, 2)  # ids only grow
    assert not harness.backend.is_batch_committed(SINK.sink_id, 4)
    assert harness.read_values(harness.topic) == [b"a"]


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda ms: [None, ms[1]], "missing"),
        (lambda ms: [ms[0], ms[0]], "two messages"),
        (lambda ms: [ms[0], TaskCommit("elsewhere", 0, 1, 0, "sink-1")], "elsewhere"),
    ],
)
def test_bad_messages_commit_nothing(
    harness: Harness, mutate: Callable[[list[TaskCommit]], list[TaskCommit | None]], match: str
) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    messages = [
        run_task(harness, protocol, 0, 0, {0: ["a"]}),
        run_task(harness, protocol, 0, 1, {1: ["b"]}),
    ]
    with pytest.raises(InvalidTxnStateError, match=match):
        protocol.commit(0, mutate(messages))
    assert harness.backend.last_committed_batch(SINK.sink_id) is None
    # Kafka: the tasks' own commits are visible; the batch is not recorded
    assert sorted(harness.read_values(harness.topic)) == (
        [b"a", b"b"] if harness.per_task_commit else []
    )
    assert protocol.commit(0, messages)


def test_a_skip_without_a_ledger_entry_commits_nothing(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    with pytest.raises(InvalidTxnStateError, match="ledger"):
        protocol.commit(
            0, [protocol.skipped_task(0, 0, 0), run_task(harness, protocol, 0, 1, {0: ["a"]})]
        )
    assert harness.backend.last_committed_batch(SINK.sink_id) is None
    assert harness.read_values(harness.topic) == ([b"a"] if harness.per_task_commit else [])


def test_large_writes_are_split_into_batches_the_topic_accepts(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    limit = harness.backend.max_batch_bytes(harness.topic)
    count = 3 * limit // 1000
    txn = protocol.begin_task(0, 0)
    assert txn is not None
    txn.write(TopicPartition(harness.topic, 0), rows(*(f"{i:0>1000}" for i in range(count))))
    (written,) = txn.written()
    assert written.record_count == count
    if harness.per_task_commit:
        assert written.batch_count == 0  # librdkafka builds the batches and does not say
    else:
        assert written.batch_count >= 3
    protocol.commit(0, [protocol.prepare_task(txn, 0, 0, 0)])
    assert [int(v) for v in harness.read_values(harness.topic)] == list(range(count))


def test_a_record_too_large_fails_the_write_and_leaves_the_task_abortable_only(
    harness: Harness,
) -> None:
    """F-09: a record over max.message.bytes on its own is refused, naming the partition;
    the task's transaction may then lack a record the task meant for it, so, as after any
    failed send of Kafka's transactional producer, it can only abort: nothing of it commits."""
    protocol = SinkCommitProtocol(harness.backend, SINK)
    limit = harness.backend.max_batch_bytes(harness.topic)
    txn = protocol.begin_task(0, 0)
    assert txn is not None
    txn.write(TopicPartition(harness.topic, 1), rows("never-committed"))
    with pytest.raises(RecordTooLargeError, match=f"{harness.topic}-0"):
        txn.write(TopicPartition(harness.topic, 0), rows("x" * (limit + 1)))
    with pytest.raises(TransactionAbortableError, match="RecordTooLargeError"):
        protocol.prepare_task(txn, 0, 0, 0)
    txn.abort()
    assert harness.open_transactions() == []
    assert harness.read_values(harness.topic) == []
    assert protocol.commit(0, [run_task(harness, protocol, 0, 0, {0: ["a"]}, attempt=1)])
    assert harness.read_values(harness.topic) == [b"a"]
