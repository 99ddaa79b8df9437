"""Group offset snapshots (issue 14 item 2; O-03..O-05 across a snapshot).

A snapshot holds the materialized offsets (with their log offsets, deletions included) and the
transactional offsets still pending per producer at its offset. A transaction whose offsets were
pending when the snapshot was taken and whose COMMIT (or ABORT) marker lies in the tail must end
exactly as in a full replay: materialized on COMMIT, dropped on ABORT, and a plain commit written
after the transactional one must still win (the later append wins, O-05).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.txn_log.snapshot_history import full_replay_state, observed_state, same_state
from txn_log.group.group_metadata import OffsetAndMetadata
from txn_log.log import Log
from txn_log.storage.state_snapshot import SnapshotKind, StateSnapshotDir
from txn_log.topic_partition import TopicPartition

TP0 = TopicPartition("data", 0)
TP1 = TopicPartition("data", 1)


@pytest.mark.parametrize("outcome", ["commit", "abort", "commit-then-plain-wins"])
def test_o05_offsets_pending_at_snapshot_end_as_in_full_replay(
    tmp_path: Path, outcome: str
) -> None:
    path = tmp_path / "log"
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic("data", partitions=2)
        log.group_offsets.snapshot_interval_offsets = 10
        log.coordinator.snapshot_interval_records = 10**9
        producer = log.producer("sink-task")
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("data", b"x", partition=0)
        producer.send_offsets_to_transaction({TP0: 500, TP1: 600}, "g")
        producer.flush()  # the offsets are in __consumer_offsets, pending
        for i in range(12):  # plain commits of another group: a snapshot becomes due
            log.group_offsets.commit("other", {TP0: i})
        snapshots = StateSnapshotDir(path / "__consumer_offsets-0", SnapshotKind.GROUP_OFFSETS)
        assert snapshots.offsets(), "no group offset snapshot was written"
        taken = snapshots.read(snapshots.offsets()[-1])
        pending = [r for r in taken.records if r.producer_id == producer.producer_id]
        assert len(pending) == 2  # the snapshot holds the pending transactional offsets
        if outcome == "abort":
            producer.abort_transaction()
        else:
            producer.commit_transaction()
        if outcome == "commit-then-plain-wins":
            log.group_offsets.commit("g", {TP0: 7})
        producer.close()
    fresh = observed_state(path)
    assert fresh.offsets_snapshot == snapshots.offsets()[-1]
    assert same_state(fresh, full_replay_state(path, tmp_path))
    with Log.open(path, read_only=True, housekeeping_interval_ms=None) as log:
        got = log.group_offsets.committed("g", [TP0, TP1])
    expected = {
        "commit": {TP0: OffsetAndMetadata(500), TP1: OffsetAndMetadata(600)},
        "abort": {TP0: None, TP1: None},
        "commit-then-plain-wins": {TP0: OffsetAndMetadata(7), TP1: OffsetAndMetadata(600)},
    }[outcome]
    assert got == expected


def test_writer_only_process_still_writes_group_offset_snapshots(tmp_path: Path) -> None:
    """A process that only commits (never reads offsets) still snapshots: start-up cost stays
    flat for the next process even if no reader ever ran."""
    path = tmp_path / "log"
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic("data", partitions=1)
        log.group_offsets.snapshot_interval_offsets = 25
        for i in range(60):
            log.group_offsets.commit("g", {TP0: i})
    offsets = StateSnapshotDir(path / "__consumer_offsets-0", SnapshotKind.GROUP_OFFSETS).offsets()
    assert len(offsets) == 2 and offsets[-1] >= 50
    fresh = observed_state(path)
    assert fresh.offsets_snapshot == offsets[-1]
    assert same_state(fresh, full_replay_state(path, tmp_path))
