"""Metadata and FindCoordinator: one broker, this server, leads every partition and
coordinates every group and transactional id (R-04).

Metadata lists the topics asked for (all of them, internal ones flagged ``is_internal``, when
the request's topic list is null); an unknown topic is UNKNOWN_TOPIC_OR_PARTITION (3) unless
auto-creation is configured and the request allows it, and a name Kafka's ``Topic.validate``
refuses is INVALID_TOPIC_EXCEPTION (17) either way, as ``KafkaApis.getTopicMetadata`` answers:
a client then fails that topic's messages at once instead of waiting for a topic that can
never exist. Leader epochs are -1 (unknown), where
the version has the field. The address advertised is the one the client reached. Each topic
carries its topic id (v10+, KIP-516: the engine's, in Kafka's form), so that a client can tell
a topic deleted and re-created under the same name from the one it knew (the Kafka-mode
Spark source checks it before and after a read).

Asked for authorized operations (v8+ ``include_topic_authorized_operations``, v8-10
``include_cluster_authorized_operations``), each topic listed and the cluster carry the bit
field of every operation Kafka reports on them (``acl.SUPPORTED_OPERATIONS``), as a Kafka
broker without an authorizer answers; with ACLs the Metadata rule puts the principal's in
(``authorize``). Not asked, the fields keep their default, INT32_MIN.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

from txn_log import TopicPartition
from txn_log.errors import InvalidTopicError, TxnLogError
from txn_log.topic_config import validate_topic_name
from txn_wire.acl import SUPPORTED_OPERATIONS, Operation, ResourceType, operations_bit_field
from txn_wire.broker import BROKER_ID, INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION, Broker
from txn_wire.codec import Plain, Request
from txn_wire.guard import TOPIC_AUTHORIZATION_FAILED, topic_access

CLUSTER_ID = "txnlog"
Address = tuple[str, int]


def handle_metadata(broker: Broker, request: Request, address: Address) -> Plain:
    body = request.body
    log = broker.log
    asked = body.get("topics")
    if asked is None:
        names = log.topics(include_internal=True)
    else:
        names = [topic["name"] for topic in asked]
    allow_create = body.get("allow_auto_topic_creation", True)
    access = topic_access(request, Operation.DESCRIBE)
    present = set(log.topics(include_internal=True))  # one listing a request, not one a name
    internal = present - set(log.topics())
    topics = []
    for name in names:
        exists = name in present
        if not exists:
            try:
                validate_topic_name(name)
            except InvalidTopicError:
                topics.append({"error_code": INVALID_TOPIC_EXCEPTION, "name": name})
                continue
            if allow_create and broker.config.auto_create_topics and not access.creates(name):
                topics.append({"error_code": TOPIC_AUTHORIZATION_FAILED, "name": name})
                continue  # Kafka's: auto-creation needs Create on the cluster or the topic
            exists = allow_create and broker.ensure_topic(name)
        if not exists:
            topics.append({"error_code": UNKNOWN_TOPIC_OR_PARTITION, "name": name})
            continue
        topics.append(
            {
                "error_code": 0,
                "name": name,
                "topic_id": _topic_id(broker, name),
                "is_internal": name in internal,
                "partitions": [_partition(tp.partition) for tp in log.partitions(name)],
            }
        )
    host, port = address
    answer = {
        "brokers": [{"node_id": BROKER_ID, "host": host, "port": port}],
        "cluster_id": CLUSTER_ID,
        "controller_id": BROKER_ID,
        "topics": topics,
    }
    return _with_every_operation(request, answer)


def _with_every_operation(request: Request, answer: Plain) -> Plain:
    """The authorized-operations fields asked for, each with every operation (no ACLs)."""
    version, body = request.api_version, request.body
    if version >= 8 and body.get("include_topic_authorized_operations"):
        every = operations_bit_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC])
        answer["topics"] = [{**t, "topic_authorized_operations": every} for t in answer["topics"]]
    if 8 <= version <= 10 and body.get("include_cluster_authorized_operations"):
        every = operations_bit_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])
        answer["cluster_authorized_operations"] = every
    return answer


def _topic_id(broker: Broker, name: str) -> uuid.UUID:
    """The topic's id as Kafka's clients read it (the nil UUID when the log has none for it,
    or the topic vanished meanwhile: "unknown" to a client)."""
    try:
        topic_id = broker.partition_reader(TopicPartition(name, 0)).topic_id
    except TxnLogError:
        return uuid.UUID(int=0)
    return kafka_topic_id(topic_id)


def kafka_topic_id(topic_id: str | None) -> uuid.UUID:
    """An engine topic id (Kafka's printed form: URL-safe base64 without padding) as the UUID
    the wire carries; the nil UUID for None (no id: "unknown" to a client)."""
    if topic_id is None:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def _partition(index: int) -> dict[str, Any]:
    return {
        "error_code": 0,
        "partition_index": index,
        "leader_id": BROKER_ID,
        "leader_epoch": -1,
        "replica_nodes": [BROKER_ID],
        "isr_nodes": [BROKER_ID],
        "offline_replicas": [],
    }


def handle_find_coordinator(broker: Broker, request: Request, address: Address) -> Plain:
    """This server, for groups (key type 0) and transactional ids (1) alike; v4 answers
    each of the batched keys."""
    host, port = address
    coordinator = {"node_id": BROKER_ID, "host": host, "port": port, "error_code": 0}
    if request.api_version >= 4:
        keys = request.body.get("coordinator_keys") or []
        return {"coordinators": [{"key": key, **coordinator} for key in keys]}
    return {**coordinator, "error_message": None}
