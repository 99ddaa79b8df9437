"""The classic consumer group protocol over the wire: confluent-kafka consumers using
``subscribe()`` share a topic's partitions, rebalance when a member joins or leaves, and
commit their offsets to the engine's group store, read_committed throughout."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException

from tests.txn_wire.conftest import serving
from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.wire_clients import WAIT_S, confluent_producer, produce_all
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def member(server: ServeProcess, assigned: list[Any]) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "readers",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "partition.assignment.strategy": "range",
        }
    )
    consumer.subscribe(
        ["orders"], on_assign=lambda c, parts: assigned.append(sorted(p.partition for p in parts))
    )
    return consumer


REBALANCING = {
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
}


def poll_until(consumers: list[Consumer], seen: list[tuple[int, int, bytes]], done: Any) -> None:
    """Poll every member, committing each record; a commit refused because the group is
    rebalancing is what Kafka answers too (the record may come again: at least once)."""
    deadline = time.monotonic() + WAIT_S
    while not done() and time.monotonic() < deadline:
        for consumer in consumers:
            message = consumer.poll(0.05)
            if message is None:
                continue
            if message.error():
                raise AssertionError(f"consumer error: {message.error()}")
            seen.append((message.partition(), message.offset(), message.value()))
            try:
                consumer.commit(message=message, asynchronous=False)
            except KafkaException as error:
                if error.args[0].code() not in REBALANCING:
                    raise
    if not done():
        raise AssertionError(f"gave up waiting; seen {len(seen)} records")


def test_two_members_share_partitions_and_rebalance_on_join_and_leave(
    server: ServeProcess,
) -> None:
    sends = [("orders", i % 2, f"g-{i}".encode()) for i in range(40)]
    produce_all(confluent_producer(server.bootstrap), sends)
    first_assigned: list[list[int]] = []
    second_assigned: list[list[int]] = []
    first = member(server, first_assigned)
    seen: list[tuple[int, int, bytes]] = []
    poll_until([first], seen, lambda: len(seen) >= 10)  # alone: it owns both partitions
    assert first_assigned[0] == [0, 1]

    second = member(server, second_assigned)  # joins: a rebalance splits the partitions
    poll_until(
        [first, second],
        seen,
        lambda: bool(second_assigned and second_assigned[-1]) and len(first_assigned) >= 2,
    )
    assert sorted(first_assigned[-1] + second_assigned[-1]) == [0, 1]
    assert set(first_assigned[-1]).isdisjoint(second_assigned[-1])

    second.close()  # leaves: the first member takes both partitions again
    poll_until([first], seen, lambda: len(first_assigned) >= 3 and len(set(seen)) >= 40)
    assert first_assigned[-1] == [0, 1]
    first.close()

    values = {v for _, _, v in seen}
    assert values == {v for _, _, v in sends}
    for partition in (0, 1):  # each record is the one at its offset
        expected = [v for _, p, v in sends if p == partition]
        assert all(expected[o] == v for p, o, v in seen if p == partition)
    with Log.open(server.path) as log:
        committed = log.committed("readers", log.partitions("orders"))
    assert {tp.partition: om.offset for tp, om in committed.items() if om} == {0: 20, 1: 20}
    assert TopicPartition("orders", 0) in committed


KILLED_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "readers",
              "session.timeout.ms": 2000, "heartbeat.interval.ms": 200,
              "partition.assignment.strategy": "range", "enable.auto.commit": False})
c.subscribe(["orders"], on_assign=lambda c, p: print("assigned", len(p), flush=True))
while True:
    c.poll(0.1)
"""


@pytest.fixture
def quick_sessions(log_dir: Path) -> Iterator[ServeProcess]:
    """A server that lets members ask for 2 s sessions (Kafka's floor is 6 s)."""
    yield from serving(log_dir, "--group-min-session-timeout-ms", "1000")


def test_a_killed_member_times_out_and_its_partitions_move(quick_sessions: ServeProcess) -> None:
    import signal
    import subprocess
    import sys

    server = quick_sessions

    survivor_assigned: list[list[int]] = []
    survivor = member(server, survivor_assigned)
    seen: list[tuple[int, int, bytes]] = []
    poll_until([survivor], seen, lambda: bool(survivor_assigned))
    doomed = subprocess.Popen(
        [sys.executable, "-c", KILLED_MEMBER, server.bootstrap], stdout=subprocess.PIPE, text=True
    )
    doomed_lines: list[str] = []
    reader = threading.Thread(target=lambda: doomed_lines.extend(doomed.stdout or []), daemon=True)
    reader.start()
    try:  # the survivor keeps polling (it must rejoin) until the two share the partitions
        poll_until(
            [survivor],
            seen,
            lambda: "assigned 1\n" in doomed_lines and len(survivor_assigned[-1]) == 1,
        )
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(30)
    # no LeaveGroup: the member's session (2 s) expires, the survivor gets both partitions
    poll_until([survivor], seen, lambda: survivor_assigned[-1] == [0, 1])
    survivor.close()


def test_group_errors_are_kafkas(server: ServeProcess) -> None:
    from tests.txn_wire.wire_clients import RawClient

    raw = RawClient(server.port)
    join = {
        "group_id": "g",
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"m"}],
    }
    first = raw.request(11, 5, join)
    assert first["error_code"] == 79  # MEMBER_ID_REQUIRED (KIP-394), with the id to use
    member_id = first["member_id"]
    joined = raw.request(11, 5, {**join, "member_id": member_id})
    assert (joined["error_code"], joined["leader"], joined["generation_id"]) == (0, member_id, 1)
    assert [m["member_id"] for m in joined["members"]] == [member_id]
    heartbeat = {"group_id": "g", "generation_id": 1, "member_id": member_id}
    assert raw.request(12, 3, {**heartbeat, "member_id": "stranger"})["error_code"] == 25
    sync = {**heartbeat, "assignments": [{"member_id": member_id, "assignment": b"a"}]}
    assert raw.request(14, 3, {**sync, "generation_id": 7})["error_code"] == 22
    assert raw.request(14, 3, sync) == {"throttle_time": 0, "error_code": 0, "assignment": b"a"}
    assert raw.request(12, 3, heartbeat)["error_code"] == 0
    described = raw.request(15, 4, {"groups": ["g"]})["groups"][0]
    assert (described["group_state"], described["protocol_data"]) == ("Stable", "range")
    assert raw.request(16, 3, {})["groups"] == [{"group_id": "g", "protocol_type": "consumer"}]
    # a session timeout outside group.min/max.session.timeout.ms (6 s .. 30 min)
    for timeout in (1, 5_999, 1_800_001):
        refused = raw.request(11, 5, {**join, "member_id": member_id, "session_timeout": timeout})
        assert refused["error_code"] == 26  # INVALID_SESSION_TIMEOUT
    assert raw.request(12, 3, heartbeat)["error_code"] == 0  # the refused joins changed nothing
    left = raw.request(13, 3, {"group_id": "g", "members": [{"member_id": member_id}]})
    assert left["members"][0]["error_code"] == 0
    assert raw.request(12, 3, heartbeat)["error_code"] == 25
    raw.close()


def test_kafka_python_group_member_consumes_and_commits(server: ServeProcess) -> None:
    import kafka

    sends = [("orders", i % 2, f"kp-{i}".encode()) for i in range(20)]
    produce_all(confluent_producer(server.bootstrap), sends)
    consumer = kafka.KafkaConsumer(
        "orders",
        bootstrap_servers=server.bootstrap,
        group_id="kp-readers",
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=WAIT_S * 1000,
    )
    values = [next(consumer).value for _ in range(20)]
    consumer.commit()
    assert consumer.assignment() == {kafka.TopicPartition("orders", p) for p in (0, 1)}
    consumer.close()
    assert sorted(values) == sorted(v for _, _, v in sends)
    with Log.open(server.path) as log:
        committed = log.committed("kp-readers", log.partitions("orders"))
    assert {tp.partition: om.offset for tp, om in committed.items() if om} == {0: 10, 1: 10}
