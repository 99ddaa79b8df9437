"""A member's session while the group coordinator keeps it waiting (librdkafka 0102).

Kafka's coordinator counts a member's session from its last heartbeat, except while the member
waits on the coordinator itself: a member parked in a JoinGroup (the join round, held open for
``group.initial.rebalance.delay.ms`` and extended while members arrive) or in a SyncGroup (for
the leader's assignment) cannot heartbeat, so its session is satisfied
(``MemberMetadata.hasSatisfiedHeartbeat``), and the answer that ends the wait starts a new
session (``completeAndScheduleNextHeartbeatExpiration``). A coordinator that counted the wait
would drop members the moment their round closed, whenever the round outlasted
``session.timeout.ms``: librdkafka's 0102 saw it, two static members held 6 s by the initial
delay (3 s, extended once) with a 6 s session, one of them revoked 3 ms after its assignment.
Each test drives the wire by hand, with session timeouts short enough to be outlasted.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from tests.txn_wire.serve_process import start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log

SESSION_MS = 1_000
NONE = 0


def _serve(tmp_path: Path, delay_ms: int) -> Any:
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("work", 2)
    return start_serve(
        log_dir,
        "--group-initial-rebalance-delay-ms",
        str(delay_ms),
        "--group-min-session-timeout-ms",
        "500",
    )


def _join(raw: RawClient, instance: str) -> dict[str, Any]:
    return raw.request(
        11,
        5,
        {
            "group_id": "g",
            "session_timeout": SESSION_MS,
            "rebalance_timeout": 30_000,
            "member_id": "",
            "group_instance_id": instance,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )


def _sync(raw: RawClient, joined: dict[str, Any], instance: str, leader: bool) -> dict[str, Any]:
    assignments = [{"member_id": m["member_id"], "assignment": b"A"} for m in joined["members"]]
    return raw.request(
        14,
        3,
        {
            "group_id": "g",
            "generation_id": joined["generation_id"],
            "member_id": joined["member_id"],
            "group_instance_id": instance,
            "assignments": assignments if leader else [],
        },
    )


def _heartbeat(raw: RawClient, joined: dict[str, Any], instance: str) -> int:
    answer = raw.request(
        12,
        3,
        {
            "group_id": "g",
            "generation_id": joined["generation_id"],
            "member_id": joined["member_id"],
            "group_instance_id": instance,
        },
    )
    return int(answer["error_code"])


def test_a_join_round_longer_than_the_session_does_not_expire_its_members(
    tmp_path: Path,
) -> None:
    """The initial delay (2 s) holds the member's JoinGroup twice its session (1 s): the
    member is not expired while it waits, and the answer starts its session afresh, so a
    SyncGroup and heartbeats sent within the session after it succeed (before: the member was
    dropped at the first session check after the round closed, its SyncGroup answered
    UNKNOWN_MEMBER_ID)."""
    served = _serve(tmp_path, delay_ms=2 * SESSION_MS)
    raw = RawClient(served.port)
    try:
        started = time.monotonic()
        joined = _join(raw, "i1")
        waited = time.monotonic() - started
        assert joined["error_code"] == NONE, joined
        assert waited >= 2 * SESSION_MS / 1000 * 0.9, waited  # the round did outlast the session
        time.sleep(SESSION_MS / 1000 / 2)  # well inside the session the answer started
        synced = _sync(raw, joined, "i1", leader=True)
        assert synced["error_code"] == NONE, synced
        for _ in range(4):  # two sessions' worth of heartbeats, each within the session
            time.sleep(SESSION_MS / 1000 / 2)
            assert _heartbeat(raw, joined, "i1") == NONE
    finally:
        raw.close()
        served.stop()


def test_a_member_waiting_in_sync_group_is_not_expired(tmp_path: Path) -> None:
    """A follower parked in SyncGroup while the leader takes twice the session to send the
    assignment (heartbeating meanwhile, as Kafka's clients do) is still a member when the
    assignment comes, gets it, and its session starts from that answer (before: it was
    expired while waiting, and the group rebalanced under the leader)."""
    served = _serve(tmp_path, delay_ms=0)
    leader_raw, follower_raw = RawClient(served.port), RawClient(served.port)
    try:
        leader = _join(leader_raw, "leader")
        assert leader["error_code"] == NONE, leader
        joined: dict[str, dict[str, Any]] = {}
        # the second member's join opens a new round: the first joins it again
        follower_join = threading.Thread(
            target=lambda: joined.__setitem__("follower", _join(follower_raw, "follower"))
        )
        follower_join.start()
        time.sleep(0.3)
        rejoin = leader_raw.request(
            11,
            5,
            {
                "group_id": "g",
                "session_timeout": SESSION_MS,
                "rebalance_timeout": 30_000,
                "member_id": leader["member_id"],
                "group_instance_id": "leader",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        follower_join.join(10)
        follower = joined["follower"]
        assert rejoin["error_code"] == NONE == follower["error_code"], (rejoin, follower)
        assert rejoin["leader"] == rejoin["member_id"], rejoin
        synced: dict[str, dict[str, Any]] = {}
        follower_sync = threading.Thread(
            target=lambda: synced.__setitem__(
                "follower", _sync(follower_raw, follower, "follower", leader=False)
            )
        )
        follower_sync.start()
        for _ in range(4):  # the leader: two sessions of heartbeats before it assigns
            time.sleep(SESSION_MS / 1000 / 2)
            assert _heartbeat(leader_raw, rejoin, "leader") == NONE
        assert follower_sync.is_alive()  # still parked in SyncGroup
        assert _sync(leader_raw, rejoin, "leader", leader=True)["error_code"] == NONE
        follower_sync.join(10)
        assert synced["follower"]["error_code"] == NONE, synced
        assert synced["follower"]["assignment"] == b"A"
        time.sleep(SESSION_MS / 1000 / 2)
        assert _heartbeat(follower_raw, follower, "follower") == NONE
        assert _heartbeat(leader_raw, rejoin, "leader") == NONE
    finally:
        leader_raw.close()
        follower_raw.close()
        served.stop()
