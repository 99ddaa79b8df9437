"""OffsetDelete (47) against a real ``txnlog serve``: kafka-python's
``KafkaAdminClient.delete_group_offsets`` (confluent-kafka's Python AdminClient does not offer
librdkafka's DeleteConsumerGroupOffsets; librdkafka's own test 0081 drives it through the
suite runner) and, for what no client sends, the raw client. Kafka's answers: an empty group's
offsets are deleted, an active consumer member keeps the offsets of the topics it subscribes
to (GROUP_SUBSCRIBED_TO_TOPIC), an unknown group is GROUP_ID_NOT_FOUND, a group with members in
another server of the log or of another protocol type NON_EMPTY_GROUP; the ACL rule (Delete on
the group, Read on each topic); and a race of real processes committing and deleting offsets
of different partitions, in which nothing but the offsets asked for disappear."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition as KafkaPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import GroupAuthorizationFailedError, GroupIdNotFoundError, NoError

from tests.support import directory_bytes
from tests.txn_wire.auth_clients import write_acls
from tests.txn_wire.serve_process import TXNLOG, ServeProcess, start_serve
from tests.txn_wire.test_consumer_protocol import encode_subscription
from tests.txn_wire.test_group_admin_wire import commit, committed, joined_member
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

OFFSET_DELETE, JOIN_GROUP, API_VERSIONS = 47, 11, 18
UNKNOWN_TOPIC_OR_PARTITION, INVALID_GROUP_ID, TOPIC_DENIED, GROUP_DENIED = 3, 24, 29, 30
MEMBER_ID_REQUIRED, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED = 79, 68, 69, 86
P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
OTHER = TopicPartition("other", 0)


@pytest.fixture
def log_dir(log_dir: Path) -> Path:
    """The wire tests' log, with topic ``other`` beside ``orders``."""
    with Log.open(log_dir) as log:
        log.create_topic("other", 1)
    return log_dir


def kafka_admin(server: ServeProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)


def delete_offsets(
    admin: KafkaAdminClient, group: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, Any]:
    """kafka-python's answer per partition, in the engine's TopicPartition."""
    answer = admin.delete_group_offsets(
        group, [KafkaPartition(tp.topic, tp.partition) for tp in partitions]
    )
    return {TopicPartition(tp.topic, tp.partition): error for tp, error in answer.items()}


def raw_delete(port: int, group: str, topics: dict[str, list[int]]) -> dict[str, Any]:
    raw = RawClient(port)
    try:
        body = {
            "group_id": group,
            "topics": [
                {"name": name, "partitions": [{"partition_index": p} for p in partitions]}
                for name, partitions in topics.items()
            ],
        }
        return raw.request(OFFSET_DELETE, 0, body)
    finally:
        raw.close()


def partition_codes(answer: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in answer["topics"]
        for p in t["partitions"]
    }


def raw_join(port: int, group: str, protocol_type: str, metadata: bytes) -> RawClient:
    """A raw member of ``group`` whose join round completed (its metadata is what the group
    coordinator reads its subscription from); the connection stays open."""
    raw = RawClient(port)
    join = {
        "group_id": group,
        "session_timeout": 30_000,
        "rebalance_timeout": 30_000,
        "member_id": "",
        "protocol_type": protocol_type,
        "protocols": [{"name": "range", "metadata": metadata}],
    }
    first = raw.request(JOIN_GROUP, 5, join)
    if first["error_code"] != MEMBER_ID_REQUIRED:
        raise AssertionError(f"JoinGroup answered {first}")
    second = raw.request(JOIN_GROUP, 5, {**join, "member_id": first["member_id"]})
    if second["error_code"] != 0:
        raise AssertionError(f"JoinGroup answered {second}")
    return raw


# --- an empty group, unknown groups, topics and partitions -----------------------------------


def test_an_empty_groups_offsets_are_deleted_and_the_others_kept(
    quick_server: ServeProcess, log_dir: Path
) -> None:
    """Only the partitions named lose their offsets, durably (a fresh process sees the
    tombstones); a partition without an offset is NONE too, as Kafka answers it."""
    commit(log_dir, "idle", {P0: 3, P1: 4, OTHER: 5})
    admin = kafka_admin(quick_server)
    try:
        assert delete_offsets(admin, "idle", [P1, OTHER]) == {P1: NoError, OTHER: NoError}
        assert committed(log_dir, "idle") == {P0: 3}
        assert delete_offsets(admin, "idle", [P1]) == {P1: NoError}  # nothing left there
        with pytest.raises(GroupIdNotFoundError):
            delete_offsets(admin, "nowhere", [P0])
    finally:
        admin.close()
    with Log.open(log_dir) as log:  # the tombstones survive a fresh replay of the topic
        assert {tp: om.offset for tp, om in log.group_offsets.groups()["idle"].items()} == {P0: 3}


def test_unknown_topics_and_partitions_and_an_empty_group_id_as_kafka_answers(
    quick_server: ServeProcess, log_dir: Path
) -> None:
    commit(log_dir, "idle", {P0: 3, P1: 4})
    answer = raw_delete(quick_server.port, "idle", {"orders": [1, 7], "ghost": [0]})
    assert answer["error_code"] == 0
    assert partition_codes(answer) == {
        ("orders", 1): 0,
        ("orders", 7): UNKNOWN_TOPIC_OR_PARTITION,
        ("ghost", 0): UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert committed(log_dir, "idle") == {P0: 3}
    before = directory_bytes(log_dir, content_only=True)
    empty = raw_delete(quick_server.port, "", {"orders": [0]})
    assert (empty["error_code"], empty["topics"]) == (INVALID_GROUP_ID, [])
    unknown = raw_delete(quick_server.port, "nowhere", {"ghost": [0]})
    assert (unknown["error_code"], unknown["topics"]) == (GROUP_ID_NOT_FOUND, [])
    assert directory_bytes(log_dir, content_only=True) == before
    raw = RawClient(quick_server.port)
    hello = {"client_software_name": "t", "client_software_version": "1"}
    listed = raw.request(API_VERSIONS, 3, hello)["api_keys"]
    raw.close()
    assert {(a["min_version"], a["max_version"]) for a in listed if a["api_key"] == 47} == {(0, 0)}


# --- a group with members ---------------------------------------------------------------------


def test_a_subscribed_member_keeps_its_topics_offsets_and_the_others_go(
    quick_server: ServeProcess, log_dir: Path
) -> None:
    """A confluent consumer subscribed to ``orders``: its partitions are
    GROUP_SUBSCRIBED_TO_TOPIC and keep their offsets, ``other``'s are deleted; once the member
    has left, ``orders``' go too."""
    commit(log_dir, "live", {P0: 1, P1: 2, OTHER: 3})
    member = joined_member(quick_server, "live")
    admin = kafka_admin(quick_server)
    try:
        answer = delete_offsets(admin, "live", [P0, P1, OTHER])
        assert {tp: error.errno for tp, error in answer.items()} == {
            P0: GROUP_SUBSCRIBED,
            P1: GROUP_SUBSCRIBED,
            OTHER: 0,
        }
        assert committed(log_dir, "live") == {P0: 1, P1: 2}
        member.close()  # LeaveGroup: the group is empty again
        assert delete_offsets(admin, "live", [P0, P1]) == {P0: NoError, P1: NoError}
        assert committed(log_dir, "live") == {}
    finally:
        admin.close()


def test_subscriptions_are_read_from_every_consumer_protocol_version_and_garbage_keeps_all(
    quick_server: ServeProcess, log_dir: Path
) -> None:
    """A member's ConsumerProtocolSubscription of any version is read by its version-0 prefix;
    metadata that is no subscription makes the group's subscriptions unknown, which Kafka
    counts as every topic: nothing is deleted on a guess. A group of another protocol type
    with members is NON_EMPTY_GROUP."""
    for version in range(4):
        group = f"v{version}"
        commit(log_dir, group, {P0: 1, OTHER: 2})
        member = raw_join(
            quick_server.port, group, "consumer", encode_subscription(["other"], version)
        )
        try:
            answer = raw_delete(quick_server.port, group, {"orders": [0], "other": [0]})
            assert partition_codes(answer) == {("orders", 0): 0, ("other", 0): GROUP_SUBSCRIBED}
            assert committed(log_dir, group) == {OTHER: 2}
        finally:
            member.close()
    garbage = [
        b"",
        b"\x00",
        b"\x00\x00\x7f\xff\xff\xff",
        b"\x00\x00\x00\x00\x00\x01\xff",
        b"\x00" * 6,
    ]
    for index, metadata in enumerate(garbage):
        group = f"garbled-{index}"
        commit(log_dir, group, {P0: 1})
        member = raw_join(quick_server.port, group, "consumer", metadata)
        try:
            answer = raw_delete(quick_server.port, group, {"orders": [0]})
            assert partition_codes(answer) == {("orders", 0): GROUP_SUBSCRIBED}, metadata
            assert committed(log_dir, group) == {P0: 1}
        finally:
            member.close()
    commit(log_dir, "connect", {P0: 1})
    worker = raw_join(quick_server.port, "connect", "connect", b"whatever")
    try:
        before = directory_bytes(log_dir, content_only=True)
        answer = raw_delete(quick_server.port, "connect", {"orders": [0]})
        assert (answer["error_code"], answer["topics"]) == (NON_EMPTY_GROUP, [])
        assert directory_bytes(log_dir, content_only=True) == before
    finally:
        worker.close()


def test_members_in_another_server_of_the_log_make_the_group_non_empty(
    quick_server: ServeProcess, log_dir: Path
) -> None:
    """A second ``txnlog serve`` over the same directory cannot see the members of the first,
    only that it has some (``group_activity``): NON_EMPTY_GROUP, and so does the CLI."""
    commit(log_dir, "live", {P0: 1, OTHER: 3})
    member = joined_member(quick_server, "live")
    second = start_serve(log_dir)
    try:
        before = directory_bytes(log_dir, content_only=True)
        answer = raw_delete(second.port, "live", {"other": [0]})
        assert (answer["error_code"], answer["topics"]) == (NON_EMPTY_GROUP, [])
        cli = txnlog(
            "groups", "delete-offsets", str(log_dir), "--group", "live", "--topic", "other"
        )
        assert cli.returncode == 1 and "GroupNotEmptyError" in cli.stderr, cli
        assert directory_bytes(log_dir, content_only=True) == before
    finally:
        second.stop()
        member.close()


# --- ACLs ---------------------------------------------------------------------------------------


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(
    log_dir: Path, tmp_path: Path
) -> None:
    commit(log_dir, "g-open", {P0: 1, OTHER: 2})
    commit(log_dir, "kept", {P0: 1})
    acls = write_acls(
        tmp_path / "acls.txt",
        ["User:ANONYMOUS group g-* Delete allow", "User:ANONYMOUS topic orders Read allow"],
    )
    served = start_serve(log_dir, "--acl-file", str(acls))
    try:
        before = directory_bytes(log_dir, content_only=True)
        refused = raw_delete(served.port, "kept", {"orders": [0]})
        assert (refused["error_code"], refused["topics"]) == (GROUP_DENIED, [])
        assert directory_bytes(log_dir, content_only=True) == before  # nothing written
        admin = kafka_admin(served)
        try:
            with pytest.raises(GroupAuthorizationFailedError):
                delete_offsets(admin, "kept", [P0])
        finally:
            admin.close()
        mixed = raw_delete(served.port, "g-open", {"orders": [0], "other": [0]})
        assert mixed["error_code"] == 0
        assert partition_codes(mixed) == {("orders", 0): 0, ("other", 0): TOPIC_DENIED}
        # a group error wins over the topic refusals, as Kafka's error response has no topics
        unknown = raw_delete(served.port, "g-nowhere", {"other": [0]})
        assert (unknown["error_code"], unknown["topics"]) == (GROUP_ID_NOT_FOUND, [])
    finally:
        served.stop()
    assert committed(log_dir, "g-open") == {OTHER: 2}
    assert committed(log_dir, "kept") == {P0: 1}


# --- a race of real processes -------------------------------------------------------------------


def txnlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TXNLOG, *args], capture_output=True, text=True, timeout=120, check=False)


def worker(role: str, server: ServeProcess, rounds: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.txn_wire.offset_delete_workers",
            role,
            server.bootstrap,
            "raced",
            str(rounds),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_deleting_one_partitions_offsets_never_loses_a_commit_racing_it(
    quick_server: ServeProcess, log_dir: Path
) -> None:
    """A consumer process commits ``orders-0`` over and over, checking after each commit that
    the group holds exactly it, while another process commits and deletes ``orders-1`` over
    and over through the server and the CLI deletes ``orders-1`` directly on the log: every
    check holds, ``orders-0`` ends at the last commit, ``orders-1`` has no offset and
    ``other-0``, which nobody touched, keeps its own."""
    rounds = 40
    commit(log_dir, "raced", {OTHER: 9})
    committer = worker("commit", quick_server, rounds)
    deleter = worker("delete", quick_server, rounds)
    cli_runs = [
        txnlog("groups", "delete-offsets", str(log_dir), "--group", "raced", "--topic", "orders:1")
        for _ in range(3)
    ]
    reports = []
    for process in (committer, deleter):
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        reports.append(json.loads(out.splitlines()[-1]))
    assert reports[0] == {"role": "commit", "rounds": rounds, "mismatches": []}
    assert reports[1] == {"role": "delete", "rounds": rounds, "errors": []}
    assert all(run.returncode == 0 for run in cli_runs), [run.stderr for run in cli_runs]
    assert committed(log_dir, "raced") == {P0: rounds, OTHER: 9}
