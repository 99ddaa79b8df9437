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
                       ones allowed are listed, the others left out);
                       v8+ asked for authorized operations: the bit
                       field of the principal's, per topic listed and
                       (v8-10) for the cluster, 0 there without
                       Describe on the cluster
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
CreateTopics           Create on the cluster, or Create on each topic   29, that topic
DescribeConfigs        DescribeConfigs on each topic; on the cluster    29 the topic; 31
                       for a broker resource                            the broker
DeleteTopics           Delete on the cluster, or Delete on each topic;  29, that topic (its
                       without Describe on it, a client is not told     name withheld if
                       whether it exists (applied by the handler: a     named by id and not
                       topic may be named by its id)                    describable)
CreatePartitions       Alter on each topic (a name given twice is       29, that topic
                       INVALID_REQUEST first, as Kafka answers it)
DeleteGroups           Delete on each group                             30, that group
OffsetDelete           Delete on the group; Read on each topic          30 alone; 29 the topic
AlterConfigs,          AlterConfigs on each topic; on the cluster for   29 the topic; 31
IncrementalAlter-      a broker resource (what Kafka's broker refuses   the broker
Configs                as INVALID_REQUEST first is answered so:
                       ``authorize_configs``)
DeleteRecords          Delete on each topic                             29, that topic
DescribeAcls           Describe on the cluster (Alter implies it)       31
CreateAcls,            Alter on the cluster                             31, every creation
DeleteAcls                                                              / filter
DescribeUserScram-     Describe on the cluster (``authorize_scram``;    31, each user named
Credentials            every user: none listed)
AlterUserScram-        Alter on the cluster                             31, each user
Credentials
=====================  ===============================================  ===================

A refused part never reaches the handler: the request is narrowed to the allowed parts, the
handler answers those, and the refusals are added to its answer (``Guard.merge``); when
nothing is left the refusal is the whole answer and the handler does not run, so a refused
request writes nothing. DeleteTopics alone hands its handler the decisions instead
(``guard.TopicAccess``): Kafka resolves a topic id to a name before authorizing it, and tells
an unknown topic from a forbidden one only to a principal that may describe it.
WriteTxnMarker (B-02, ClusterAction) is not served at all: control batches reach the log
only through the coordinator, and Produce refuses them (B-19). Pure functions of the request;
thread-safe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from txn_wire import authorize_groups as groups
from txn_wire.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType
from txn_wire.admin_acls import DESCRIBE_ACLS, whole_request_error
from txn_wire.authorize_configs import alter_configs
from txn_wire.authorize_scram import alter_user_scram_credentials, describe_user_scram_credentials
from txn_wire.codec import Plain, Request
from txn_wire.guard import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    OPERATION_NOT_ATTEMPTED,
    TOPIC_ACCESS,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    Check,
    Guard,
    TopicAccess,
    only_described,
    split_topics,
    topic_rule,
)

_TOPIC, _GROUP, _TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
_READ, _WRITE, _DESCRIBE = Operation.READ, Operation.WRITE, Operation.DESCRIBE


def authorize(authorizer: Authorizer, principal: str, request: Request) -> Guard:
    """Check ``request`` (an API this server serves) for ``principal``."""
    check = Check(authorizer, principal, request)
    rule = RULES.get(request.api_key)
    return rule(check) if rule is not None else Guard(request)


# --- topics ------------------------------------------------------------------------------------


def _produce(check: Check) -> Guard:
    """B-19: Write on the transactional id first, then Write on each topic."""
    transactional_id = check.body.get("transactional_id")
    acks_zero = check.body["acks"] == 0
    if transactional_id and not check.allows(_TXN, transactional_id, _WRITE):
        refused = [
            _produce_refusal(t, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            for t in check.body["topic_data"]
        ]
        return check.refuse(None if acks_zero else {"responses": refused})
    return topic_rule(
        TopicAccess(_WRITE, check).handed_to(check),  # auto-creation asks for Create
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


def _fetch(check: Check) -> Guard:
    return topic_rule(
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


def _list_offsets(check: Check) -> Guard:
    return topic_rule(
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


def _metadata(check: Check) -> Guard:
    """Asked topics without Describe are refused (and never auto-created), and a topic that
    does not exist is auto-created only with Create on the cluster or the topic (else
    TOPIC_AUTHORIZATION_FAILED, ``metadata``); a request for all topics lists only those the
    principal may describe. The authorized operations asked for
    are the principal's, for the topics listed (a refused one keeps the field's default)."""
    check = TopicAccess(_DESCRIBE, check).handed_to(check)  # auto-creation asks for Create
    operations = _authorized_operations(check)
    if check.body.get("topics") is None:
        return Guard(check.request, merge=lambda answer: operations(only_described(check, answer)))
    allowed, denied = split_topics(check, check.body["topics"], "name", _DESCRIBE)
    refused = [{"error_code": TOPIC_AUTHORIZATION_FAILED, "name": t["name"]} for t in denied]

    def merge(answer: Plain | None) -> Plain | None:
        answer = operations(answer)
        return None if answer is None else {**answer, "topics": answer["topics"] + refused}

    if not denied:
        return Guard(check.request, merge=operations)
    return check.narrowed(merge, topics=allowed)


def _authorized_operations(check: Check) -> Callable[[Plain | None], Plain | None]:
    """Metadata's authorized-operations fields as Kafka's ``handleTopicMetadataRequest`` sets
    them when asked: each topic's bit field (v8+); the cluster's (v8-10), 0 without Describe
    on the cluster. The handler answers every operation, as a server without ACLs does."""
    version, body = check.request.api_version, check.body
    topics = version >= 8 and bool(body.get("include_topic_authorized_operations"))
    cluster = 8 <= version <= 10 and bool(body.get("include_cluster_authorized_operations"))

    def bit_field(resource: ResourceType, name: str) -> int:
        return check.authorizer.authorized_operations(check.principal, resource, name)

    def merge(answer: Plain | None) -> Plain | None:
        if answer is None or not (topics or cluster):
            return answer
        answer = dict(answer)
        if topics:
            answer["topics"] = [
                {**t, "topic_authorized_operations": bit_field(_TOPIC, t["name"])}
                for t in answer["topics"]
            ]
        if cluster:
            described = check.allows(ResourceType.CLUSTER, CLUSTER_NAME, _DESCRIBE)
            cluster_bits = bit_field(ResourceType.CLUSTER, CLUSTER_NAME) if described else 0
            answer["cluster_authorized_operations"] = cluster_bits
        return answer

    return merge


# --- transactions (C-31) -----------------------------------------------------------------------


def _init_producer_id(check: Check) -> Guard:
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


def _add_partitions_to_txn(check: Check) -> Guard:
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


def _add_offsets_to_txn(check: Check) -> Guard:
    if not check.allows(_TXN, check.body["transactional_id"], _WRITE):
        return check.refuse({"error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    if not check.allows(_GROUP, check.body["group_id"], _READ):
        return check.refuse({"error_code": GROUP_AUTHORIZATION_FAILED})
    return Guard(check.request)


def _end_txn(check: Check) -> Guard:
    if check.allows(_TXN, check.body["transactional_id"], _WRITE):
        return Guard(check.request)
    return check.refuse({"error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED})


# --- topic administration ---------------------------------------------------------------------


def _create_topics(check: Check) -> Guard:
    if check.allows(ResourceType.CLUSTER, CLUSTER_NAME, Operation.CREATE):
        return Guard(check.request)
    return topic_rule(
        check,
        topics_key="topics",
        name_key="name",
        operation=Operation.CREATE,
        answer_key="topics",
        refusal=lambda t: {
            "name": t["name"],
            "error_code": TOPIC_AUTHORIZATION_FAILED,
            "error_message": f"not authorized to create topic {t['name']!r}",
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": None,
        },
        empty={},
    )


def _describe_configs(check: Check) -> Guard:
    def allowed(resource: Plain) -> bool:
        if resource["resource_type"] == 2:
            return check.allows(_TOPIC, resource["resource_name"], Operation.DESCRIBE_CONFIGS)
        return check.allows(ResourceType.CLUSTER, CLUSTER_NAME, Operation.DESCRIBE_CONFIGS)

    resources = check.body.get("resources") or []
    denied = [r for r in resources if not allowed(r)]
    if not denied:
        return Guard(check.request)
    refused = [
        {
            "resource_type": r["resource_type"],
            "resource_name": r["resource_name"],
            "error_code": (
                TOPIC_AUTHORIZATION_FAILED
                if r["resource_type"] == 2
                else CLUSTER_AUTHORIZATION_FAILED
            ),
            "error_message": "not authorized",
            "configs": [],
        }
        for r in denied
    ]

    def merge(answer: Plain | None) -> Plain | None:
        return None if answer is None else {**answer, "results": answer["results"] + refused}

    return check.narrowed(merge, resources=[r for r in resources if allowed(r)])


def _delete_topics(check: Check) -> Guard:
    """Delete on the cluster allows every topic (Kafka's ``ControllerApis.deleteTopics``);
    otherwise the handler applies Describe and Delete on each topic once it knows it."""
    if check.allows(ResourceType.CLUSTER, CLUSTER_NAME, Operation.DELETE):
        return Guard(check.request)
    access = TopicAccess(Operation.DELETE, check)
    return check.narrowed(lambda answer: answer, **{TOPIC_ACCESS: access})


def _delete_records(check: Check) -> Guard:
    """Delete on each topic (Kafka's ``handleDeleteRecordsRequest``); a refused topic's
    partitions are answered with low watermark -1."""
    return topic_rule(
        check,
        topics_key="topics",
        name_key="name",
        operation=Operation.DELETE,
        answer_key="topics",
        refusal=lambda t: {
            "name": t["name"],
            "partitions": [
                {
                    "partition_index": p["partition_index"],
                    "low_watermark": -1,
                    "error_code": TOPIC_AUTHORIZATION_FAILED,
                }
                for p in t["partitions"] or []
            ],
        },
        empty={},
    )


def _create_partitions(check: Check) -> Guard:
    """Alter on each topic; a name given twice is left to the handler, which answers it
    INVALID_REQUEST (Kafka's ``ControllerApis.createPartitions`` does, before authorizing)."""
    topics = check.body.get("topics") or []
    counts = Counter(t["name"] for t in topics)

    def allowed(topic: Plain) -> bool:
        return counts[topic["name"]] > 1 or check.allows(_TOPIC, topic["name"], Operation.ALTER)

    denied = [t for t in topics if not allowed(t)]
    if not denied:
        return Guard(check.request)
    refused = [
        {
            "name": t["name"],
            "error_code": TOPIC_AUTHORIZATION_FAILED,
            "error_message": f"not authorized to alter topic {t['name']!r}",
        }
        for t in denied
    ]
    if len(denied) == len(topics):
        return check.refuse({"results": refused})

    def merge(answer: Plain | None) -> Plain | None:
        return None if answer is None else {**answer, "results": answer["results"] + refused}

    return check.narrowed(merge, topics=[t for t in topics if allowed(t)])


# --- ACL administration -----------------------------------------------------------------------


def _acl_admin(check: Check) -> Guard:
    """Describe on the cluster for DescribeAcls, Alter for CreateAcls and DeleteAcls (Kafka's
    ``AclApis``: ``authorizeClusterOperation``); a refusal answers the whole request."""
    describe = check.request.api_key == DESCRIBE_ACLS
    operation = Operation.DESCRIBE if describe else Operation.ALTER
    if check.allows(ResourceType.CLUSTER, CLUSTER_NAME, operation):
        return Guard(check.request)
    api = "DescribeAcls" if describe else "CreateAcls and DeleteAcls"
    message = f"not authorized: {api} need {operation.value} on the cluster ({CLUSTER_NAME})"
    return check.refuse(whole_request_error(check.request, CLUSTER_AUTHORIZATION_FAILED, message))


RULES: dict[int, Callable[[Check], Guard]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: groups.offset_commit,
    9: groups.offset_fetch,
    10: groups.find_coordinator,
    11: groups.member_rule(
        lambda body: {
            "generation_id": -1,
            "protocol_name": "",
            "leader": "",
            "member_id": body["member_id"],
            "members": [],
        }
    ),
    12: groups.member_rule(lambda body: {}),
    13: groups.member_rule(lambda body: {"members": []}),
    14: groups.member_rule(lambda body: {"assignment": b""}),
    15: groups.describe_groups,
    16: groups.list_groups,
    22: _init_producer_id,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _end_txn,
    28: lambda check: groups.offset_commit(check, transactional=True),
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    29: _acl_admin,
    30: _acl_admin,
    31: _acl_admin,
    32: _describe_configs,
    33: alter_configs,
    37: _create_partitions,
    42: groups.delete_groups,
    44: alter_configs,
    47: groups.offset_delete,
    50: describe_user_scram_credentials,
    51: alter_user_scram_credentials,
}
"""api key → its rule; ApiVersions and the SASL APIs need no authorization."""
