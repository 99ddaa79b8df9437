"""One data-loss rule for the driver's planning and the executors' reads (issue 13 item 5): the
same loss is cut from a range the same way and reported with the same message, whether the
driver notices it while planning or an executor while reading a task planned before it."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest

from offsets.admission import AdmissionLimit
from offsets.offset_range import OffsetRange
from tests.txn_source.test_planning import commit, planner, values
from txn_log.errors import OffsetOutOfRangeError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_source.data_loss import readable_range

T0 = TopicPartition("t", 0)


@pytest.mark.parametrize(
    ("planned", "log_start", "log_end", "kept", "lost"),
    [
        ((2, 8), 0, 10, (2, 8), []),
        ((2, 8), 5, 10, (5, 8), [r"offsets \[2, 5\) of t-0 were deleted before they were read"]),
        ((2, 8), 9, 12, (8, 8), [r"offsets \[2, 8\) of t-0 were deleted"]),
        ((2, 8), 0, 6, (2, 6), [r"t-0 ends at 6, before the planned end 8"]),
        ((4, 8), 0, 2, (4, 4), [r"t-0 ends at 2, before the planned end 8"]),
        ((2, 8), 5, 6, (5, 6), ["were deleted", "ends at 6"]),
    ],
)
def test_the_rule_keeps_what_the_log_still_holds_and_reports_the_rest(
    planned: tuple[int, int],
    log_start: int,
    log_end: int,
    kept: tuple[int, int],
    lost: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The kept range is never inverted (start ≤ end), so a task with nothing left reads
    nothing; with ``failOnDataLoss=true`` the first loss fails, naming the partition, the lost
    offsets and the option that lets a query go on."""
    given = OffsetRange(T0, *planned)
    bounds = {"log_start": log_start, "log_end": log_end}
    with caplog.at_level(logging.WARNING, logger="txn_source.data_loss"):
        result = readable_range(given, **bounds, fail_on_data_loss=False)
    assert result == OffsetRange(T0, *kept)
    assert len(caplog.records) == len(lost)
    for record, pattern in zip(caplog.records, lost, strict=True):
        assert re.search(pattern, record.getMessage()), record.getMessage()
    if lost:
        with pytest.raises(OffsetOutOfRangeError, match=lost[0]) as failure:
            readable_range(given, **bounds, fail_on_data_loss=True)
        assert "set the source option 'failOnDataLoss' to 'false'" in str(failure.value)


@pytest.fixture
def shrinking_log(tmp_path: Path) -> Log:
    """One partition whose old segments retention may delete."""
    log = Log.open(tmp_path / "log")
    log.create_topic("t", partitions=1, config={"segment.bytes": 200, "retention.bytes": 1})
    for i in range(6):
        commit(log, "a", [b"v%d" % i])
    return log


def test_deleted_offsets_read_the_same_at_planning_and_at_read_time(shrinking_log: Log) -> None:
    log = shrinking_log
    plan = planner(log.path)
    start = plan.initial_offsets()
    end = plan.latest_offset(start, AdmissionLimit())
    tasks = plan.plan(start, end)
    assert len(tasks) == 1
    assert log.partition_log(T0).delete_old_segments()
    with pytest.raises(OffsetOutOfRangeError) as at_planning:
        plan.plan(start, end)
    with pytest.raises(OffsetOutOfRangeError) as at_read:
        values(tasks)
    assert str(at_read.value) == str(at_planning.value)
    lenient = planner(log.path, failOnDataLoss="false")
    replanned = lenient.plan(start, end)
    late = [dataclasses.replace(t, fail_on_data_loss=False) for t in tasks]
    assert values(late) == values(replanned) != []


def test_a_deleted_topic_reads_the_same_at_planning_and_at_read_time(shrinking_log: Log) -> None:
    log = shrinking_log
    plan = planner(log.path)
    start = plan.initial_offsets()
    end = plan.latest_offset(start, AdmissionLimit())
    tasks = plan.plan(start, end)
    log.delete_topic("t")
    with pytest.raises(OffsetOutOfRangeError, match="t-0 is gone") as at_planning:
        plan.plan(start, end)
    with pytest.raises(OffsetOutOfRangeError) as at_read:
        values(tasks)
    assert str(at_read.value) == str(at_planning.value)
    assert f"offsets [0, {end[T0]}) were read" in str(at_read.value)


def test_records_deleted_below_a_planned_start_are_data_loss_at_planning_and_at_read_time(
    tmp_path: Path,
) -> None:
    """DeleteRecords (issue 25 item 7) into the middle of a planned range, inside a segment:
    Spark's failOnDataLoss, as for retention. With it (the default) planning and the tasks
    planned before fail alike, naming the offsets deleted; without it both skip them (with a
    warning) and read from the new log start."""
    log = Log.open(tmp_path / "log")
    log.create_topic("t", partitions=1)
    commit(log, "a", [b"v%d" % i for i in range(6)])  # offsets 0..5, the marker at 6
    plan = planner(log.path)
    start = plan.initial_offsets()
    end = plan.latest_offset(start, AdmissionLimit())
    tasks = plan.plan(start, end)
    assert log.delete_records({T0: 4})[T0].low_watermark == 4
    message = r"offsets \[0, 4\) of t-0 were deleted before they were read; the log now starts at 4"
    with pytest.raises(OffsetOutOfRangeError, match=message) as at_planning:
        plan.plan(start, end)
    with pytest.raises(OffsetOutOfRangeError) as at_read:
        values(tasks)
    assert str(at_read.value) == str(at_planning.value)
    lenient = planner(log.path, failOnDataLoss="false")
    late = [dataclasses.replace(t, fail_on_data_loss=False) for t in tasks]
    assert values(late) == values(lenient.plan(start, end)) == [b"v4", b"v5"]
