"""Producer-state snapshots at a clean close and in housekeeping (P-24, issue 14).

Without them a partition that never rolls a segment (internal topics, small topics) replays its
whole history into producer state on every open. A partition whose producer state is at least
``PRODUCER_SNAPSHOT_LAG_OFFSETS`` past its newest snapshot takes one when closed cleanly (as
Kafka does at shutdown) and in a housekeeping pass (so a process that is later SIGKILLed has
left one too); below that lag the partition's files are left as they are.
"""

from __future__ import annotations

from pathlib import Path

from txn_log.log import Log
from txn_log.record.codec import encode_records
from txn_log.storage.partition_log import PRODUCER_SNAPSHOT_LAG_OFFSETS
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def _append(log: Log, count: int, first_sequence: int = 0) -> int:
    """``count`` idempotent batches of one record from producer 7; returns the log end."""
    plog = log.partition_log(TP)
    for i in range(count):
        batch = encode_records([(None, b"v", 0, ())], now_ms=log.clock.time_ms(), producer_id=7,
                               producer_epoch=0, base_sequence=first_sequence + i)  # fmt: skip
        plog.append(batch)
    return plog.log_end_offset


def _snapshots(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "t-0").glob("*.snapshot"))


def test_p24_clean_close_snapshots_producer_state_past_the_lag(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic("t", partitions=1)
        end = _append(log, PRODUCER_SNAPSHOT_LAG_OFFSETS + 5)
        before = dict(log.partition_log(TP).producer_state.active_producers())
    assert _snapshots(path) == [f"{end:020d}.snapshot"]
    with Log.open(path, housekeeping_interval_ms=None) as log:
        state = log.partition_log(TP).producer_state
        assert state.latest_snapshot_offset() == end
        assert state.active_producers()[7].last_seq == before[7].last_seq
        # the next batch in sequence is accepted, a duplicate of the last one is detected
        assert _append(log, 1, PRODUCER_SNAPSHOT_LAG_OFFSETS + 5) == end + 1


def test_p24_below_the_lag_close_leaves_the_files_alone(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic("t", partitions=1)
        _append(log, 50)
    assert _snapshots(path) == []


def test_p24_housekeeping_snapshots_producer_state_past_the_lag(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic("t", partitions=1)
        end = _append(log, PRODUCER_SNAPSHOT_LAG_OFFSETS)
        assert _snapshots(path) == []
        log.run_housekeeping()
        assert _snapshots(path) == [f"{end:020d}.snapshot"]
