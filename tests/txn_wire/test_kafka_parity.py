"""Answers where the first run of librdkafka's test suite against ``txnlog serve`` found the
server differing from Kafka's broker (issue 25), checked against a real server.

Each test names the librdkafka test number that found it and the Kafka code it follows.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient

from tests.txn_wire.serve_process import start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log import OffsetAndMetadata
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

METADATA, OFFSET_COMMIT = 3, 8
INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION = 17, 3


@pytest.mark.parametrize("auto_create", [False, True])
def test_metadata_answers_an_illegal_topic_name_invalid_topic_not_unknown(
    tmp_path: Path, auto_create: bool
) -> None:
    """librdkafka 0057: Kafka's ``getTopicMetadata`` (and its auto-creation path) answers a
    name that ``Topic.validate`` refuses with INVALID_TOPIC_EXCEPTION (17), so the client fails
    the topic's messages at once; UNKNOWN_TOPIC_OR_PARTITION (3) makes it wait for a topic
    that can never appear. A legal unknown name is still 3 (auto-creation off)."""
    flags = ["--auto-create-topics"] if auto_create else []
    served = start_serve(tmp_path / "log", *flags)
    try:
        raw = RawClient(served.port)
        names = ["bad name!", "", "x" * 250, "..", "fine-but-unknown"]
        answer = raw.request(
            METADATA,
            12,
            {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": auto_create},
        )
        raw.close()
        codes = {topic["name"]: topic["error_code"] for topic in answer["topics"]}
        assert codes == {
            "bad name!": INVALID_TOPIC_EXCEPTION,
            "": INVALID_TOPIC_EXCEPTION,
            "x" * 250: INVALID_TOPIC_EXCEPTION,
            "..": INVALID_TOPIC_EXCEPTION,
            "fine-but-unknown": 0 if auto_create else UNKNOWN_TOPIC_OR_PARTITION,
        }
    finally:
        served.stop()


def test_a_producer_fails_an_illegal_topics_messages_at_once(tmp_path: Path) -> None:
    """librdkafka 0057: the message to an illegal topic is failed with TOPIC_EXCEPTION well
    before ``message.timeout.ms`` (30 s here), not left waiting for the topic to appear."""
    served = start_serve(tmp_path / "log")
    try:
        producer = Producer({"bootstrap.servers": served.bootstrap, "message.timeout.ms": 30_000})
        errors: list[KafkaError] = []
        producer.produce("bad topic!", b"v", on_delivery=lambda e, _m: errors.append(e))
        started = time.monotonic()
        producer.flush(40)
        waited = time.monotonic() - started
        assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION], errors
        assert waited < 20, f"the message waited {waited:.1f} s for an illegal topic"
    finally:
        served.stop()


@pytest.mark.parametrize("one_per_batch", [False, True])
def test_keyless_records_of_a_compacted_topic_fail_alone_with_record_errors(
    tmp_path: Path, one_per_batch: bool
) -> None:
    """librdkafka 0011 (test_message_single_partition_record_fail): Kafka answers a batch with
    keyless records for a compacted topic INVALID_RECORD with the index of each keyless record
    (Produce v8 ``record_errors``), so the client fails those records with INVALID_RECORD and
    the others sent with them with _INVALID_DIFFERENT_RECORD; one record a batch, only the
    keyless ones fail. Nothing of a refused batch is written."""
    with Log.open(tmp_path / "log") as log:
        log.create_topic("table", 1, config={"cleanup.policy": "compact"})
    served = start_serve(tmp_path / "log")
    try:
        settings: dict[str, Any] = {"bootstrap.servers": served.bootstrap, "linger.ms": 200}
        if one_per_batch:
            settings["batch.size"] = 1
        producer = Producer(settings)
        outcomes: dict[int, int] = {}
        for i in range(20):
            producer.produce(
                "table", f"v{i}".encode(), key=None if i % 10 == 0 else f"k{i}".encode(),
                partition=0,
                on_delivery=lambda e, _m, i=i: outcomes.__setitem__(i, e.code() if e else 0),
            )  # fmt: skip
        assert producer.flush(30) == 0
        keyless = {i: code for i, code in outcomes.items() if i % 10 == 0}
        keyed = {i: code for i, code in outcomes.items() if i % 10 != 0}
        assert set(keyless.values()) == {KafkaError.INVALID_RECORD}, outcomes
        if one_per_batch:
            assert set(keyed.values()) == {0}, outcomes
        else:
            assert set(keyed.values()) == {KafkaError._INVALID_DIFFERENT_RECORD}, outcomes
    finally:
        served.stop()
    with Log.open(tmp_path / "log", read_only=True) as log:
        stored = log.consumer("read_uncommitted").read(TopicPartition("table", 0), 0, 100)
        assert all(record.key is not None for record in stored)
        assert len(stored) == (18 if one_per_batch else 0)


def test_offset_commit_for_a_topic_or_partition_that_does_not_exist_is_unknown(
    tmp_path: Path,
) -> None:
    """librdkafka 0030: Kafka's ``handleOffsetCommitRequest`` answers each partition its
    metadata does not hold UNKNOWN_TOPIC_OR_PARTITION (3) and commits the others; before, the
    server answered 0 and stored offsets for partitions that do not exist. The same through
    AdminClient's ``alter_consumer_group_offsets`` (an OffsetCommit too)."""
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("orders", 2)
    served = start_serve(log_dir)
    try:
        raw = RawClient(served.port)
        answer = raw.request(
            OFFSET_COMMIT,
            8,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {"name": "orders", "partitions": [_commit(0, 5), _commit(2, 7)]},
                    {"name": "missing", "partitions": [_commit(0, 9)]},
                ],
            },
        )
        raw.close()
        codes = {
            (t["name"], p["partition_index"]): p["error_code"]
            for t in answer["topics"]
            for p in t["partitions"]
        }
        assert codes == {
            ("orders", 0): 0,
            ("orders", 2): UNKNOWN_TOPIC_OR_PARTITION,
            ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION,
        }
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        altered = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("h", [KafkaPartition("missing", 0, 3)])]
        )
        try:
            partitions = altered["h"].result(timeout=30).topic_partitions
            errors = [p.error.code() if p.error else 0 for p in partitions]
        except KafkaException as failed:  # librdkafka versions differ in how they report it
            errors = [failed.args[0].code()]
        assert errors == [KafkaError._UNKNOWN_PARTITION] or errors == [
            KafkaError.UNKNOWN_TOPIC_OR_PART
        ], errors
    finally:
        served.stop()
    with Log.open(log_dir) as log:
        groups = log.group_offsets.groups()
    assert {tp: om.offset for tp, om in groups["g"].items()} == {TopicPartition("orders", 0): 5}
    assert "h" not in groups


def _commit(partition: int, offset: int) -> dict[str, object]:
    return {
        "partition_index": partition,
        "committed_offset": offset,
        "committed_leader_epoch": -1,
        "committed_metadata": "",
    }


def test_list_offsets_max_timestamp_is_the_newest_records_offset_KIP734(tmp_path: Path) -> None:
    """librdkafka 0081 (ListOffsets): -3 (``OffsetSpec.max_timestamp``, KIP-734, ListOffsets
    v7) answers the offset of the record with the largest timestamp and that timestamp, not a
    lookup of the literal timestamp -3 (which answered the log start). Records written at t,
    t+5 s, t+2 s answer offset 1; an empty partition answers -1, as Kafka does."""
    from confluent_kafka.admin import OffsetSpec

    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("times", 2)
    served = start_serve(log_dir)
    try:
        producer = Producer({"bootstrap.servers": served.bootstrap})
        t = 1_700_000_000_000
        for stamp in (t, t + 5_000, t + 2_000):
            producer.produce("times", b"v", partition=0, timestamp=stamp)
        assert producer.flush(30) == 0
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        asked = {KafkaPartition("times", p): OffsetSpec.max_timestamp() for p in (0, 1)}
        answers = {
            tp.partition: (info.offset, info.timestamp)
            for tp, future in admin.list_offsets(asked).items()
            for info in [future.result(timeout=30)]
        }
    finally:
        served.stop()
    assert answers == {0: (1, t + 5_000), 1: (-1, -1)}


def test_a_group_holding_offsets_without_members_is_listed_and_described_empty(
    tmp_path: Path,
) -> None:
    """librdkafka 0081 (ListConsumerGroups): Kafka lists every group its coordinator holds,
    an Empty one with committed offsets and no member included, and describes it Empty, not
    Dead. Before, ListGroups left such a group out and DescribeGroups called it Dead."""
    from confluent_kafka import ConsumerGroupState

    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("orders", 1)
        log.group_offsets.commit("batch-job", {TopicPartition("orders", 0): OffsetAndMetadata(42)})
    served = start_serve(log_dir)
    try:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        listed = admin.list_consumer_groups().result(timeout=30)
        described = admin.describe_consumer_groups(["batch-job", "never-seen"])
        states = {g: f.result(timeout=30).state for g, f in described.items()}
    finally:
        served.stop()
    assert [g.group_id for g in listed.valid] == ["batch-job"]
    assert states == {"batch-job": ConsumerGroupState.EMPTY, "never-seen": ConsumerGroupState.DEAD}


def test_list_groups_reports_state_and_type_and_filters_by_them_KIP518_KIP848(
    tmp_path: Path,
) -> None:
    """librdkafka 0081 (ListConsumerGroups with match_states / match_types): ListGroups v4+
    gives each group's state and keeps the states asked for; v5+ gives its type (classic: the
    one protocol served) and keeps the types asked for."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("orders", 1)
        log.group_offsets.commit("idle", {TopicPartition("orders", 0): OffsetAndMetadata(1)})
    served = start_serve(log_dir)
    try:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})

        def listed(**filters: Any) -> list[tuple[str, Any, Any]]:
            found = admin.list_consumer_groups(**filters).result(timeout=30)
            assert not found.errors, found.errors
            return [(g.group_id, g.state, g.type) for g in found.valid]

        everything = listed()
        empty_only = listed(states={ConsumerGroupState.EMPTY})
        stable_only = listed(states={ConsumerGroupState.STABLE})
        classic = listed(types={ConsumerGroupType.CLASSIC})
        consumer = listed(types={ConsumerGroupType.CONSUMER})
    finally:
        served.stop()
    idle = ("idle", ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC)
    assert everything == empty_only == classic == [idle]
    assert stable_only == [] and consumer == []


@pytest.mark.parametrize("delay_ms", [3000, 0])
def test_a_new_groups_first_generation_waits_the_initial_rebalance_delay(
    tmp_path: Path, delay_ms: int
) -> None:
    """librdkafka 0089: a second member joining a new group a moment after the first must not
    take partitions from it. Kafka holds an empty group's first join round open for
    group.initial.rebalance.delay.ms (3 s by default; ``InitialDelayedJoin``), so both form
    the first generation together: each is assigned once, nobody is revoked. With the delay
    at 0 (``--group-initial-rebalance-delay-ms 0``, the old behaviour) the first member gets
    every partition and gives half back."""
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("work", 4)
    served = start_serve(log_dir, "--group-initial-rebalance-delay-ms", str(delay_ms))
    events: dict[str, list[tuple[str, int]]] = {"a": [], "b": []}

    def member(name: str) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": served.bootstrap,
                "group.id": "starting-app",
                "session.timeout.ms": 10_000,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(
            ["work"],
            on_assign=lambda _c, parts: events[name].append(("assign", len(parts))),
            on_revoke=lambda _c, parts: events[name].append(("revoke", len(parts))),
        )
        return consumer

    try:
        first = member("a")
        first.poll(0.5)
        second = member("b")
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            first.poll(0.1)
            second.poll(0.1)
            if sum(n for kind, n in events["a"] + events["b"] if kind == "assign") >= 4 and (
                time.monotonic() > deadline - 4
            ):
                break
        seen = {name: list(happened) for name, happened in events.items()}  # close revokes
        first.close()
        second.close()
    finally:
        served.stop()
    if delay_ms:
        assert seen == {"a": [("assign", 2)], "b": [("assign", 2)]}
    else:
        assert ("revoke", 4) in seen["a"], seen


def _static_member(bootstrap: str, instance: str, events: list[tuple[str, int]]) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "static-app",
            "group.instance.id": instance,
            "session.timeout.ms": 30_000,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(
        ["work"],
        on_assign=lambda _c, parts: events.append(("assign", len(parts))),
        on_revoke=lambda _c, parts: events.append(("revoke", len(parts))),
    )
    return consumer


def _poll_until(consumers: list[Any], done: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not done():
        for consumer in consumers:
            consumer.poll(0.1)


def test_a_restarting_static_member_takes_its_place_without_a_rebalance_KIP345(
    tmp_path: Path,
) -> None:
    """librdkafka 0102: a static member (``group.instance.id``) that restarts within its
    session timeout gets its old assignment back, and the other member keeps its partitions
    throughout: no rebalance (KIP-345). Before, the server ignored the instance id: the
    restarted member joined as a new one and the other member was revoked."""
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("work", 4)
    served = start_serve(log_dir, "--group-initial-rebalance-delay-ms", "0")
    a_events: list[tuple[str, int]] = []
    b_events: list[tuple[str, int]] = []
    try:
        a = _static_member(served.bootstrap, "instance-a", a_events)
        b = _static_member(served.bootstrap, "instance-b", b_events)
        _poll_until([a, b], lambda: a_events[-1:] == [("assign", 2)] == b_events[-1:], 30)
        assert a_events[-1:] == [("assign", 2)] == b_events[-1:], (a_events, b_events)
        a_settled = len(a_events)
        b.close()  # a static member sends no LeaveGroup: its place waits for it
        restarted: list[tuple[str, int]] = []
        b = _static_member(served.bootstrap, "instance-b", restarted)
        _poll_until([a, b], lambda: False, 8)
        seen_by_a = a_events[a_settled:]
        seen_by_b = list(restarted)  # close revokes
        a.close()
        b.close()
    finally:
        served.stop()
    assert seen_by_a == []  # never revoked, never re-assigned
    assert seen_by_b == [("assign", 2)]


def test_a_zombie_static_member_is_fenced_KIP345(tmp_path: Path) -> None:
    """Calls naming a static member's instance id with the member id it held before a
    restart are FENCED_INSTANCE_ID (82): JoinGroup, Heartbeat, SyncGroup, OffsetCommit and
    LeaveGroup; the new member is untouched."""
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("work", 1)
    served = start_serve(log_dir, "--group-initial-rebalance-delay-ms", "0")
    try:
        raw = RawClient(served.port)

        def join(member_id: str) -> dict[str, Any]:
            return raw.request(
                11,
                5,
                {
                    "group_id": "g",
                    "session_timeout": 30_000,
                    "rebalance_timeout": 30_000,
                    "member_id": member_id,
                    "group_instance_id": "i1",
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}],
                },
            )

        first = join("")
        assert first["error_code"] == 0
        old_id, generation = first["member_id"], first["generation_id"]
        sync = {
            "group_id": "g",
            "generation_id": generation,
            "member_id": old_id,
            "group_instance_id": "i1",
            "assignments": [{"member_id": old_id, "assignment": b"A"}],
        }
        synced = raw.request(14, 3, sync)
        assert (synced["error_code"], synced["assignment"]) == (0, b"A")
        second = join("")  # the same instance restarts
        assert second["error_code"] == 0 and second["member_id"] != old_id
        assert second["generation_id"] == generation  # stable: no new generation
        beat = {"group_id": "g", "generation_id": generation, "group_instance_id": "i1"}
        codes = {
            "join": join(old_id)["error_code"],
            "heartbeat": raw.request(12, 3, {**beat, "member_id": old_id})["error_code"],
            "sync": raw.request(14, 3, sync)["error_code"],
            "commit": raw.request(
                8,
                7,
                {
                    "group_id": "g",
                    "generation_id_or_member_epoch": generation,
                    "member_id": old_id,
                    "group_instance_id": "i1",
                    "topics": [{"name": "work", "partitions": [_commit(0, 1)]}],
                },
            )["topics"][0]["partitions"][0]["error_code"],
            "leave": raw.request(
                13,
                3,
                {"group_id": "g", "members": [{"member_id": old_id, "group_instance_id": "i1"}]},
            )["members"][0]["error_code"],
            "new member's heartbeat": raw.request(
                12, 3, {**beat, "member_id": second["member_id"]}
            )["error_code"],
        }
        new_sync = {**sync, "member_id": second["member_id"], "assignments": []}
        kept = raw.request(14, 3, new_sync)
        raw.close()
    finally:
        served.stop()
    assert codes == {
        "join": 82,
        "heartbeat": 82,
        "sync": 82,
        "commit": 82,
        "leave": 82,
        "new member's heartbeat": 0,
    }
    assert kept["assignment"] == b"A"  # the restarted member's assignment is the old one's
