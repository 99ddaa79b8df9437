"""Kafka's ``flush.messages`` and ``flush.ms`` applied (``storage.flush_policy``): an append the
caller does not sync (a wire Produce with acks=1 or 0; every acknowledgement that promises
durability fsyncs anyway) is forced to disk once ``flush.messages`` such messages wait, or
once the oldest has waited ``flush.ms``, checked at each append and each housekeeping pass;
with Kafka's defaults (Long.MAX_VALUE) nothing is synced that was not before. The fsyncs are
counted by wrapping the active segment's ``flush``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.txn_log.storage.test_partition_log import batch, open_log
from txn_log.clock import ManualClock
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.segment import LogSegment


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per fdatasync of a segment's .log (its base offset)."""
    done: list[int] = []
    real = LogSegment.flush

    def counted(segment: LogSegment) -> None:
        done.append(segment.base_offset)
        real(segment)

    monkeypatch.setattr(LogSegment, "flush", counted)
    return done


def append(log: PartitionLog, count: int, start: int = 0) -> None:
    log.append(batch(count, start=start))  # not synced by the caller, as acks=1


def test_kafkas_defaults_sync_nothing_the_caller_did_not_ask_for(
    tmp_path: Path, syncs: list[int]
) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    for round_ in range(5):
        append(log, 100, round_ * 100)
        clock.advance(3_600_000)
    log.run_housekeeping()
    assert syncs == []
    log.append(batch(1, start=500), sync=True)
    assert syncs == [0]


def test_flush_messages_syncs_once_that_many_messages_wait(
    tmp_path: Path, syncs: list[int]
) -> None:
    log = open_log(tmp_path, ManualClock(), **{"flush.messages": "5"})
    append(log, 2)
    append(log, 2, 2)
    assert syncs == []
    append(log, 1, 4)  # 5 waiting: synced with this append
    assert syncs == [0]
    append(log, 4, 5)
    assert syncs == [0]  # the count starts again after each sync
    log.flush()  # an explicit sync counts too
    append(log, 4, 9)
    assert syncs == [0, 0]
    append(log, 1, 13)
    assert syncs == [0, 0, 0]


def test_flush_ms_syncs_at_the_next_append_or_housekeeping_pass(
    tmp_path: Path, syncs: list[int]
) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **{"flush.ms": "1000"})
    append(log, 1)
    clock.advance(999)
    append(log, 1, 1)
    log.run_housekeeping()
    assert syncs == []
    clock.advance(1)  # the first unsynced message has waited flush.ms
    log.run_housekeeping()
    assert syncs == [0]
    log.run_housekeeping()
    assert syncs == [0]  # nothing waits any more
    append(log, 1, 2)
    clock.advance(1000)
    append(log, 1, 3)
    assert syncs == [0, 0]
    zero = open_log(tmp_path / "zero", clock, **{"flush.ms": "0"})
    append(zero, 1)
    assert syncs == [0, 0, 0]  # flush.ms=0: every append


def test_a_config_altered_while_messages_wait_applies_at_the_next_check(
    tmp_path: Path, syncs: list[int]
) -> None:
    """The bounds are read from the config at each check (a peer may alter it meanwhile)."""
    from txn_log.topic_config import TopicConfig

    clock = ManualClock()
    log = open_log(tmp_path, clock)
    append(log, 3)
    assert syncs == []
    log.follow_config(lambda: TopicConfig.from_mapping({"flush.messages": "2"}))
    log.run_housekeeping()
    assert syncs == [0]
