"""Authorization of the group APIs (R-12), as Kafka's ``KafkaApis``: OffsetCommit and
TxnOffsetCommit need Read on the group (and Write on the transactional id, C-31) and Read on
each topic; OffsetFetch Describe on the group and each topic; JoinGroup, SyncGroup, Heartbeat
and LeaveGroup Read on the group; DescribeGroups Describe on each group; ListGroups lists the
groups the principal may describe (all with Describe on the cluster); FindCoordinator needs
Describe on the group or transactional id; DeleteGroups Delete on each group; OffsetDelete
Delete on the group and Read on each topic. The table is in ``authorize``. Thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable

from txn_wire.acl import CLUSTER_NAME, Operation, ResourceType
from txn_wire.codec import Plain
from txn_wire.guard import (
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    Check,
    Guard,
    only_described,
    topic_rule,
)

_GROUP, _TXN = ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
_READ, _WRITE, _DESCRIBE = Operation.READ, Operation.WRITE, Operation.DESCRIBE
_DELETE = Operation.DELETE


def offset_commit(check: Check, *, transactional: bool = False) -> Guard:
    """OffsetCommit, TxnOffsetCommit: (Write on the transactional id,) Read on the group,
    Read on each topic."""
    topics = check.body["topics"]
    transactional_id = check.body.get("transactional_id", "")
    if transactional and not check.allows(_TXN, transactional_id, _WRITE):
        return check.refuse(
            {"topics": _commit_refusals(topics, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
        )
    if not check.allows(_GROUP, check.body["group_id"], _READ):
        return check.refuse({"topics": _commit_refusals(topics, GROUP_AUTHORIZATION_FAILED)})
    return topic_rule(
        check,
        topics_key="topics",
        name_key="name",
        operation=_READ,
        answer_key="topics",
        refusal=lambda t: _commit_refusals([t], TOPIC_AUTHORIZATION_FAILED)[0],
        empty={},
    )


def _commit_refusals(topics: list[Plain], code: int) -> list[Plain]:
    return [
        {
            "name": t["name"],
            "partitions": [
                {"partition_index": p["partition_index"], "error_code": code}
                for p in t["partitions"]
            ],
        }
        for t in topics
    ]


def offset_fetch(check: Check) -> Guard:
    topics = check.body.get("topics")
    if not check.allows(_GROUP, check.body["group_id"], _DESCRIBE):
        code = GROUP_AUTHORIZATION_FAILED  # top level (v2+) and each partition (v1)
        return check.refuse({"error_code": code, "topics": _fetch_refusals(topics or [], code)})
    if topics is None:
        return Guard(check.request, merge=lambda answer: only_described(check, answer))
    return topic_rule(
        check,
        topics_key="topics",
        name_key="name",
        operation=_DESCRIBE,
        answer_key="topics",
        refusal=lambda t: _fetch_refusals([t], TOPIC_AUTHORIZATION_FAILED)[0],
        empty={"error_code": 0},
    )


def _fetch_refusals(topics: list[Plain], code: int) -> list[Plain]:
    return [
        {
            "name": t["name"],
            "partitions": [
                {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": code}
                for p in t["partition_indexes"]
            ],
        }
        for t in topics
    ]


def member_rule(refusal: Callable[[Plain], Plain]) -> Callable[[Check], Guard]:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Read on the group."""

    def rule(check: Check) -> Guard:
        if check.allows(_GROUP, check.body["group_id"], _READ):
            return Guard(check.request)
        return check.refuse({"error_code": GROUP_AUTHORIZATION_FAILED, **refusal(check.body)})

    return rule


def describe_groups(check: Check) -> Guard:
    """Describe on each group."""
    return _each_group(
        check,
        "groups",
        "groups",
        _DESCRIBE,
        lambda g: {
            "error_code": GROUP_AUTHORIZATION_FAILED,
            "group_id": g,
            "group_state": "",
            "members": [],
        },
    )


def delete_groups(check: Check) -> Guard:
    """Delete on each group; a refused one is GROUP_AUTHORIZATION_FAILED (30) in the answer
    and never reaches the handler (Kafka's ``KafkaApis.handleDeleteGroupsRequest``)."""
    return _each_group(
        check,
        "groups_names",
        "results",
        _DELETE,
        lambda g: {"group_id": g, "error_code": GROUP_AUTHORIZATION_FAILED},
    )


def _each_group(
    check: Check,
    names_key: str,
    answer_key: str,
    operation: Operation,
    refusal: Callable[[str], Plain],
) -> Guard:
    """``operation`` on each group the request lists under ``names_key``: the request is
    narrowed to the allowed ones and the refusals join the answer's ``answer_key`` list."""
    names = check.body[names_key]
    allowed = [g for g in names if check.allows(_GROUP, g, operation)]
    refused = [refusal(g) for g in names if g not in allowed]
    if not refused:
        return Guard(check.request)
    if not allowed:
        return check.refuse({answer_key: refused})

    def merge(answer: Plain | None) -> Plain | None:
        return None if answer is None else {**answer, answer_key: answer[answer_key] + refused}

    return check.narrowed(merge, **{names_key: allowed})


def list_groups(check: Check) -> Guard:
    if check.allows(ResourceType.CLUSTER, CLUSTER_NAME, _DESCRIBE):
        return Guard(check.request)

    def merge(answer: Plain | None) -> Plain | None:
        if answer is None:
            return None
        kept = [g for g in answer["groups"] if check.allows(_GROUP, g["group_id"], _DESCRIBE)]
        return {**answer, "groups": kept}

    return Guard(check.request, merge=merge)


def find_coordinator(check: Check) -> Guard:
    """Describe on the group (key type 0) or the transactional id (1)."""
    key_type = check.body.get("key_type", 0)
    resource, code = (
        (_TXN, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if key_type == 1
        else (
            _GROUP,
            GROUP_AUTHORIZATION_FAILED,
        )
    )
    nowhere = {"node_id": -1, "host": "", "port": -1, "error_code": code}
    if check.request.api_version < 4:
        if check.allows(resource, check.body["key"], _DESCRIBE):
            return Guard(check.request)
        return check.refuse({**nowhere, "error_message": "not authorized"})
    keys = check.body.get("coordinator_keys") or []
    allowed = [k for k in keys if check.allows(resource, k, _DESCRIBE)]
    refused = [{"key": k, **nowhere} for k in keys if k not in allowed]
    if not refused:
        return Guard(check.request)

    def merge(answer: Plain | None) -> Plain | None:
        return None if answer is None else {"coordinators": answer["coordinators"] + refused}

    return check.narrowed(merge, coordinator_keys=allowed)


def offset_delete(check: Check) -> Guard:
    """OffsetDelete (Kafka's ``handleOffsetDeleteRequest``): Delete on the group, else the
    whole answer is GROUP_AUTHORIZATION_FAILED (30) with no topics; Read on each topic, else
    its partitions are TOPIC_AUTHORIZATION_FAILED (29). The handler runs even when no topic is
    left (Kafka asks the coordinator with none: an unknown group is still GROUP_ID_NOT_FOUND),
    and a group error of its answer drops the refused topics, as Kafka's error response has
    none."""
    if not check.allows(_GROUP, check.body["group_id"], _DELETE):
        return check.refuse({"error_code": GROUP_AUTHORIZATION_FAILED, "topics": []})
    topics = check.body["topics"]
    allowed = [t for t in topics if check.allows(ResourceType.TOPIC, t["name"], _READ)]
    if len(allowed) == len(topics):
        return Guard(check.request)
    refused = [
        {
            "name": t["name"],
            "partitions": [
                {"partition_index": p["partition_index"], "error_code": TOPIC_AUTHORIZATION_FAILED}
                for p in t["partitions"]
            ],
        }
        for t in topics
        if t not in allowed
    ]

    def merge(answer: Plain | None) -> Plain | None:
        if answer is None or answer["error_code"]:
            return answer
        return {**answer, "topics": answer["topics"] + refused}

    return check.narrowed(merge, topics=allowed)
