"""Operator parity for groups (issue 26): DeleteGroups (42) through confluent-kafka's
AdminClient against a real ``txnlog serve``, its ACL, and ``txnlog groups reset-offsets`` /
``delete`` run as processes beside the server, refused while a consumer is a member there and
never racing one that joins (``txn_log.group.group_activity``)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient

from tests.support import directory_bytes
from tests.txn_wire.auth_clients import write_acls
from tests.txn_wire.serve_process import TXNLOG, ServeProcess, start_serve
from tests.txn_wire.test_admin_delete_grow import codes
from tests.txn_wire.wire_clients import WAIT_S, RawClient
from txn_log.errors import GroupNotEmptyError
from txn_log.group.group_activity import GroupActivity
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

DELETE_GROUPS, JOIN_GROUP = 42, 11
COORDINATOR_LOAD_IN_PROGRESS, MEMBER_ID_REQUIRED, GROUP_AUTHORIZATION_FAILED = 14, 79, 30
P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def commit(log_dir: Path, group: str, offsets: dict[TopicPartition, int]) -> None:
    with Log.open(log_dir) as log:
        log.group_offsets.commit(group, offsets)


def committed(log_dir: Path, group: str) -> dict[TopicPartition, int]:
    with Log.open(log_dir, read_only=True) as log:
        return {tp: om.offset for tp, om in log.group_offsets.groups().get(group, {}).items()}


def joined_member(server: ServeProcess, group: str, seen: list[Any] | None = None) -> Consumer:
    """A confluent consumer of ``orders`` polled until its group gave it partitions; the
    records those polls returned go to ``seen``."""
    assigned: list[Any] = []
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
        }
    )
    consumer.subscribe(["orders"], on_assign=lambda c, parts: assigned.extend(parts))
    deadline = time.monotonic() + WAIT_S
    while not assigned and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is not None and seen is not None:
            seen.append(message)
    if not assigned:
        raise AssertionError(f"consumer of {group!r} got no assignment")
    return consumer


def reset_live(log_dir: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return txnlog("groups", "reset-offsets", str(log_dir), "--group", "live", *options)


def txnlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TXNLOG, *args], capture_output=True, text=True, timeout=120, check=False)


def test_delete_groups_through_the_adminclient_as_kafka_answers(
    quick_server: ServeProcess, log_dir: Path
) -> None:
    """An idle group's offsets are deleted (tombstones: a fresh process sees none); a group
    with a member is GROUP_NOT_EMPTY and keeps its offsets; an unknown one GROUP_ID_NOT_FOUND;
    once the member leaves, the group can be deleted."""
    commit(log_dir, "idle", {P0: 3, P1: 4})
    commit(log_dir, "live", {P0: 1})
    member = joined_member(quick_server, "live")
    admin = AdminClient({"bootstrap.servers": quick_server.bootstrap})
    try:
        answer = codes(admin.delete_consumer_groups(["idle", "live", "nowhere"]))
        assert answer == {
            "idle": 0,
            "live": KafkaError.NON_EMPTY_GROUP,
            "nowhere": KafkaError.GROUP_ID_NOT_FOUND,
        }
        assert committed(log_dir, "idle") == {}
        assert committed(log_dir, "live") == {P0: 1}
        assert codes(admin.delete_consumer_groups(["idle"])) == {
            "idle": KafkaError.GROUP_ID_NOT_FOUND
        }
    finally:
        member.close()  # LeaveGroup: the group is empty again
    assert codes(admin.delete_consumer_groups(["live"])) == {"live": 0}
    assert committed(log_dir, "live") == {}
    with Log.open(log_dir) as log:  # the tombstones survive a fresh replay of the topic
        assert "live" not in log.group_offsets.groups()


def test_delete_groups_needs_delete_on_the_group(log_dir: Path, tmp_path: Path) -> None:
    commit(log_dir, "kept", {P0: 2})
    commit(log_dir, "g-gone", {P0: 2})
    acls = write_acls(tmp_path / "acls.txt", ["User:ANONYMOUS group g-* Delete allow"])
    served = start_serve(log_dir, "--acl-file", str(acls))
    try:
        before = directory_bytes(log_dir, content_only=True)
        client = RawClient(served.port)
        refused = client.request(DELETE_GROUPS, 2, {"groups_names": ["kept"]})
        assert refused["results"] == [
            {"group_id": "kept", "error_code": GROUP_AUTHORIZATION_FAILED}
        ]
        assert directory_bytes(log_dir, content_only=True) == before  # refused: nothing written
        mixed = client.request(DELETE_GROUPS, 0, {"groups_names": ["kept", "g-gone"]})
        client.close()
    finally:
        served.stop()
    assert sorted((r["group_id"], r["error_code"]) for r in mixed["results"]) == [
        ("g-gone", 0),
        ("kept", GROUP_AUTHORIZATION_FAILED),
    ]
    assert committed(log_dir, "kept") == {P0: 2}
    assert committed(log_dir, "g-gone") == {}


def test_reset_and_delete_refuse_a_group_with_members_in_a_server(
    quick_server: ServeProcess, log_dir: Path
) -> None:
    """The CLI, another process than the server holding the members, refuses in Kafka's
    words and writes nothing; once the consumer has left, the reset commits and a new member
    of the group starts reading at the reset offset."""
    with Log.open(log_dir) as log:
        producer = log.producer()
        for i in range(10):
            producer.send("orders", b"v%d" % i, partition=0)
        producer.flush()
    commit(log_dir, "live", {P0: 2, P1: 0})
    member = joined_member(quick_server, "live")
    try:
        before = directory_bytes(log_dir, content_only=True)
        reset = reset_live(log_dir, "--all-topics", "--to-offset", "7", "--execute")
        assert reset.returncode == 1, reset
        assert (
            "Assignments can only be reset if the group 'live' is inactive, but it has active "
            "members" in reset.stderr
        )
        dry = reset_live(log_dir, "--all-topics", "--to-earliest")
        assert dry.returncode == 1 and "is inactive" in dry.stderr
        deleted = txnlog("groups", "delete", str(log_dir), "--group", "live")
        assert deleted.returncode == 1 and "GroupNotEmptyError" in deleted.stderr
        assert directory_bytes(log_dir, content_only=True) == before
    finally:
        member.close()
    reset = reset_live(log_dir, "--topic", "orders:0", "--to-offset", "7", "--execute")
    assert reset.returncode == 0, reset.stderr
    assert committed(log_dir, "live") == {P0: 7, P1: 0}
    seen: list[Any] = []
    again = joined_member(quick_server, "live", seen)
    try:
        deadline = time.monotonic() + WAIT_S
        while not any(m.partition() == 0 for m in seen) and time.monotonic() < deadline:
            message = again.poll(0.1)
            if message is not None:
                seen.append(message)
        assert not any(m.error() for m in seen)
        assert next(m.offset() for m in seen if m.partition() == 0) == 7
    finally:
        again.close()


def test_a_reset_holding_the_group_makes_a_joining_consumer_wait_and_a_join_refuses_the_reset(
    quick_server: ServeProcess, log_dir: Path
) -> None:
    """Both orders of the race, without timing: while the reset's engine call holds the group
    inactive, a JoinGroup that would add a member is COORDINATOR_LOAD_IN_PROGRESS (retriable:
    the client joins again later) and adds none; once a join has added a member, the reset is
    refused. A first JoinGroup v4+ only hands out a member id (MEMBER_ID_REQUIRED, KIP-394): a
    pending id is no member (Kafka's), so it needs no hold; the join made with it does."""
    activity = GroupActivity(log_dir)
    join = {
        "group_id": "raced",
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    client = RawClient(quick_server.port)
    with activity.inactive("raced"):
        offered = client.request(JOIN_GROUP, 5, join)
        assert offered["error_code"] == MEMBER_ID_REQUIRED
        join["member_id"] = offered["member_id"]
        assert client.request(JOIN_GROUP, 5, join)["error_code"] == COORDINATOR_LOAD_IN_PROGRESS
    described = client.request(15, 4, {"groups": ["raced"]})["groups"][0]
    assert described["members"] == []
    assert client.request(JOIN_GROUP, 5, join)["error_code"] == 0  # now a member
    with (
        pytest.raises(GroupNotEmptyError, match="'raced' has active members"),
        activity.inactive("raced"),
    ):
        pass
    with Log.open(log_dir) as log, pytest.raises(GroupNotEmptyError):
        log.group_offsets.reset_offsets("raced", lambda current: {P0: 0})
    client.close()
    assert committed(log_dir, "raced") == {}
