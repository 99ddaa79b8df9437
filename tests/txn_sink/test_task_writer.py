"""Executor-side writes without Spark: routing, buffering limits, the vectorized partitioner."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity
from commit_protocol.embedded import EmbeddedBackend
from commit_protocol.messages import PartitionWrite
from txn_log.errors import InvalidRecordError, UnknownTopicOrPartitionError
from txn_log.log import Log
from txn_log.partitioner import murmur2, partition_for_key
from txn_log.topic_partition import TopicPartition
from txn_sink.input_schema import InputColumns
from txn_sink.key_partitioner import NO_PARTITION, murmur2_array, partitions_for_keys
from txn_sink.options import SinkOptions
from txn_sink.task_writer import PartitionRouter, TaskWriter, write_task

SINK = SinkIdentity("spark-query-q", "txnlog-q", "txnlog-q")


# --- the vectorized partitioner --------------------------------------------------------------


@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60))
@settings(max_examples=200)
def test_vectorized_murmur2_equals_the_scalar_one(keys: list[bytes | None]) -> None:
    array = pa.array(keys, pa.binary())
    hashes = murmur2_array(array).tolist()
    for key, value in zip(keys, hashes, strict=True):
        if key is not None:
            assert value == murmur2(key) & 0xFFFFFFFF
    expected = [NO_PARTITION if k is None else partition_for_key(k, 7) for k in keys]
    assert partitions_for_keys(array, 7).tolist() == expected


@pytest.mark.parametrize("length", [0, 1, 3, 4, 16, 17])
def test_uniform_length_keys_take_the_matrix_path(length: int) -> None:
    keys = [os.urandom(length) for _ in range(500)]
    array = pa.array(keys, pa.binary()).slice(7)  # an offset into the buffers, too
    assert partitions_for_keys(array, 5).tolist() == [partition_for_key(k, 5) for k in keys[7:]]


def test_string_keys_hash_their_utf8_bytes() -> None:
    keys = ["héllo", "k1", ""]
    assert partitions_for_keys(pa.array(keys), 9).tolist() == [
        partition_for_key(k.encode(), 9) for k in keys
    ]


# --- routing and buffering -------------------------------------------------------------------


class RecordingTransaction:
    """A TaskTransaction that only records what it is asked to write."""

    transactional_id, producer_id, producer_epoch = "t-0", 1, 0

    def __init__(self) -> None:
        self.writes: list[tuple[TopicPartition, int, int]] = []

    def write(self, tp: TopicPartition, records: Any) -> None:
        self.writes.append((tp, records.num_rows, records.nbytes))

    def register(self, partitions: Any) -> None: ...

    def flush(self) -> None: ...

    def written(self) -> tuple[PartitionWrite, ...]:
        return ()

    def abort(self) -> None: ...

    peak_buffered_bytes = 0


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    log = Log.open(tmp_path / "log")
    log.create_topic("out", partitions=4)
    log.create_topic("other", partitions=2)
    log.close()
    return tmp_path / "log"


def options(log_path: Path, **extra: str) -> SinkOptions:
    return SinkOptions.parse({"path": str(log_path), "topic": "out", **extra})


def batch(start: int, count: int, *, value_size: int = 100, **extra: Any) -> pa.RecordBatch:
    ids = range(start, start + count)
    columns = {
        "key": pa.array([f"key-{i:012d}".encode() for i in ids], pa.binary()),
        "value": pa.array([f"{i:0>{value_size}}".encode() for i in ids], pa.binary()),
        **extra,
    }
    return pa.record_batch(list(columns.values()), names=list(columns))


def test_every_piece_is_routed_to_the_transaction_in_input_order(log_path: Path) -> None:
    """The task writer only routes: every row reaches the transaction once, keyed rows on
    their murmur2 partition, in input order within a partition (buffering is the producer's,
    below)."""
    opts = options(log_path)
    backend = EmbeddedBackend.open(log_path)
    router = PartitionRouter(backend, opts, InputColumns(("value", "key")), task_id=0)
    txn = RecordingTransaction()
    writer = TaskWriter(txn, router)  # type: ignore[arg-type]
    writer.write_all(batch(i, 100) for i in range(0, 2_000, 100))
    assert sum(rows for _, rows, _ in txn.writes) == 2_000
    assert {tp.partition for tp, _, _ in txn.writes} == {0, 1, 2, 3}


def test_buffers_stay_within_batch_size_and_buffer_memory(log_path: Path) -> None:
    """The task's producer (``Producer.send_batch``) appends a partition's buffer before it
    passes batch.size, and the largest buffers early to keep them all within buffer.memory
    (at most one input piece over)."""
    opts = options(log_path, **{"batch.size": "20000", "buffer.memory": "50000"})
    columns = InputColumns(("value", "key"))
    message, peak = write_task(
        opts, columns, SINK, 0, (0, 0), (batch(i, 100) for i in range(0, 20_000, 100))
    )
    assert message.record_count == 20_000
    piece = batch(0, 100).nbytes  # at most one input batch over the limit
    assert 0 < peak <= 50_000 + piece
    assert {p.partition for p in message.partitions} == {0, 1, 2, 3}
    log = Log.open(log_path)
    for tp in log.partitions("out"):
        batches = list(log.partition_log(tp).read(0))
        # each batch holds at most batch.size of Arrow bytes: 100 rows of the input take
        # ``piece`` bytes, so no batch may hold more rows than that share allows
        most = max(header.records_count for header, _ in batches)
        assert most <= 20_000 * 100 // piece + 1, f"{tp}: a batch of {most} rows"
    log.close()


def test_writes_land_by_partition_column_then_key_then_round_robin(log_path: Path) -> None:
    opts = options(log_path)
    rows = pa.record_batch(
        [
            pa.array([b"a", None, None, b"b", None, None], pa.binary()),
            pa.array([f"v{i}".encode() for i in range(6)], pa.binary()),
            pa.array([3, 1, None, None, None, None], pa.int32()),
        ],
        names=["key", "value", "partition"],
    )
    columns = InputColumns(("value", "key", "partition"))
    message, _ = write_task(opts, columns, SINK, 0, (2, 0), [rows])
    assert message.record_count == 6 and not message.skipped
    SinkCommitProtocol(EmbeddedBackend.open(log_path), SINK).commit(0, [message])
    log = Log.open(log_path)
    placed = {
        r.value.decode(): tp.partition
        for tp in log.partitions("out")
        for r in log.consumer().read(tp, 0)
    }
    # v0, v1: the partition column; v3: murmur2 of b"b"; v2, v4, v5: round-robin from task 2
    assert placed == {
        "v0": 3,
        "v1": 1,
        "v3": partition_for_key(b"b", 4),
        "v2": 2,
        "v4": 3,
        "v5": 0,
    }


def test_input_order_is_kept_within_a_partition(log_path: Path) -> None:
    opts = options(log_path, **{"batch.size": "3000"})
    columns = InputColumns(("value", "key"))
    message, _ = write_task(
        opts, columns, SINK, 0, (0, 0), [batch(i, 50) for i in range(0, 1000, 50)]
    )
    assert sum(p.batch_count for p in message.partitions) > 4  # several batches per partition
    SinkCommitProtocol(EmbeddedBackend.open(log_path), SINK).commit(0, [message])
    log = Log.open(log_path)
    for tp in log.partitions("out"):
        ids = [int(r.value) for r in log.consumer().read(tp, 0)]
        assert ids == sorted(ids)
        assert all(partition_for_key(f"key-{i:012d}".encode(), 4) == tp.partition for i in ids)


def test_a_topic_column_splits_rows_between_topics(log_path: Path) -> None:
    opts = SinkOptions.parse({"path": str(log_path)})
    rows = batch(0, 10, topic=pa.array(["out", "other"] * 5))
    message, _ = write_task(opts, InputColumns(("value", "key", "topic")), SINK, 0, (0, 0), [rows])
    assert {p.topic for p in message.partitions} == {"out", "other"}
    assert message.record_count == 10


@pytest.mark.parametrize(
    ("column", "bad", "error", "match"),
    [
        ("topic", pa.array(["out", None]), InvalidRecordError, "null topic"),
        ("topic", pa.array(["out", "nope"]), UnknownTopicOrPartitionError, "topics create"),
        ("partition", pa.array([0, 4], pa.int32()), UnknownTopicOrPartitionError, r"4 .* 0\.\.3"),
        ("partition", pa.array([-1, 0], pa.int32()), UnknownTopicOrPartitionError, "holds -1"),
    ],
)
def test_bad_rows_fail_the_task_and_abort_its_transaction(
    log_path: Path, column: str, bad: Any, error: type, match: str
) -> None:
    good = pa.array(["out"] * 5) if column == "topic" else pa.array([1] * 5, pa.int32())
    topic = {} if column == "topic" else {"topic": "out"}
    opts = SinkOptions.parse({"path": str(log_path), "batch.size": "1", **topic})  # no buffering
    rows = [batch(0, 5, **{column: good}), batch(5, 2, **{column: bad})]
    with pytest.raises(error, match=match):
        write_task(opts, InputColumns(("value", column)), SINK, 0, (0, 0), rows)
    log = Log.open(log_path)
    assert log.coordinator.open_transactions("") == []
    assert (
        sum(len(log.consumer("read_uncommitted").read(tp, 0)) for tp in log.partitions("out")) >= 5
    )


def test_create_topic_creates_a_missing_topic(log_path: Path) -> None:
    opts = SinkOptions.parse(
        {"path": str(log_path), "createTopic": "true", "createTopic.partitions": "3"}
    )
    rows = batch(0, 4, topic=pa.array(["fresh"] * 4))
    write_task(opts, InputColumns(("value", "topic")), SINK, 0, (0, 0), [rows])
    assert len(Log.open(log_path).partitions("fresh")) == 3


def test_a_task_of_a_committed_batch_writes_nothing(log_path: Path) -> None:
    opts = options(log_path)
    columns = InputColumns(("value", "key"))
    first, _ = write_task(opts, columns, SINK, 5, (0, 0), [batch(0, 10)])
    SinkCommitProtocol(EmbeddedBackend.open(log_path), SINK).commit(5, [first])
    consumed = []

    def rows() -> Any:
        for b in (batch(0, 10), batch(10, 10)):
            consumed.append(b.num_rows)
            yield b

    rerun, peak = write_task(opts, columns, SINK, 5, (0, 1), rows())
    assert rerun.skipped and rerun.record_count == 0 and peak == 0
    assert consumed == [10, 10]  # the input is drained, not left half-read


def test_random_batches_round_trip(log_path: Path) -> None:
    rng = random.Random(3)
    batches = [batch(i * 37, rng.randint(1, 37), value_size=rng.randint(0, 300)) for i in range(30)]
    opts = options(log_path, **{"batch.size": "4096", "compression.type": "gzip"})
    message, _ = write_task(opts, InputColumns(("value", "key")), SINK, 0, (0, 0), batches)
    SinkCommitProtocol(EmbeddedBackend.open(log_path), SINK).commit(0, [message])
    log = Log.open(log_path)
    got = sorted(r.value for tp in log.partitions("out") for r in log.consumer().read(tp, 0))
    assert got == sorted(v for b in batches for v in b.column("value").to_pylist())
