"""Driver planning and executor reads without a JVM: the stream planner, the batch reader's
plan and ``read_partition`` over a real log."""

from __future__ import annotations

import dataclasses
import os
import pickle
import time
from pathlib import Path

import pytest

from offsets.admission import AdmissionLimit
from offsets.partition_offsets import PartitionOffsets
from tests.support import open_transaction
from txn_log.clock import ManualClock
from txn_log.errors import ConfigError, OffsetOutOfRangeError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_source.options import parse_source_options
from txn_source.partition import TxnLogInputPartition, read_partition
from txn_source.reader import TxnLogBatchReader, TxnLogStreamReader
from txn_source.schema import kafka_schema
from txn_source.stream_planner import StreamPlanner

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def commit(log: Log, txn_id: str, values: list[bytes], partition: int = 0) -> None:
    producer = log.producer(txn_id)
    producer.init_transactions()
    producer.begin_transaction()
    for value in values:
        producer.send("t", value, partition=partition)
    producer.commit_transaction()


def aborted(log: Log, txn_id: str, values: list[bytes], partition: int = 0) -> None:
    producer = log.producer(txn_id)
    producer.init_transactions()
    producer.begin_transaction()
    for value in values:
        producer.send("t", value, partition=partition)
    producer.flush()
    producer.abort_transaction()


def planner(path: Path, clock: ManualClock | None = None, **options: str) -> StreamPlanner:
    parsed = parse_source_options(
        {"path": str(path), "subscribe": "t", "startingOffsets": "earliest", **options},
        streaming=True,
    )
    return StreamPlanner(parsed, clock or ManualClock())


def values(tasks: list[TxnLogInputPartition]) -> list[bytes]:
    out: list[bytes] = []
    for task in tasks:
        for batch in read_partition(pickle.loads(pickle.dumps(task))):
            out.extend(batch.column("value").to_pylist())
    return out


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log")
    log.create_topic("t", partitions=2)
    return log


def test_aborted_transactions_travel_with_the_task_and_are_dropped(log: Log) -> None:
    commit(log, "a", [b"c1", b"c2"])
    aborted(log, "b", [b"x1", b"x2"])
    commit(log, "a", [b"c3"])
    plan = planner(log.path)
    start = plan.initial_offsets()
    end = plan.latest_offset(start, AdmissionLimit())
    tasks = plan.plan(start, end)
    assert [t.partition for t in tasks] == [0]
    assert len(tasks[0].aborted_txns) == 1
    assert values(tasks) == [b"c1", b"c2", b"c3"]
    assert values(tasks) == values(tasks)  # re-reading a range yields the same rows


@pytest.mark.parametrize("step", [1, 2, 3])
def test_ranges_ending_on_markers_or_inside_aborted_transactions(log: Log, step: int) -> None:
    """TESTING 10(d): tiny micro-batches start and end on markers and inside aborted
    transactions; together they deliver exactly the committed records, in order."""
    commit(log, "a", [b"c1", b"c2"])
    aborted(log, "b", [b"x1", b"x2", b"x3"])
    aborted(log, "b", [b"x4"])
    commit(log, "a", [b"c3"])
    plan = planner(log.path)
    position = plan.initial_offsets()
    delivered: list[bytes] = []
    for _ in range(20):
        end = plan.latest_offset(position, AdmissionLimit(max_rows=step))
        if end == position:
            break
        delivered += values(plan.plan(position, end))
        position = end
    assert delivered == [b"c1", b"c2", b"c3"]
    assert position[T0] == 11  # 3 committed + 4 aborted records, 2 COMMIT + 2 ABORT markers


def test_open_transaction_holds_the_end_at_its_first_offset(log: Log) -> None:
    commit(log, "a", [b"c1"])
    open_txn = log.producer("open")
    open_txn.init_transactions()
    open_txn.begin_transaction()
    open_txn.send("t", b"later", partition=0)
    open_txn.flush()
    commit(log, "a", [b"c2"])  # after the open transaction: held back too
    plan = planner(log.path)
    start = plan.initial_offsets()
    end = plan.latest_offset(start, AdmissionLimit())
    assert end[T0] == 2  # c1 and its marker
    assert values(plan.plan(start, end)) == [b"c1"]
    open_txn.commit_transaction()
    final = plan.latest_offset(end, AdmissionLimit())
    assert values(plan.plan(end, final)) == [b"later", b"c2"]


def test_read_uncommitted_sees_open_and_aborted_records(log: Log) -> None:
    aborted(log, "b", [b"x1"])
    open_txn = log.producer("open")
    open_txn.init_transactions()
    open_txn.begin_transaction()
    open_txn.send("t", b"o1", partition=0)
    open_txn.flush()
    plan = planner(log.path, **{"isolation.level": "read_uncommitted"})
    start = plan.initial_offsets()
    tasks = plan.plan(start, plan.latest_offset(start, AdmissionLimit()))
    assert tasks[0].aborted_txns == ()
    assert values(tasks) == [b"x1", b"o1"]


def test_max_rows_and_available_now_target(log: Log) -> None:
    commit(log, "a", [b"%d" % i for i in range(10)], partition=0)
    plan = planner(log.path)
    plan.fix_target()
    commit(log, "a", [b"late"], partition=1)  # after the target: not read by this run
    position = plan.initial_offsets()
    seen: list[bytes] = []
    for _ in range(10):
        end = plan.latest_offset(position, AdmissionLimit(max_rows=4))
        if end == position:
            break
        seen += values(plan.plan(position, end))
        position = end
    assert seen == [b"%d" % i for i in range(10)]
    assert position[T0] == 11 and position[T1] == 0
    assert plan.latest == PartitionOffsets.of({T0: 11, T1: 0})


def test_partitions_born_after_the_target_are_kept_not_lost(log: Log) -> None:
    plan = planner(log.path)
    plan.fix_target()
    log.create_partitions("t", 3)  # between the target and the initial offsets
    start = plan.initial_offsets()
    assert TopicPartition("t", 2) in start
    end = plan.latest_offset(start, AdmissionLimit())
    assert end == start  # nothing to read, and no partition dropped (no false data loss)
    assert plan.plan(start, end) == []


def test_min_rows_waits_for_enough_offsets_or_the_delay(log: Log) -> None:
    clock = ManualClock()
    commit(log, "a", [b"1", b"2"])
    plan = planner(log.path, clock)
    start = plan.initial_offsets()
    limit = AdmissionLimit(min_rows=5, max_trigger_delay_ms=1000)
    assert plan.latest_offset(start, limit) != start  # the first trigger always runs
    assert plan.latest_offset(start, limit) == start  # 3 offsets < 5, delay not passed
    clock.advance(1000)
    assert plan.latest_offset(start, limit) != start


def test_new_partitions_are_read_from_their_start(log: Log) -> None:
    commit(log, "a", [b"p0"], partition=0)
    plan = planner(log.path)
    start = plan.initial_offsets()
    log.create_partitions("t", 3)
    producer = log.producer()
    producer.send("t", b"p2", partition=2)
    producer.flush()
    end = plan.latest_offset(start, AdmissionLimit())
    assert TopicPartition("t", 2) not in start and end[TopicPartition("t", 2)] == 1
    assert sorted(values(plan.plan(start, end))) == [b"p0", b"p2"]


def test_deleted_range_is_data_loss(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "log")
    log.create_topic("t", partitions=1, config={"segment.bytes": 200, "retention.bytes": 1})
    for i in range(6):
        commit(log, "a", [b"v%d" % i])
    plan = planner(log.path)
    start = plan.initial_offsets()
    end = plan.latest_offset(start, AdmissionLimit())
    tasks = plan.plan(start, end)
    assert log.partition_log(T0).delete_old_segments()
    with pytest.raises(OffsetOutOfRangeError, match=r"were deleted.*'failOnDataLoss' to 'false'"):
        plan.plan(start, end)
    with pytest.raises(OffsetOutOfRangeError, match=r"offsets \[0, \d+\) of t-0 were deleted"):
        values(tasks)  # planned before the deletion, read after
    lenient = planner(log.path, failOnDataLoss="false")
    survivors = values(lenient.plan(start, end))
    assert survivors and survivors == [b"v%d" % i for i in range(6)][-len(survivors) :]


def test_readers_pickle_without_driver_state_and_batch_plans(log: Log) -> None:
    commit(log, "a", [b"a", b"b", b"c"], partition=1)
    options = {"path": str(log.path), "subscribe": "t"}
    stream = TxnLogStreamReader(options, kafka_schema(False))
    stream.initialOffset()
    copy = pickle.loads(pickle.dumps(stream))
    assert copy._planner is None and stream._planner is not None
    stream.stop()
    batch = TxnLogBatchReader(
        {**options, "endingOffsets": '{"t": {"0": -1, "1": 2}}'}, kafka_schema(False)
    )
    tasks = batch.partitions()
    assert [(t.partition, t.start, t.end) for t in tasks] == [(1, 0, 2)]  # type: ignore[attr-defined]
    assert values(tasks) == [b"a", b"b"]  # type: ignore[arg-type]


def test_a_topic_deleted_after_planning_is_data_loss_at_read_time(log: Log) -> None:
    commit(log, "a", [b"gone"])
    plan = planner(log.path)
    start = plan.initial_offsets()
    tasks = plan.plan(start, plan.latest_offset(start, AdmissionLimit()))
    log.delete_topic("t")
    with pytest.raises(OffsetOutOfRangeError, match="t-0 is gone"):
        values(tasks)
    lenient = [dataclasses.replace(t, fail_on_data_loss=False) for t in tasks]
    assert values(lenient) == []
    with pytest.raises(OffsetOutOfRangeError, match="t-0 is gone"):
        plan.plan(start, start)  # the next plan reports it too


def test_a_topic_recreated_after_planning_is_data_loss_not_the_new_topics_records(
    log: Log,
) -> None:
    """The plan names the topic id it read (Kafka's topic id): a task whose topic was deleted
    and created again, with as many offsets as planned, must not read the new topic's records
    as if they were the old ones."""
    commit(log, "a", [b"old-0", b"old-1"])
    plan = planner(log.path)
    start = plan.initial_offsets()
    tasks = plan.plan(start, plan.latest_offset(start, AdmissionLimit()))
    log.delete_topic("t")
    log.create_topic("t", partitions=2)
    commit(log, "b", [b"new-0", b"new-1", b"new-2"])
    with pytest.raises(OffsetOutOfRangeError, match="re-created"):
        values(tasks)
    lenient = [dataclasses.replace(t, fail_on_data_loss=False) for t in tasks]
    assert values(lenient) == []


def test_a_dead_transaction_whose_batch_was_torn_off_ends_before_the_plan(tmp_path: Path) -> None:
    """A producer died mid-append: recovery cut its only batch off, so no partition shows its
    transaction open, but the coordinator does (C-25, C-26: it times out and is aborted).
    Reading the ends aborts it first, so its ABORT marker is inside the planned end instead of
    landing after it (an AvailableNow run would otherwise end one marker short)."""
    log = Log.open(tmp_path / "log")
    log.create_topic("t", partitions=1)
    commit(log, "w", [b"kept"])  # offsets 0, marker 1
    segment = next((tmp_path / "log" / "t-0").glob("*.log"))
    committed_size = segment.stat().st_size
    open_transaction(log, "dying", [("t", 0, b"torn")], transaction_timeout_ms=50)
    log.close()
    os.truncate(segment, committed_size + 20)  # the process died inside that batch's write
    time.sleep(0.1)  # past its transaction timeout
    stream = planner(tmp_path / "log")
    end = stream.fetch_latest()
    with Log.open(tmp_path / "log") as after:
        assert after.coordinator.open_transactions("") == []
        log_end = after.partition_log(T0).log_end_offset
    assert end == PartitionOffsets.of({T0: log_end}) and log_end == 3  # the ABORT marker is 2
    assert values(stream.plan(PartitionOffsets.of({T0: 0}), end)) == [b"kept"]
    stream.close()


def test_a_batch_read_never_ends_inside_an_open_transaction(log: Log) -> None:
    """B-05: explicit endingOffsets past the LSO are refused at planning (before any task) under
    read_committed, instead of delivering an open transaction's records; read_uncommitted may."""
    commit(log, "a", [b"c1"])  # offset 0, marker 1
    pending = open_transaction(log, "open", [("t", 0, b"uncommitted")])  # offset 2: the LSO
    ending = {"subscribe": "t", "endingOffsets": '{"t": {"0": 3, "1": -1}}'}
    reader = TxnLogBatchReader({"path": str(log.path), **ending}, kafka_schema(False))
    with pytest.raises(ConfigError, match="'endingOffsets': offset 3 for t-0 is past its last"):
        reader.partitions()
    dirty = {**ending, "isolation.level": "read_uncommitted"}
    reader = TxnLogBatchReader({"path": str(log.path), **dirty}, kafka_schema(False))
    assert values(reader.partitions()) == [b"c1", b"uncommitted"]
    pending.abort_transaction()


def test_a_topic_recreated_while_its_tasks_are_planned_is_data_loss_not_new_records(
    log: Log,
) -> None:
    """Issue 29 item 3 at planning time: the topic is deleted and re-created between the look
    at its bounds and the end of planning. The task must name the topic id of the topic it
    was planned on (taken before the bounds), so that the executor refuses the new topic's
    records; taken after, it named the new topic and read new-0, new-1 as the planned range."""
    from txn_source.log_view import LogView
    from txn_source.planning import plan_input_partitions

    class RecreatedMidPlan(LogView):
        """A view over which another writer re-creates ``t`` as planning reads its bounds."""

        recreated = False

        def earliest(self, topic_partition: TopicPartition) -> int:
            if not self.recreated:
                self.recreated = True
                log.delete_topic("t")
                log.create_topic("t", partitions=2)
                commit(log, "b", [b"new-0", b"new-1", b"new-2"])
            return super().earliest(topic_partition)

    commit(log, "a", [b"old-0", b"old-1"])
    plan = planner(log.path)
    start = plan.initial_offsets()
    end = plan.latest_offset(start, AdmissionLimit())
    with RecreatedMidPlan(str(log.path), plan.options.isolation_level) as view:
        tasks = plan_input_partitions(view, plan.options, start, end)
        assert view.recreated
    with pytest.raises(OffsetOutOfRangeError, match="re-created"):
        values([t for t in tasks if t.start < t.end])  # type: ignore[attr-defined]


def test_batch_zero_from_latest_plans_the_same_when_a_restart_runs_it_again(log: Log) -> None:
    """Spark keeps no initial offset of a Python source: a driver killed before batch 0
    commits calls initialOffset again at the restart, and plans batch 0 from there to the end
    its checkpoint kept. With startingOffsets latest the start is the marker -1, taken as the
    batch's own end: batch 0 is the same (empty) in both runs, and every record after it is
    read once, in batch 1. Before: the restart's start, resolved again, lay past batch 0's end
    (records had arrived meanwhile): 'the offset went back', on every restart."""
    commit(log, "a", [b"before"])  # before the query: not read
    first = planner(log.path, startingOffsets="latest")
    start = first.initial_offsets()
    commit(log, "a", [b"during"])
    end = first.latest_offset(start, AdmissionLimit(max_rows=1))
    planned = values(first.plan(start, end))
    # the driver dies here; more records arrive, and a partition too; the query restarts
    commit(log, "a", [b"after"])
    log.create_partitions("t", 3)
    second = planner(log.path, startingOffsets="latest")
    again = second.initial_offsets()
    assert values(second.plan(again, end)) == planned == []
    final = second.latest_offset(end, AdmissionLimit())
    assert values(second.plan(end, final)) == [b"after"]
    assert end[T0] == 4  # batch 0 ended where the log ended when it was planned


def test_json_offsets_keep_a_latest_partition_as_the_marker(log: Log) -> None:
    """JSON startingOffsets mixing -1 and an offset: -1 stays the marker (settled at each
    plan), the other partition starts at its offset."""
    commit(log, "a", [b"p0"], partition=0)
    commit(log, "a", [b"p1-a", b"p1-b"], partition=1)
    plan = planner(log.path, startingOffsets='{"t":{"0":-1,"1":0}}')
    start = plan.initial_offsets()
    assert start.as_dict() == {T0: -1, T1: 0}
    end = plan.latest_offset(start, AdmissionLimit())
    assert values(plan.plan(start, end)) == [b"p1-a", b"p1-b"]
