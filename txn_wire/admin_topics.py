"""CreateTopics (19), DeleteTopics (20) and DescribeConfigs (32): what an AdminClient needs to
create a topic, read its limits (DESIGN §5: the sink's ``createTopic`` and ledger topic, its
``max.message.bytes``) and delete it.

CreateTopics, per topic, as Kafka's ``ZkAdminManager.createTopics`` answers:

    name not legal (Kafka's rule)               INVALID_TOPIC_EXCEPTION (17)
    the same name twice in one request          INVALID_REQUEST (42), for each copy
    topic exists                                TOPIC_ALREADY_EXISTS (36)
    num_partitions < 1 (-1: the server default)  INVALID_PARTITIONS (37)
    replication_factor > 1 (-1: the default)    INVALID_REPLICATION_FACTOR (38): one broker
    replica assignments beside num_partitions   INVALID_REQUEST (42)
      or replication_factor (not -1)
    replica assignments naming another broker   INVALID_REPLICA_ASSIGNMENT (39)
      than this one (0), a broker twice, none,
      or partition ids not 0..n-1
    an unknown config or a bad value            INVALID_CONFIG (40)

A replica assignment that places each partition on this broker alone creates that many
partitions, as Kafka's ``ReplicationControlManager`` would on a one-broker cluster.
Everything is validated before the topic is written (``Log.create_topic``), so a refused topic
leaves nothing behind; ``validate_only`` validates and creates nothing. A topic created
concurrently by another peer of the directory is TOPIC_ALREADY_EXISTS, as in Kafka.

DeleteTopics (v1-v6; v6 may name a topic by its id), per topic, in the order Kafka's
``ControllerApis.deleteTopics`` decides, ACLs from the rule (``guard.TopicAccess``):

    a name, or an id, given twice in one request INVALID_REQUEST (42), once
    v6: neither a name nor an id, or both          INVALID_REQUEST (42)
    an id no topic has                              UNKNOWN_TOPIC_ID (100)
    an id whose topic the principal may not delete  TOPIC_AUTHORIZATION_FAILED (29), without
                                                    its name unless it may describe it
    a name the principal may not describe           TOPIC_AUTHORIZATION_FAILED (29)
    a name no topic has                             UNKNOWN_TOPIC_OR_PARTITION (3)
    a name the principal may not delete             TOPIC_AUTHORIZATION_FAILED (29)
    a name that is also given by its id             INVALID_REQUEST (42)
    internal topics                                 INVALID_TOPIC_EXCEPTION (17): the engine
                                                    keeps them (a Kafka broker would delete)
    a topic an open transaction has written to      CONCURRENT_TRANSACTIONS (51), retriable

then ``Log.delete_topic`` per topic (by id: only the topic of that id, so a name deleted and
re-created by another peer meanwhile is not deleted: UNKNOWN_TOPIC_ID). The deletion is done
when the answer goes out, so any ``timeout_ms`` is met and none is waited for; throttle 0.

DescribeConfigs answers topic resources (type 2) from the topic's ``TopicConfig`` as its file
says now (every key, or the keys asked for; source DYNAMIC_TOPIC_CONFIG for the keys set at
creation or altered since, ``Log.topic_config_overrides``, DYNAMIC_BROKER_CONFIG or
DYNAMIC_DEFAULT_BROKER_CONFIG for a key taken from a dynamic broker default, else
DEFAULT_CONFIG; AlterConfigs and IncrementalAlterConfigs: ``admin_configs``); a broker resource
(type 4) with the log's dynamic broker configs (``broker_configs``); an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION (3), another resource type INVALID_REQUEST (42). CreateTopics
answers a new topic's configs likewise (v5+). Thread-safe: runs on worker threads like every
blocking handler.
"""

from __future__ import annotations

import base64
import uuid
from collections import Counter
from typing import Any

from txn_log.errors import TopicAlreadyExistsError, TxnLogError
from txn_log.log_dir.broker_config import topic_key_sources
from txn_log.log_dir.log_manager import LogManager
from txn_log.topic_config import TopicConfig, config_value_text, validate_topic_name
from txn_wire import broker_configs
from txn_wire.acl import Operation
from txn_wire.broker import BROKER_ID, UNKNOWN_TOPIC_OR_PARTITION, Broker, error_code
from txn_wire.codec import Plain, Request
from txn_wire.guard import TOPIC_AUTHORIZATION_FAILED, topic_access
from txn_wire.metadata import kafka_topic_id

CREATE_TOPICS = 19
DELETE_TOPICS = 20
DESCRIBE_CONFIGS = 32
UNKNOWN_TOPIC_ID = 100
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
DEFAULT_CONFIG = 5
_CONFIG_TYPES = {bool: 1, str: 2, int: 5, float: 6}  # Kafka's ConfigType: BOOLEAN .. DOUBLE
_NIL = uuid.UUID(int=0)  # no topic id: a topic named by its name
_DENIED = "not authorized"
_TWICE = "named more than once in the request"


def handle_create_topics(broker: Broker, request: Request) -> Plain:
    body = request.body
    topics = body.get("topics") or []
    counts = Counter(topic["name"] for topic in topics)
    validate_only = bool(body.get("validate_only", False))
    return {"topics": [_create(broker, t, counts[t["name"]] > 1, validate_only) for t in topics]}


def _create(broker: Broker, topic: Plain, duplicate: bool, validate_only: bool) -> Plain:
    name = topic["name"]
    partitions = topic.get("num_partitions", -1)
    partitions = broker.config.default_partitions if partitions == -1 else partitions
    replication = topic.get("replication_factor", -1)
    configs = {c["name"]: c["value"] for c in topic.get("configs") or []}
    result = {"name": name, "num_partitions": -1, "replication_factor": -1, "configs": None}
    try:
        if duplicate:
            return _refused(result, INVALID_REQUEST, f"topic {name!r} appears twice")
        validate_topic_name(name)
        if topic.get("assignments"):
            if topic.get("num_partitions", -1) != -1 or replication != -1:
                return _refused(
                    result,
                    INVALID_REQUEST,
                    "a replica assignment was given, so num_partitions and "
                    "replication_factor must both be -1",
                )
            placed = _assigned_partitions(topic["assignments"])
            if isinstance(placed, str):
                return _refused(result, INVALID_REPLICA_ASSIGNMENT, placed)
            partitions = placed
        if replication not in (-1, 1):
            return _refused(
                result,
                INVALID_REPLICATION_FACTOR,
                f"replication factor {replication} is larger than the 1 available broker",
            )
        LogManager.validate_partition_count(name, partitions)  # validate_only too
        config = TopicConfig.from_mapping(configs)
        defaults = broker.log.broker_configs.current().topic_defaults(name)
        taken = {key: value for key, (value, _) in defaults.items() if key not in configs}
        config = TopicConfig.from_mapping({**config.to_mapping(), **taken})
        if name in broker.log.topics(include_internal=True):
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if not validate_only:
            broker.log.create_topic(name, partitions, configs)
    except TxnLogError as error:
        return _refused(result, error_code(error, CREATE_TOPICS), str(error))
    return {
        **result,
        "error_code": 0,
        "error_message": None,
        "num_partitions": partitions,
        "replication_factor": 1,
        "configs": [
            _config_entry(key, entry)
            for key, entry in _values(broker, name, config, frozenset(configs)).items()
        ],
    }


def handle_delete_topics(broker: Broker, request: Request) -> Plain:
    access = topic_access(request, Operation.DELETE)
    if request.api_version < 6:
        asked = [(name, _NIL) for name in request.body.get("topic_names") or []]
    else:
        asked = [(t.get("name"), t.get("topic_id") or _NIL) for t in request.body["topics"]]
    results, names, ids = _distinct(asked)
    by_id = _names_of(broker, ids)
    deletions: dict[str, uuid.UUID] = {}  # name → the id it was named by (nil: by name)
    for topic_id in ids:
        name = by_id.get(topic_id)
        if name is None:
            results.append(_deleted(None, topic_id, UNKNOWN_TOPIC_ID, "no topic has this id"))
        elif not access.allows(name):
            shown = name if access.describes(name) else None
            results.append(_deleted(shown, topic_id, TOPIC_AUTHORIZATION_FAILED, _DENIED))
        else:
            deletions[name] = topic_id
    existing = set(broker.log.topics(include_internal=True))
    for name in names:
        if not access.describes(name) or (name in existing and not access.allows(name)):
            results.append(_deleted(name, _NIL, TOPIC_AUTHORIZATION_FAILED, _DENIED))
        elif name not in existing:
            results.append(_deleted(name, _NIL, UNKNOWN_TOPIC_OR_PARTITION, "no such topic"))
        elif name in deletions:
            topic_id = deletions.pop(name)
            message = f"topic {name!r} is named by its id {topic_id} as well"
            results.append(_deleted(name, topic_id, INVALID_REQUEST, message))
        else:
            deletions[name] = _NIL
    results += [_delete(broker, name, topic_id) for name, topic_id in deletions.items()]
    return {"responses": results}


def _distinct(
    asked: list[tuple[str | None, uuid.UUID]],
) -> tuple[list[Plain], list[str], list[uuid.UUID]]:
    """(refusals, names, ids): each topic named once, by its name or by its id; what is named
    twice, by neither or by both is refused INVALID_REQUEST, once."""
    refused = []
    names = Counter(name for name, topic_id in asked if name is not None and topic_id == _NIL)
    ids = Counter(topic_id for name, topic_id in asked if name is None and topic_id != _NIL)
    for name, topic_id in asked:
        if name is None and topic_id == _NIL:
            refused.append(_deleted(None, _NIL, INVALID_REQUEST, "neither a name nor an id"))
        elif name is not None and topic_id != _NIL:
            refused.append(_deleted(name, topic_id, INVALID_REQUEST, "both a name and an id"))
    refused += [_deleted(n, _NIL, INVALID_REQUEST, _TWICE) for n, c in names.items() if c > 1]
    refused += [_deleted(None, i, INVALID_REQUEST, _TWICE) for i, c in ids.items() if c > 1]
    return (
        refused,
        [name for name, count in names.items() if count == 1],
        [topic_id for topic_id, count in ids.items() if count == 1],
    )


def _names_of(broker: Broker, ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The name of the topic of each id that one has (read afresh: other peers create and
    delete topics)."""
    if not ids:
        return {}
    found = {}
    for name in broker.log.topics(include_internal=True):
        try:
            topic_id = kafka_topic_id(broker.log.topic_id(name))
        except TxnLogError:  # deleted meanwhile
            continue
        if topic_id in ids:
            found[topic_id] = name
    return found


def _delete(broker: Broker, name: str, named_by: uuid.UUID) -> Plain:
    """Delete one topic: by name, or (``named_by`` not nil) only the topic of that id."""
    try:
        if named_by == _NIL:
            topic_id = kafka_topic_id(broker.log.topic_id(name))
            broker.log.delete_topic(name)
        else:
            topic_id = named_by
            broker.log.delete_topic(name, topic_id=_engine_topic_id(named_by))
    except TxnLogError as error:
        return _deleted(name, named_by, error_code(error, DELETE_TOPICS), str(error))
    return _deleted(name, topic_id, 0, None)


def _engine_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def _deleted(name: str | None, topic_id: uuid.UUID, code: int, message: str | None) -> Plain:
    return {"name": name, "topic_id": topic_id, "error_code": code, "error_message": message}


def _assigned_partitions(assignments: list[Plain]) -> int | str:
    """The partition count of a replica assignment that fits this one broker, or why not."""
    indexes = sorted(a["partition_index"] for a in assignments)
    if indexes != list(range(len(indexes))):
        return f"partition ids {indexes} are not the consecutive 0-based sequence 0..n-1"
    for assignment in assignments:
        problem = replica_problem(assignment["partition_index"], list(assignment["broker_ids"]))
        if problem is not None:
            return problem
    return len(indexes)


def replica_problem(index: int, brokers: list[int]) -> str | None:
    """Why partition ``index`` cannot be placed on ``brokers`` here (None: it can): every
    partition has one replica, on this broker (CreateTopics and CreatePartitions)."""
    if not brokers:
        return f"partition {index} has an empty replica list"
    if len(set(brokers)) != len(brokers):
        return f"partition {index} lists a broker more than once: {brokers}"
    if brokers != [BROKER_ID]:
        return (
            f"partition {index} is placed on brokers {brokers}, but the only broker "
            f"registered is {BROKER_ID}"
        )
    return None


def _refused(result: Plain, code: int, message: str) -> Plain:
    return {**result, "error_code": code, "error_message": message}


def _values(
    broker: Broker, topic: str, config: TopicConfig, overrides: frozenset[str]
) -> dict[str, tuple[Any, int]]:
    """Kafka-named keys → (value, its ConfigSource id): the topic's own (DYNAMIC_TOPIC_CONFIG),
    a dynamic broker default's (``broker_configs``), or Kafka's default."""
    sources = topic_key_sources(topic, overrides, broker.log.broker_configs.current())
    return {
        key: (value, broker_configs.SOURCES[sources(key)])
        for key, value in config.to_mapping().items()
    }


def _config_entry(key: str, entry: tuple[Any, int]) -> Plain:
    value, source = entry
    return {
        "name": key,
        "value": config_value_text(value),
        "read_only": False,
        "config_source": source,
        "is_default": source == DEFAULT_CONFIG,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": _CONFIG_TYPES.get(type(value), 0),
        "documentation": None,
    }


def handle_describe_configs(broker: Broker, request: Request) -> Plain:
    synonyms = bool(request.body.get("include_synonyms"))
    docs = bool(request.body.get("include_documentation"))
    resources = request.body.get("resources") or []
    return {"results": [_describe(broker, r, synonyms, docs) for r in resources]}


def _describe(broker: Broker, resource: Plain, synonyms: bool, docs: bool) -> Plain:
    kind, name = resource["resource_type"], resource["resource_name"]
    result = {"resource_type": kind, "resource_name": name, "configs": []}
    if kind == BROKER_RESOURCE:
        return broker_configs.describe(broker, resource, synonyms=synonyms, documentation=docs)
    if kind != TOPIC_RESOURCE:
        return _refused(result, INVALID_REQUEST, f"resource type {kind} is not served")
    try:
        config = broker.log.topic_config(name)
        overrides = broker.log.topic_config_overrides(name)
    except TxnLogError as error:
        return _refused(result, error_code(error, DESCRIBE_CONFIGS), str(error))
    keys = resource.get("configuration_keys")
    values = _values(broker, name, config, overrides)
    chosen = values if keys is None else {k: values[k] for k in keys if k in values}
    return {
        **result,
        "error_code": 0,
        "error_message": None,
        "configs": [_config_entry(key, entry) for key, entry in chosen.items()],
    }
