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

import time
from pathlib import Path

from tests.txn_wire.group_calls import (
    NONE,
    heartbeat,
    in_background,
    join,
    join_pair,
    serve_groups,
    sync,
)
from tests.txn_wire.wire_clients import RawClient

SESSION_MS = 1_000
HALF_SESSION_S = SESSION_MS / 1000 / 2


def test_a_join_round_longer_than_the_session_does_not_expire_its_members(
    tmp_path: Path,
) -> None:
    """The initial delay (2 s) holds the member's JoinGroup twice its session (1 s): the
    member is not expired while it waits, and the answer starts its session afresh, so a
    SyncGroup and heartbeats sent within the session after it succeed (before: the member was
    dropped at the first session check after the round closed, its SyncGroup answered
    UNKNOWN_MEMBER_ID)."""
    served = serve_groups(tmp_path, delay_ms=2 * SESSION_MS)
    raw = RawClient(served.port)
    try:
        started = time.monotonic()
        joined = join(raw, "i1", session_ms=SESSION_MS)
        waited = time.monotonic() - started
        assert joined["error_code"] == NONE, joined
        assert waited >= 2 * SESSION_MS / 1000 * 0.9, waited  # the round did outlast the session
        time.sleep(HALF_SESSION_S)  # well inside the session the answer started
        synced = sync(raw, joined, "i1")
        assert synced["error_code"] == NONE, synced
        for _ in range(4):  # two sessions' worth of heartbeats, each within the session
            time.sleep(HALF_SESSION_S)
            assert heartbeat(raw, joined, "i1") == NONE
    finally:
        raw.close()
        served.stop()


def test_a_member_waiting_in_sync_group_is_not_expired(tmp_path: Path) -> None:
    """A follower parked in SyncGroup while the leader takes twice the session to send the
    assignment (heartbeating meanwhile, as Kafka's clients do) is still a member when the
    assignment comes, gets it, and its session starts from that answer (before: it was
    expired while waiting, and the group rebalanced under the leader)."""
    served = serve_groups(tmp_path)
    leader_raw, follower_raw = RawClient(served.port), RawClient(served.port)
    try:
        rejoin, follower = join_pair(
            leader_raw, "leader", follower_raw, "follower", session_ms=SESSION_MS
        )
        follower_sync = in_background(lambda: sync(follower_raw, follower, "follower"))
        for _ in range(4):  # the leader: two sessions of heartbeats before it assigns
            time.sleep(HALF_SESSION_S)
            assert heartbeat(leader_raw, rejoin, "leader") == NONE
        assert not follower_sync.done()  # still parked in SyncGroup
        assert sync(leader_raw, rejoin, "leader")["error_code"] == NONE
        synced = follower_sync.result(10)
        assert synced["error_code"] == NONE, synced
        assert synced["assignment"] == b"A"
        time.sleep(HALF_SESSION_S)
        assert heartbeat(follower_raw, follower, "follower") == NONE
        assert heartbeat(leader_raw, rejoin, "leader") == NONE
    finally:
        leader_raw.close()
        follower_raw.close()
        served.stop()
