"""Offset commits and group deletion against hostile or buggy requests: one bad partition is
answered alone (Kafka's ``OffsetMetadataManager``), and names of groups that do not exist leave
nothing behind in the log directory. Raw frames."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.wire_clients import RawClient
from txn_log.errors import GroupIdNotFoundError
from txn_log.group.group_activity import MEMBERS_DIR
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

OFFSET_COMMIT, OFFSET_FETCH, DELETE_GROUPS = 8, 9, 42
OFFSET_METADATA_TOO_LARGE, INVALID_REQUEST, GROUP_ID_NOT_FOUND = 12, 42, 69


def _commit(partitions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [{"name": "orders", "partitions": partitions}],
    }


def _partition(index: int, offset: int, metadata: str = "", epoch: int = -1) -> dict[str, Any]:
    return {
        "partition_index": index,
        "committed_offset": offset,
        "committed_leader_epoch": epoch,
        "committed_metadata": metadata,
    }


def test_one_bad_partition_is_refused_alone_and_the_others_commit(
    log_dir: Path, server: ServeProcess
) -> None:
    """Partition 0's metadata is 5,000 bytes (over offset.metadata.max.bytes, 4,096):
    OFFSET_METADATA_TOO_LARGE for it alone, partition 1's offset committed; a negative offset
    or a leader epoch below -1 is INVALID_REQUEST for its partition alone. Before: the whole
    commit failed (partition 1 answered 12 and not committed; a negative offset made every
    partition UNKNOWN_SERVER_ERROR)."""
    raw = RawClient(server.port)
    try:
        answer = raw.request(
            OFFSET_COMMIT, 8, _commit([_partition(0, 5, "m" * 5000), _partition(1, 7)])
        )
        codes = {p["partition_index"]: p["error_code"] for p in answer["topics"][0]["partitions"]}
        codes |= {
            p["partition_index"]: p["error_code"]
            for t in answer["topics"][1:]
            for p in t["partitions"]
        }
        assert codes == {0: OFFSET_METADATA_TOO_LARGE, 1: 0}, answer
        with Log.open(log_dir) as log:
            committed = log.committed(
                "g", [TopicPartition("orders", 0), TopicPartition("orders", 1)]
            )
        assert committed[TopicPartition("orders", 0)] is None
        assert committed[TopicPartition("orders", 1)].offset == 7
        answer = raw.request(
            OFFSET_COMMIT, 8, _commit([_partition(0, -5), _partition(1, 9, epoch=-7)])
        )
        codes = {
            p["partition_index"]: p["error_code"] for t in answer["topics"] for p in t["partitions"]
        }
        assert codes == {0: INVALID_REQUEST, 1: INVALID_REQUEST}, answer
        answer = raw.request(OFFSET_COMMIT, 8, _commit([_partition(0, -5), _partition(1, 11)]))
        codes = {
            p["partition_index"]: p["error_code"] for t in answer["topics"] for p in t["partitions"]
        }
        assert codes == {0: INVALID_REQUEST, 1: 0}, answer
        with Log.open(log_dir) as log:
            committed = log.committed("g", [TopicPartition("orders", 1)])
        assert committed[TopicPartition("orders", 1)].offset == 11
    finally:
        raw.close()


def test_deleting_groups_that_do_not_exist_makes_no_files(
    log_dir: Path, server: ServeProcess
) -> None:
    """DeleteGroups naming 2,000 groups that do not exist: GROUP_ID_NOT_FOUND for each and no
    file made; a group with offsets is still deleted in the same request. Before: two lock
    files a name, never removed (a request of a million names left two million files)."""
    with Log.open(log_dir) as log:
        log.group_offsets.commit("real", {TopicPartition("orders", 0): 3})
    members_dir = log_dir / MEMBERS_DIR
    before = sorted(p.name for p in members_dir.iterdir()) if members_dir.exists() else []
    names = [f"ghost-{uuid.uuid4()}" for _ in range(2000)]
    raw = RawClient(server.port)
    try:
        answer = raw.request(DELETE_GROUPS, 2, {"groups_names": [*names, "real"]})
    finally:
        raw.close()
    codes = {r["group_id"]: r["error_code"] for r in answer["results"]}
    assert {codes[name] for name in names} == {GROUP_ID_NOT_FOUND}
    assert codes["real"] == 0
    after = sorted(p.name for p in members_dir.iterdir())
    assert len(after) - len(before) <= 2, after  # the real group's own lock files at most
    with Log.open(log_dir) as log:
        assert log.committed("real", [TopicPartition("orders", 0)]) == {
            TopicPartition("orders", 0): None
        }
        with pytest.raises(GroupIdNotFoundError, match="'ghost-x' has no committed offsets"):
            log.group_offsets.delete_group("ghost-x")
        with pytest.raises(GroupIdNotFoundError):
            log.group_offsets.delete_offsets("ghost-y", [TopicPartition("orders", 0)])
    assert sorted(p.name for p in members_dir.iterdir()) == after
