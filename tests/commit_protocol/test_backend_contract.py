"""The commit protocol's contract, run against every backend (STYLE item 9).

Each backend comes with a small harness: how to read what read_committed readers see, and how
to move time forward. Only the embedded backend exists so far; a Kafka backend joins by adding
its harness to ``BACKENDS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from commit_protocol.backend import LogBackend
from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity, TaskSettings
from commit_protocol.embedded import EmbeddedBackend
from commit_protocol.messages import TaskCommit
from txn_log.clock import ManualClock
from txn_log.errors import (
    FencedError,
    InvalidTxnStateError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortableError,
    TxnLogError,
)
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

TOPIC = "out"
SINK = SinkIdentity("spark-query-q1", "sink", "group-1")


@dataclass
class Harness:
    backend: LogBackend
    read_values: Callable[[str], list[bytes]]
    advance: Callable[[int], None]
    open_transactions: Callable[[], list[str]]


def embedded_harness(path: Path) -> Harness:
    clock = ManualClock()
    log = Log.open(path / "log", clock=clock)
    log.create_topic(TOPIC, partitions=3)
    log.create_topic("src", partitions=2)

    def read_values(topic: str) -> list[bytes]:
        consumer = log.consumer("read_committed")
        return [r.value for tp in log.partitions(topic) for r in consumer.read(tp, 0)]

    def open_transactions() -> list[str]:
        return [md.transactional_id for md in log.coordinator.open_transactions("")]

    return Harness(EmbeddedBackend(log), read_values, clock.advance, open_transactions)


BACKENDS = {"embedded": embedded_harness}


@pytest.fixture(params=sorted(BACKENDS))
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    yield BACKENDS[request.param](tmp_path)


def rows(*values: str) -> pa.RecordBatch:
    return pa.record_batch([pa.array([v.encode() for v in values], pa.binary())], names=["value"])


def run_task(
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
        txn.write(TopicPartition(TOPIC, partition), rows(*values))
    return protocol.prepare_task(txn, batch_id, task_id, attempt)


def test_batch_is_invisible_until_the_driver_commits_then_visible_at_once(
    harness: Harness,
) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    first = run_task(protocol, 0, 0, {0: ["a", "b"], 1: ["c"]})
    second = run_task(protocol, 0, 1, {1: ["d"], 2: ["e"]})
    assert harness.read_values(TOPIC) == []
    assert first.record_count == 3
    assert [(p.partition, p.record_count) for p in second.partitions] == [(1, 1), (2, 1)]
    assert protocol.commit(0, [first, second]) is True
    assert sorted(harness.read_values(TOPIC)) == [b"a", b"b", b"c", b"d", b"e"]
    assert harness.open_transactions() == []


def test_a_second_commit_of_the_same_batch_is_a_no_op(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    message = run_task(protocol, 0, 0, {0: ["a"]})
    assert protocol.commit(0, [message]) is True
    assert protocol.commit(0, [message]) is False
    assert harness.read_values(TOPIC) == [b"a"]


def test_a_rerun_of_a_committed_batch_writes_nothing(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    assert protocol.commit(0, [run_task(protocol, 0, 0, {0: ["a"]})])
    rerun = run_task(protocol, 0, 0, {0: ["a"]}, attempt=1)
    assert rerun.skipped and rerun.record_count == 0
    assert protocol.commit(0, [rerun]) is False
    assert harness.read_values(TOPIC) == [b"a"]


def test_a_retried_task_leaves_no_duplicate(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    failed = protocol.begin_task(0, 0)
    assert failed is not None
    failed.write(TopicPartition(TOPIC, 0), rows("a", "b"))
    failed.flush()  # the attempt dies here, its data durable but uncommitted
    retry = run_task(protocol, 0, 0, {0: ["a", "b"]}, attempt=1)
    assert protocol.commit(0, [retry])
    assert harness.read_values(TOPIC) == [b"a", b"b"]


def test_a_stale_attempt_is_fenced_and_cannot_commit(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    other = run_task(protocol, 0, 1, {2: ["other"]})
    stale = protocol.begin_task(0, 0)
    assert stale is not None
    stale.write(TopicPartition(TOPIC, 0), rows("stale"))
    stale_message = protocol.prepare_task(stale, 0, 0, 0)
    speculative = run_task(protocol, 0, 0, {0: ["fresh"]}, attempt=1)  # fences ``stale``
    with pytest.raises(FencedError):
        stale.write(TopicPartition(TOPIC, 1), rows("late"))
    with pytest.raises(ProducerFencedError, match="sink-0"):
        protocol.commit(0, [stale_message, other])
    assert harness.read_values(TOPIC) == []  # nothing partial: not even task 1's rows
    assert protocol.commit(0, [speculative, other])
    assert sorted(harness.read_values(TOPIC)) == [b"fresh", b"other"]


def test_an_attempt_fenced_before_it_finished_fails_instead_of_reporting_success(
    harness: Harness,
) -> None:
    """A speculative copy that starts after the original wrote everything fences it (C-14).
    The original must then fail its task (Spark takes the copy's result), not return a
    message whose commit could only fail the whole micro-batch."""
    protocol = SinkCommitProtocol(harness.backend, SINK)
    original = protocol.begin_task(0, 0)
    assert original is not None
    original.write(TopicPartition(TOPIC, 0), rows("a"))
    copy = run_task(protocol, 0, 0, {0: ["a"]}, attempt=1)  # fences ``original``
    with pytest.raises(FencedError):
        protocol.prepare_task(original, 0, 0, 0)
    assert protocol.commit(0, [copy])
    assert harness.read_values(TOPIC) == [b"a"]


def test_abort_leaves_nothing_visible_and_nothing_open(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    done = run_task(protocol, 0, 0, {0: ["a"], 1: ["b"]})
    failing = protocol.begin_task(0, 1)
    assert failing is not None
    failing.write(TopicPartition(TOPIC, 2), rows("c"))  # then the task fails: no message
    assert protocol.abort(0, [done, None]) == ["sink-0", "sink-1"]
    assert harness.read_values(TOPIC) == []
    assert harness.open_transactions() == []
    # the batch can still be written afresh and committed
    assert protocol.commit(0, [run_task(protocol, 0, 0, {0: ["a"]}, attempt=1)])
    assert harness.read_values(TOPIC) == [b"a"]


def test_commit_aborts_zombies_of_the_prefix_only(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    zombie = protocol.begin_task(0, 7)  # a task of a bigger earlier run that never finished
    assert zombie is not None
    zombie.write(TopicPartition(TOPIC, 0), rows("zombie"))
    neighbour = SinkCommitProtocol(harness.backend, SinkIdentity("other", "sink-1", None))
    foreign = neighbour.begin_task(0, 0)  # "sink-1-0": not a task of prefix "sink"
    assert foreign is not None
    foreign.write(TopicPartition(TOPIC, 1), rows("foreign"))
    assert protocol.commit(0, [run_task(protocol, 0, 0, {2: ["a"]})])
    assert harness.open_transactions() == ["sink-1-0"]
    assert harness.read_values(TOPIC) == [b"a"]


def test_group_offsets_commit_with_the_batch_only(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    partitions = [TopicPartition("src", 0), TopicPartition("src", 1)]
    message = run_task(protocol, 0, 0, {0: ["a"]})
    assert harness.backend.committed_offsets("group-1", partitions) == dict.fromkeys(partitions)
    protocol.commit(0, [message], offsets=[("src", 0, 10), ("src", 1, 4)])
    assert harness.backend.committed_offsets("group-1", partitions) == dict(
        zip(partitions, [10, 4], strict=True)
    )
    protocol.commit(1, [run_task(protocol, 1, 0, {0: ["b"]})], offsets=[("src", 0, 12)])
    assert harness.backend.committed_offsets("group-1", partitions)[partitions[0]] == 12


def test_a_timed_out_task_transaction_fails_the_commit(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK, TaskSettings(transaction_timeout_ms=1000))
    slow = run_task(protocol, 0, 0, {0: ["a"]})
    quick = run_task(protocol, 0, 1, {1: ["b"]})
    harness.advance(5_000)
    with pytest.raises(TxnLogError, match="sink-0"):
        protocol.commit(0, [slow, quick])
    protocol.abort(0, [slow, quick])
    assert harness.read_values(TOPIC) == []
    assert harness.backend.last_committed_batch(SINK.sink_id) is None


def test_a_task_that_wrote_nothing_still_commits(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    empty = run_task(protocol, 3, 0, {})
    full = run_task(protocol, 3, 1, {0: ["a"]})
    assert protocol.commit(3, [empty, full])
    assert harness.backend.is_batch_committed(SINK.sink_id, 3)
    assert harness.backend.is_batch_committed(SINK.sink_id, 2)  # ids only grow
    assert not harness.backend.is_batch_committed(SINK.sink_id, 4)
    assert harness.read_values(TOPIC) == [b"a"]


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
    messages = [run_task(protocol, 0, 0, {0: ["a"]}), run_task(protocol, 0, 1, {1: ["b"]})]
    with pytest.raises(InvalidTxnStateError, match=match):
        protocol.commit(0, mutate(messages))
    assert harness.read_values(TOPIC) == []
    assert protocol.commit(0, messages)


def test_a_skip_without_a_ledger_entry_commits_nothing(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    with pytest.raises(InvalidTxnStateError, match="ledger"):
        protocol.commit(0, [protocol.skipped_task(0, 0, 0), run_task(protocol, 0, 1, {0: ["a"]})])
    assert harness.read_values(TOPIC) == []


def test_large_writes_are_split_into_batches_the_topic_accepts(harness: Harness) -> None:
    protocol = SinkCommitProtocol(harness.backend, SINK)
    limit = harness.backend.max_batch_bytes(TOPIC)
    count = 3 * limit // 1000
    txn = protocol.begin_task(0, 0)
    assert txn is not None
    txn.write(TopicPartition(TOPIC, 0), rows(*(f"{i:0>1000}" for i in range(count))))
    (written,) = txn.written()
    assert written.record_count == count and written.batch_count >= 3
    protocol.commit(0, [protocol.prepare_task(txn, 0, 0, 0)])
    assert [int(v) for v in harness.read_values(TOPIC)] == list(range(count))


def test_a_record_too_large_fails_the_write_and_leaves_the_task_abortable_only(
    harness: Harness,
) -> None:
    """F-09: a record over max.message.bytes on its own is refused, naming the partition;
    the task's transaction may then lack a record the task meant for it, so, as after any
    failed send of Kafka's transactional producer, it can only abort: nothing of it commits."""
    protocol = SinkCommitProtocol(harness.backend, SINK)
    limit = harness.backend.max_batch_bytes(TOPIC)
    txn = protocol.begin_task(0, 0)
    assert txn is not None
    txn.write(TopicPartition(TOPIC, 1), rows("never-committed"))
    with pytest.raises(RecordTooLargeError, match="out-0"):
        txn.write(TopicPartition(TOPIC, 0), rows("x" * (limit + 1)))
    with pytest.raises(TransactionAbortableError, match="RecordTooLargeError"):
        protocol.prepare_task(txn, 0, 0, 0)
    txn.abort()
    assert harness.open_transactions() == []
    assert harness.read_values(TOPIC) == []
    assert protocol.commit(0, [run_task(protocol, 0, 0, {0: ["a"]}, attempt=1)])
    assert harness.read_values(TOPIC) == [b"a"]
