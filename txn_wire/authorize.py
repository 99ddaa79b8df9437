"""Authorization of each request before its handler runs (R-12: C-31, B-02, B-19), as Kafka's
``KafkaApis`` does it, with the ACLs of ``acl.Authorizer``.

What each API needs, and the error code of a refusal:

=====================  ===============================================  ===================
API                    needs                                            refused with
=====================  ===============================================  ===================
Produce, transactional Write on its transactional id (B-19)             53, every partition
Produce                Write on each topic                              29, that topic
Fetch                  Read on each topic                               29, that topic
ListOffsets            Describe on each topic (Read or Write imply it)  29, that topic
Metadata               Describe on each topic asked (all topics: the    29, that topic
                       ones allowed are listed, the others left out)
OffsetCommit           Read on the group; Read on each topic            30 all; 29 the topic
OffsetFetch            Describe on the group; Describe on each topic    30 all; 29 the topic
FindCoordinator        Describe on the group / transactional id         30 / 53
Join/Sync/Heartbeat/   Read on the group                                30
LeaveGroup
DescribeGroups,        Describe on each group (ListGroups lists only    30, that group
ListGroups             the groups allowed)
InitProducerId         Write on the transactional id (C-31); without    53; 31
                       one, IdempotentWrite on the cluster or Write on
                       some topic (Kafka's idempotent producer rule)
AddPartitionsToTxn     Write on the transactional id; Write on each     53; 29 the topic,
                       topic (C-31)                                     55 the others
AddOffsetsToTxn        Write on the transactional id; Read on the       53; 30
                       group (C-31)
EndTxn                 Write on the transactional id (C-31)             53
TxnOffsetCommit        Write on the transactional id; Read on the       53; 30; 29 the
                       group; Read on each topic                        topic
=====================  ===============================================  ===================

A refused part never reaches the handler: the request is narrowed to the allowed parts, the
handler answers those, and the refusals are added to its answer (``Guard.merge``); when
nothing is left the refusal is the whole answer and the handler does not run, so a refused
request writes nothing. WriteTxnMarker (B-02, ClusterAction) is not served at all: control
batches reach the log only through the coordinator, and Produce refuses them (B-19).
Pure functions of the request; thread-safe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from txn_wire.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType
from txn_wire.codec import Plain, Request

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55
_TOPIC, _GROUP, _TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
_READ, _WRITE, _DESCRIBE = Operation.READ, Operation.WRITE, Operation.DESCRIBE

Merge = Callable[[Plain | None], Plain | None]


def _unchanged(answer: Plain | None) -> Plain | None:
    return answer


@dataclass(frozen=True)
class Guard:
    """The outcome of authorizing one request: ``refused`` (then ``answer`` is the whole
    response, None for a Produce with acks=0), or the ``request`` to hand to the handler and
    how to ``merge`` the refused parts into its answer."""

    request: Request
    refused: bool = False
    answer: Plain | None = None
    merge: Merge = _unchanged


class _Check:
    """One request's checks for one principal."""

    def __init__(self, authorizer: Authorizer, principal: str, request: Request) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.request = request
        self.body = request.body

    def allows(self, resource: ResourceType, name: str, operation: Operation) -> bool:
        return self.authorizer.allows(self.principal, resource, name, operation)

    def refuse(self, answer: Plain | None) -> Guard:
        return Guard(self.request, refused=True, answer=answer)

    def narrowed(self, merge: Merge, **body: Any) -> Guard:
        request = dataclasses.replace(self.request, body={**self.body, **body})
        return Guard(request, merge=merge)


def authorize(authorizer: Authorizer, principal: str, request: Request) -> Guard:
    """Check ``request`` (an API this server serves) for ``principal``."""
    check = _Check(authorizer, principal, request)
    rule = _RULES.get(request.api_key)
    return rule(check) if rule is not None else Guard(request)


# --- topics ------------------------------------------------------------------------------------


def _split(
    check: _Check, topics: list[Plain], name_key: str, operation: Operation
) -> tuple[list[Plain], list[Plain]]:
    allowed = [t for t in topics if check.allows(_TOPIC, t[name_key], operation)]
    return allowed, [t for t in topics if not check.allows(_TOPIC, t[name_key], operation)]


def _topic_rule(
    check: _Check,
    *,
    topics_key: str,
    name_key: str,
    operation: Operation,
    answer_key: str,
    refusal: Callable[[Plain], Plain],
    empty: Plain | None,
) -> Guard:
    """Narrow the request to the topics allowed; each refused topic answered by ``refusal``."""
    allowed, denied = _split(check, check.body[topics_key] or [], name_key, operation)
    if not denied:
        return Guard(check.request)
    refused = [refusal(t) for t in denied]
    if not allowed and empty is not None:
        return check.refuse({**empty, answer_key: refused})

    def merge(answer: Plain | None) -> Plain | None:
        if answer is None:
            return None
        return {**answer, answer_key: list(answer[answer_key]) + refused}

    return check.narrowed(merge, **{topics_key: allowed})


def _produce(check: _Check) -> Guard:
    """B-19: Write on the transactional id first, then Write on each topic."""
    transactional_id = check.body.get("transactional_id")
    acks_zero = check.body["acks"] == 0
    if transactional_id and not check.allows(_TXN, transactional_id, _WRITE):
        refused = [
            _produce_refusal(t, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            for t in check.body["topic_data"]
        ]
        return check.refuse(None if acks_zero else {"responses": refused})
    return _topic_rule(
        check,
        topics_key="topic_data",
        name_key="name",
        operation=_WRITE,
        answer_key="responses",
        refusal=lambda t: _produce_refusal(t, TOPIC_AUTHORIZATION_FAILED),
        empty=None if acks_zero else {},
    )


def _produce_refusal(topic: Plain, code: int) -> Plain:
    return {
        "name": topic["name"],
        "partition_responses": [
            {"index": p["index"], "error_code": code, "base_offset": -1}
            for p in topic["partition_data"]
        ],
    }


def _fetch(check: _Check) -> Guard:
    return _topic_rule(
        check,
        topics_key="topics",
        name_key="topic",
        operation=_READ,
        answer_key="responses",
        refusal=lambda t: {
            "topic": t["topic"],
            "partitions": [
                {
                    "partition_index": p["partition"],
                    "error_code": TOPIC_AUTHORIZATION_FAILED,
                    "high_watermark": -1,
                    "records": b"",
                }
                for p in t["partitions"]
            ],
        },
        empty={"error_code": 0, "session_id": 0},
    )


def _list_offsets(check: _Check) -> Guard:
    return _topic_rule(
        check,
        topics_key="topics",
        name_key="name",
        operation=_DESCRIBE,
        answer_key="topics",
        refusal=lambda t: {
            "name": t["name"],
            "partitions": [
                {"partition_index": p["partition_index"], "error_code": TOPIC_AUTHORIZATION_FAILED}
                for p in t["partitions"]
            ],
        },
        empty={},
    )


def _metadata(check: _Check) -> Guard:
    """Asked topics without Describe are refused (and never auto-created); a request for all
    topics lists only those the principal may describe."""
    if check.body.get("topics") is None:
        return Guard(check.request, merge=lambda answer: _only_described(check, answer))
    allowed, denied = _split(check, check.body["topics"], "name", _DESCRIBE)
    refused = [{"error_code": TOPIC_AUTHORIZATION_FAILED, "name": t["name"]} for t in denied]

    def merge(answer: Plain | None) -> Plain | None:
        return None if answer is None else {**answer, "topics": answer["topics"] + refused}

    return check.narrowed(merge, topics=allowed) if denied else Guard(check.request)


def _only_described(check: _Check, answer: Plain | None) -> Plain | None:
    if answer is None:
        return None
    kept = [t for t in answer["topics"] if check.allows(_TOPIC, t["name"], _DESCRIBE)]
    return {**answer, "topics": kept}


# --- groups ------------------------------------------------------------------------------------


def _offset_commit(check: _Check, *, transactional: bool = False) -> Guard:
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
    return _topic_rule(
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


def _offset_fetch(check: _Check) -> Guard:
    topics = check.body.get("topics")
    if not check.allows(_GROUP, check.body["group_id"], _DESCRIBE):
        code = GROUP_AUTHORIZATION_FAILED  # top level (v2+) and each partition (v1)
        return check.refuse({"error_code": code, "topics": _fetch_refusals(topics or [], code)})
    if topics is None:
        return Guard(check.request, merge=lambda answer: _only_described(check, answer))
    return _topic_rule(
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


def _member_rule(refusal: Callable[[Plain], Plain]) -> Callable[[_Check], Guard]:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Read on the group."""

    def rule(check: _Check) -> Guard:
        if check.allows(_GROUP, check.body["group_id"], _READ):
            return Guard(check.request)
        return check.refuse({"error_code": GROUP_AUTHORIZATION_FAILED, **refusal(check.body)})

    return rule


def _describe_groups(check: _Check) -> Guard:
    groups = check.body["groups"]
    allowed = [g for g in groups if check.allows(_GROUP, g, _DESCRIBE)]
    refused = [
        {"error_code": GROUP_AUTHORIZATION_FAILED, "group_id": g, "group_state": "", "members": []}
        for g in groups
        if g not in allowed
    ]
    if not refused:
        return Guard(check.request)
    if not allowed:
        return check.refuse({"groups": refused})

    def merge(answer: Plain | None) -> Plain | None:
        return None if answer is None else {**answer, "groups": answer["groups"] + refused}

    return check.narrowed(merge, groups=allowed)


def _list_groups(check: _Check) -> Guard:
    def merge(answer: Plain | None) -> Plain | None:
        if answer is None:
            return None
        kept = [g for g in answer["groups"] if check.allows(_GROUP, g["group_id"], _DESCRIBE)]
        return {**answer, "groups": kept}

    return Guard(check.request, merge=merge)


def _find_coordinator(check: _Check) -> Guard:
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


# --- transactions (C-31) -----------------------------------------------------------------------


def _init_producer_id(check: _Check) -> Guard:
    transactional_id = check.body.get("transactional_id")
    refused = {"producer_id": -1, "producer_epoch": -1}
    if transactional_id:
        if check.allows(_TXN, transactional_id, _WRITE):
            return Guard(check.request)
        return check.refuse({**refused, "error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    if check.allows(ResourceType.CLUSTER, CLUSTER_NAME, Operation.IDEMPOTENT_WRITE) or (
        check.authorizer.allows_any(check.principal, _TOPIC, _WRITE)
    ):
        return Guard(check.request)
    return check.refuse({**refused, "error_code": CLUSTER_AUTHORIZATION_FAILED})


def _add_partitions_to_txn(check: _Check) -> Guard:
    body = check.body
    topics = body["v3_and_below_topics"]
    if not check.allows(_TXN, body["v3_and_below_transactional_id"], _WRITE):
        return check.refuse(_add_partitions_answer(topics, lambda name: 53))
    denied = {t["name"] for t in topics if not check.allows(_TOPIC, t["name"], _WRITE)}
    if not denied:
        return Guard(check.request)
    return check.refuse(
        _add_partitions_answer(
            topics,
            lambda name: TOPIC_AUTHORIZATION_FAILED if name in denied else OPERATION_NOT_ATTEMPTED,
        )
    )


def _add_partitions_answer(topics: list[Plain], code: Callable[[str], int]) -> Plain:
    return {
        "results_by_topic_v3_and_below": [
            {
                "name": t["name"],
                "results_by_partition": [
                    {"partition_index": p, "partition_error_code": code(t["name"])}
                    for p in t["partitions"]
                ],
            }
            for t in topics
        ]
    }


def _add_offsets_to_txn(check: _Check) -> Guard:
    if not check.allows(_TXN, check.body["transactional_id"], _WRITE):
        return check.refuse({"error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    if not check.allows(_GROUP, check.body["group_id"], _READ):
        return check.refuse({"error_code": GROUP_AUTHORIZATION_FAILED})
    return Guard(check.request)


def _end_txn(check: _Check) -> Guard:
    if check.allows(_TXN, check.body["transactional_id"], _WRITE):
        return Guard(check.request)
    return check.refuse({"error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED})


_RULES: dict[int, Callable[[_Check], Guard]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _member_rule(
        lambda body: {
            "generation_id": -1,
            "protocol_name": "",
            "leader": "",
            "member_id": body["member_id"],
            "members": [],
        }
    ),
    12: _member_rule(lambda body: {}),
    13: _member_rule(lambda body: {"members": []}),
    14: _member_rule(lambda body: {"assignment": b""}),
    15: _describe_groups,
    16: _list_groups,
    22: _init_producer_id,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _end_txn,
    28: lambda check: _offset_commit(check, transactional=True),
}
"""api key → its rule; ApiVersions and the SASL APIs need no authorization."""
