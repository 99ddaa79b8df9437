"""Metadata and FindCoordinator: one broker, this server, leads every partition and
coordinates every group and transactional id (R-04).

Metadata lists the topics asked for (all of them, internal ones flagged ``is_internal``, when
the request's topic list is null); an unknown topic is UNKNOWN_TOPIC_OR_PARTITION (3) unless
auto-creation is configured and the request allows it. Leader epochs are -1 (unknown), where
the version has the field. The address advertised is the one the client reached.
"""

from __future__ import annotations

from typing import Any

from txn_wire.broker import BROKER_ID, UNKNOWN_TOPIC_OR_PARTITION, Broker
from txn_wire.codec import Plain, Request

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
    internal = set(log.topics(include_internal=True)) - set(log.topics())
    topics = []
    for name in names:
        exists = name in log.topics(include_internal=True) or (
            allow_create and broker.ensure_topic(name)
        )
        if not exists:
            topics.append({"error_code": UNKNOWN_TOPIC_OR_PARTITION, "name": name})
            continue
        topics.append(
            {
                "error_code": 0,
                "name": name,
                "is_internal": name in internal,
                "partitions": [_partition(tp.partition) for tp in log.partitions(name)],
            }
        )
    host, port = address
    return {
        "brokers": [{"node_id": BROKER_ID, "host": host, "port": port}],
        "cluster_id": CLUSTER_ID,
        "controller_id": BROKER_ID,
        "topics": topics,
    }


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
