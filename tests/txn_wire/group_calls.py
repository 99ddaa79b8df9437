"""Group protocol calls by hand (JoinGroup v5, SyncGroup v3, Heartbeat v3, LeaveGroup v3) for
the group coordinator's tests: what a client would send, including what no client should."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from demo.served import ServeProcess
from tests.txn_wire.serve_process import start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 11, 12, 13, 14, 15
NONE = 0
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
RANGE = [{"name": "range", "metadata": b"r"}]
T = TypeVar("T")


def serve_groups(tmp_path: Path, delay_ms: int = 0) -> ServeProcess:
    """A server on a fresh log (topic ``work``) allowing sessions from 500 ms, so that tests
    can outlast them."""
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


def join(
    raw: RawClient,
    instance: str | None,
    member_id: str = "",
    *,
    session_ms: int = 10_000,
    rebalance_ms: int = 30_000,
    protocols: list[dict[str, Any]] | None = None,
    protocol_type: str = "consumer",
    group: str = "g",
) -> dict[str, Any]:
    return raw.request(
        JOIN_GROUP,
        5,
        {
            "group_id": group,
            "session_timeout": session_ms,
            "rebalance_timeout": rebalance_ms,
            "member_id": member_id,
            "group_instance_id": instance,
            "protocol_type": protocol_type,
            "protocols": RANGE if protocols is None else protocols,
        },
    )


def sync(
    raw: RawClient, joined: dict[str, Any], instance: str | None, *, group: str = "g"
) -> dict[str, Any]:
    """SyncGroup for ``joined`` (a JoinGroup answer): as the leader, assigns ``b"A"`` to every
    member the answer lists."""
    assignments = [{"member_id": m["member_id"], "assignment": b"A"} for m in joined["members"]]
    return raw.request(
        SYNC_GROUP,
        3,
        {
            "group_id": group,
            "generation_id": joined["generation_id"],
            "member_id": joined["member_id"],
            "group_instance_id": instance,
            "assignments": assignments,
        },
    )


def heartbeat(
    raw: RawClient, joined: dict[str, Any], instance: str | None, *, group: str = "g"
) -> int:
    answer = raw.request(
        HEARTBEAT,
        3,
        {
            "group_id": group,
            "generation_id": joined["generation_id"],
            "member_id": joined["member_id"],
            "group_instance_id": instance,
        },
    )
    return int(answer["error_code"])


def leave(raw: RawClient, member_id: str, instance: str | None, *, group: str = "g") -> int:
    """LeaveGroup v3 for one member: its own error code."""
    answer = raw.request(
        LEAVE_GROUP,
        3,
        {"group_id": group, "members": [{"member_id": member_id, "group_instance_id": instance}]},
    )
    return int(answer["members"][0]["error_code"])


def member_ids(raw: RawClient, group: str = "g") -> set[str]:
    """The members DescribeGroups reports."""
    described = raw.request(DESCRIBE_GROUPS, 4, {"groups": [group]})["groups"][0]
    return {m["member_id"] for m in described["members"]}


def in_background(call: Callable[[], T]) -> Future[T]:
    """``call`` on a thread of its own: a request that waits on the coordinator (a JoinGroup
    in an open round, a follower's SyncGroup) while the test goes on."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as error:  # the test's result() raises it
            future.set_exception(error)

    threading.Thread(target=run, daemon=True).start()
    return future


def join_round(
    raw_member: RawClient,
    member: dict[str, Any],
    instance: str | None,
    raw_new: RawClient,
    new_instance: str | None,
    **options: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A new member joins (``raw_new``, opening a round) and the current ``member`` (its last
    JoinGroup answer) joins that round again: both answers, each without error."""
    joining = in_background(lambda: join(raw_new, new_instance, **options))
    time.sleep(0.3)  # the new member's join opened the round
    again = join(raw_member, instance, member["member_id"], **options)
    new = joining.result(30)
    assert again["error_code"] == NONE == new["error_code"], (again, new)
    return again, new


def join_pair(
    raw_a: RawClient,
    a_instance: str | None,
    raw_b: RawClient,
    b_instance: str | None,
    **options: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``a`` joins group ``g`` alone, then ``b``, and ``a`` joins the round ``b`` opened: their
    answers of that round, ``a`` the leader."""
    first = join(raw_a, a_instance, **options)
    assert first["error_code"] == NONE, first
    a, b = join_round(raw_a, first, a_instance, raw_b, b_instance, **options)
    assert a["leader"] == a["member_id"], a
    return a, b
