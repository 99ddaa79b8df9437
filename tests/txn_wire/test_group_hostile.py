"""The group coordinator against clients that misbehave, lose answers or vanish: each rule is
Kafka's classic coordinator's (``GroupCoordinator`` / ``GroupMetadata``), and each test drives
the wire by hand what a broken or hostile client could send. Before each fix, the test failed
as its docstring says."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tests.txn_wire.group_calls import (
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    NONE,
    RANGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    heartbeat,
    in_background,
    join,
    join_pair,
    join_round,
    leave,
    member_ids,
    serve_groups,
    sync,
)
from tests.txn_wire.wire_clients import RawClient
from txn_log.group.group_activity import GroupActivity
from txn_wire.codec import Request
from txn_wire.group_coordinator import GroupCoordinator

ROUNDROBIN = [{"name": "roundrobin", "metadata": b""}]


def _stable_pair(port: int) -> tuple[RawClient, dict[str, Any], RawClient, dict[str, Any]]:
    """Static members ``a`` (the leader) and ``b`` of group ``g``, synced: a stable group."""
    raw_a, raw_b = RawClient(port), RawClient(port)
    a, b = join_pair(raw_a, "a", raw_b, "b")
    syncing = in_background(lambda: sync(raw_b, b, "b"))
    assert sync(raw_a, a, "a")["error_code"] == NONE
    assert syncing.result(30)["error_code"] == NONE
    return raw_a, a, raw_b, b


def test_a_member_whose_protocols_the_group_does_not_support_is_refused(tmp_path: Path) -> None:
    """JoinGroup must offer a protocol every member supports (``supportsProtocols``), and a
    first member a protocol type and at least one protocol: else INCONSISTENT_GROUP_PROTOCOL
    (23). Before: the member joined, and the leader was handed empty metadata for it (a Java
    leader throws decoding it: the group never stabilises)."""
    served = serve_groups(tmp_path)
    raw = RawClient(served.port)
    try:
        assert join(raw, "x", protocols=[])["error_code"] == INCONSISTENT_GROUP_PROTOCOL
        empty_type = join(raw, "x", protocol_type="")
        assert empty_type["error_code"] == INCONSISTENT_GROUP_PROTOCOL
        assert member_ids(raw) == set()
        first = join(raw, "a", session_ms=1_000)  # silent from now on: c's round drops it
        assert first["error_code"] == NONE
        other = join(raw, "b", protocols=ROUNDROBIN)
        assert other["error_code"] == INCONSISTENT_GROUP_PROTOCOL
        assert member_ids(raw) == {first["member_id"]}
        both = join(raw, "c", rebalance_ms=500, protocols=[*ROUNDROBIN, *RANGE])
        assert both["error_code"] != INCONSISTENT_GROUP_PROTOCOL  # shares range: may join
    finally:
        raw.close()
        served.stop()


def test_a_member_cannot_take_an_instance_id_by_naming_it(tmp_path: Path) -> None:
    """A call naming a member id with an instance id that belongs to no member is
    UNKNOWN_MEMBER_ID (``validateCurrentMember``): JoinGroup, Heartbeat and LeaveGroup alike,
    and the member keeps its own instance. Before: the JoinGroup mapped the second instance id
    to the member too; once the member left, the stale mapping made every later join of its
    first instance raise inside the server, which closed the connection (the instance could
    never join again)."""
    served = serve_groups(tmp_path)
    raw = RawClient(served.port)
    try:
        a = join(raw, "a")
        assert a["error_code"] == NONE
        assert join(raw, "b", a["member_id"])["error_code"] == UNKNOWN_MEMBER_ID
        assert heartbeat(raw, a, "b") == UNKNOWN_MEMBER_ID
        assert leave(raw, a["member_id"], "b") == UNKNOWN_MEMBER_ID
        assert member_ids(raw) == {a["member_id"]}
        assert leave(raw, a["member_id"], "a") == NONE
        again = join(raw, "a")  # the instance joins anew, over the same connection
        assert again["error_code"] == NONE and again["member_id"] != a["member_id"], again
        assert member_ids(raw) == {again["member_id"]}
    finally:
        raw.close()
        served.stop()


def test_a_leader_that_never_assigns_is_removed_after_the_rebalance_timeout(
    tmp_path: Path,
) -> None:
    """The leader heartbeats but sends no SyncGroup: when the rebalance timeout (1 s) has
    passed since the round closed, the members that did not sync are removed and the group
    rebalances (``onExpirePendingSync``): the follower parked in SyncGroup is answered
    REBALANCE_IN_PROGRESS and the leader is no longer a member. Before: the follower waited
    for ever and the leader kept the group."""
    served = serve_groups(tmp_path)
    raw_a, raw_b = RawClient(served.port), RawClient(served.port)
    try:
        a, b = join_pair(raw_a, "a", raw_b, "b", rebalance_ms=1_000)
        syncing = in_background(lambda: sync(raw_b, b, "b"))
        deadline = time.monotonic() + 30
        codes = []
        while not syncing.done() and time.monotonic() < deadline:
            codes.append(heartbeat(raw_a, a, "a"))
            time.sleep(0.2)
        assert syncing.done(), "the follower's SyncGroup was never answered"
        synced = syncing.result()
        assert synced["error_code"] == REBALANCE_IN_PROGRESS, synced
        assert codes[0] == NONE
        assert heartbeat(raw_a, a, "a") == UNKNOWN_MEMBER_ID
        assert a["member_id"] not in member_ids(raw_a)
    finally:
        raw_a.close()
        raw_b.close()
        served.stop()


def test_an_id_offered_with_member_id_required_is_no_member(tmp_path: Path) -> None:
    """A JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED and an id (KIP-394); until
    it joins with it, that id is no member (Kafka's ``pendingMembers``): its SyncGroup and
    Heartbeat are UNKNOWN_MEMBER_ID at once, the group stays without members, and a tool may
    reset it. Before: the pending id was a member, its SyncGroup (generation 0) waited for
    ever for an assignment, its session never ran, and the group stayed live (every reset and
    delete refused)."""
    served = serve_groups(tmp_path)
    raw = RawClient(served.port)
    raw.sock.settimeout(10)  # before the fix the SyncGroup never answered
    try:
        offered = join(raw, None, session_ms=60_000)
        assert offered["error_code"] == MEMBER_ID_REQUIRED
        pending = {**offered, "generation_id": 0}
        assert sync(raw, pending, None)["error_code"] == UNKNOWN_MEMBER_ID
        assert heartbeat(raw, pending, None) == UNKNOWN_MEMBER_ID
        assert member_ids(raw) == set()
        with GroupActivity(served.path).inactive("g"):  # no member: a tool may hold it
            pass
        joined = join(raw, None, offered["member_id"], session_ms=60_000)
        assert joined["error_code"] == NONE and joined["member_id"] == offered["member_id"]
        assert member_ids(raw) == {offered["member_id"]}
    finally:
        raw.close()
        served.stop()


def test_an_offered_id_that_never_joins_expires_without_a_rebalance(tmp_path: Path) -> None:
    """A client that gets MEMBER_ID_REQUIRED and vanishes: its offer expires after its session
    timeout (1 s) and the stable group does not rebalance (the leader's heartbeats stay NONE
    for three sessions). Before: the offer's expiry removed a 'member' and rebalanced the
    group (REBALANCE_IN_PROGRESS)."""
    served = serve_groups(tmp_path)
    raw_a, a, raw_b, b = _stable_pair(served.port)
    gone = RawClient(served.port)
    try:
        assert join(gone, None, session_ms=1_000)["error_code"] == MEMBER_ID_REQUIRED
        gone.close()
        for _ in range(15):
            time.sleep(0.2)
            assert heartbeat(raw_a, a, "a") == NONE
            assert heartbeat(raw_b, b, "b") == NONE
    finally:
        raw_a.close()
        raw_b.close()
        served.stop()


def test_a_member_asking_again_with_the_same_metadata_gets_the_current_generation(
    tmp_path: Path,
) -> None:
    """A follower of a stable group that re-sends its JoinGroup unchanged (it lost the answer)
    gets the current generation back and nobody rebalances (``doCurrentMemberJoinGroup``).
    Before: the join opened a round, the leader's next heartbeat was REBALANCE_IN_PROGRESS,
    and the follower's JoinGroup waited for it."""
    served = serve_groups(tmp_path)
    raw_a, a, raw_b, b = _stable_pair(served.port)
    raw_b.sock.settimeout(10)
    try:
        again = join(raw_b, "b", b["member_id"])
        assert again["error_code"] == NONE, again
        assert again["generation_id"] == b["generation_id"], (again, b)
        assert heartbeat(raw_a, a, "a") == NONE
        changed = in_background(  # new metadata: a rebalance, as in Kafka
            lambda: join(
                raw_b, "b", b["member_id"], protocols=[{"name": "range", "metadata": b"new"}]
            )
        )
        deadline = time.monotonic() + 10
        while heartbeat(raw_a, a, "a") == NONE and time.monotonic() < deadline:
            time.sleep(0.1)
        assert heartbeat(raw_a, a, "a") == REBALANCE_IN_PROGRESS
        join(raw_a, "a", a["member_id"])
        changed.result(10)
    finally:
        raw_a.close()
        raw_b.close()
        served.stop()


def test_a_static_member_that_misses_a_round_keeps_its_place(tmp_path: Path) -> None:
    """A round closes (rebalance timeout 1 s) without static member ``a``, silent but within
    its 10 s session: ``a`` stays a member and the leader is given it to assign
    (``onCompleteJoin`` removes only dynamic members that did not rejoin; KIP-345). Before:
    ``a`` was dropped at the round's close, and its return rebalanced the group again."""
    served = serve_groups(tmp_path)
    raw_a, raw_b, raw_c = RawClient(served.port), RawClient(served.port), RawClient(served.port)
    try:
        a, b = join_pair(raw_a, "a", raw_b, "b", rebalance_ms=1_000)
        assert sync(raw_a, a, "a")["error_code"] == NONE
        assert sync(raw_b, b, "b")["error_code"] == NONE
        # c joins: a round opens; b rejoins it, a stays silent
        b2, c = join_round(raw_b, b, "b", raw_c, "c", rebalance_ms=1_000)
        leader = b2 if b2["members"] else c
        assert {m["member_id"] for m in leader["members"]} == {
            a["member_id"],
            b["member_id"],
            c["member_id"],
        }
        assert {m["group_instance_id"] for m in leader["members"]} == {"a", "b", "c"}
        assert a["member_id"] in member_ids(raw_a)
    finally:
        for raw in (raw_a, raw_b, raw_c):
            raw.close()
        served.stop()


def test_groups_left_with_nothing_are_forgotten() -> None:
    """Every JoinGroup names a group, and any client can name millions: a group left with no
    member, no offered id and no round is dropped from the coordinator's memory at the next
    session check (its offsets are the engine's), so names cost nothing once their offers
    expire. In process, on the coordinator itself: memory is not visible on the wire. Before:
    every group ever named stayed in memory for the server's life."""

    async def scenario() -> tuple[int, int]:
        coordinator = GroupCoordinator(min_session_timeout_ms=100)
        coordinator.start()
        try:
            for i in range(500):  # offered ids only (MEMBER_ID_REQUIRED), never joined with
                body = {
                    "group_id": f"spam-{i}",
                    "session_timeout": 200,
                    "rebalance_timeout": 200,
                    "member_id": "",
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocols": RANGE,
                }
                answer = await coordinator.join_group(Request(11, 5, i, "spam", body))
                assert answer["error_code"] == MEMBER_ID_REQUIRED
            offered = len(coordinator.groups)
            await asyncio.sleep(0.6)  # past the offers' 200 ms sessions, and a check or more
            return offered, len(coordinator.groups)
        finally:
            coordinator.stop()

    offered, left = asyncio.run(scenario())
    assert offered == 500
    assert left == 0
