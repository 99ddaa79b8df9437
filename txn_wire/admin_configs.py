"""AlterConfigs (33, v0-2) and IncrementalAlterConfigs (44, v0-1): an AdminClient changes a
topic's config (``Log.alter_topic_config`` / ``Log.incremental_alter_topic_config``, the same
engine operation as ``txnlog configs --alter``; DESIGN §1: decode → authorize → one engine call
→ encode), or the log's dynamic broker configs (a BROKER resource: ``broker_configs``).

Per resource, in the order Kafka answers (its broker's ``ConfigAdminManager.preprocess``, then
the controller's ``ControllerApis`` and ``ConfigurationControlManager``):

    the same (type, name) twice in one request   INVALID_REQUEST (42), each copy
    a config key twice in one resource           INVALID_REQUEST (42)
    a null value (AlterConfigs: any; Incremental INVALID_REQUEST (42), naming the keys
      : any but DELETE)
    an operation that is no SET/DELETE/APPEND/   INVALID_REQUEST (42)
      SUBTRACT (IncrementalAlterConfigs)
    a resource type other than TOPIC (2) and     INVALID_REQUEST (42): not served here (a
      BROKER (4)                                 GROUP resource, 32, included: Kafka below
                                                 4.0 has no group configs)
    BROKER named other than "" or "0"            INVALID_REQUEST (42), Kafka's words
    BROKER: a key that is not one of the log's   INVALID_REQUEST (42), naming the key
      dynamic broker configs, a bad value, ...   (``broker_configs``, Kafka's KAFKA-13609)
    ACL: AlterConfigs on the topic / cluster     TOPIC_AUTHORIZATION_FAILED (29) / CLUSTER_
                                                 AUTHORIZATION_FAILED (31) (``authorize``)
    TOPIC "" (the default topic resource)        INVALID_REQUEST (42)
    TOPIC name not legal                         INVALID_TOPIC_EXCEPTION (17)
    TOPIC unknown                                UNKNOWN_TOPIC_OR_PARTITION (3)
    an unknown key, a bad value, APPEND or       INVALID_CONFIG (40), naming the key and the
      SUBTRACT of a key that is no list, a key   valid values (the engine's message)
      of an internal topic the engine keeps

AlterConfigs replaces the topic's config (keys not given go back to their defaults);
IncrementalAlterConfigs changes only the keys named. ``validate_only`` checks everything and
writes nothing. The change is durable and applied by every peer of the log at its next
operation on the topic when the answer goes out; throttle 0. Thread-safe: runs on worker
threads.
"""

from __future__ import annotations

from collections import Counter

from txn_log.errors import TxnLogError
from txn_log.log_dir.alter_configs import AlterConfigOp, OpType
from txn_log.topic_config import shown_value
from txn_wire import broker_configs
from txn_wire.admin_topics import BROKER_RESOURCE, INVALID_REQUEST, TOPIC_RESOURCE
from txn_wire.broker import Broker, error_code
from txn_wire.codec import Plain, Request

ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44


def handle_alter_configs(broker: Broker, request: Request) -> Plain:
    return {"responses": _answers(broker, request, incremental=False)}


def handle_incremental_alter_configs(broker: Broker, request: Request) -> Plain:
    return {"responses": _answers(broker, request, incremental=True)}


def resource_key(resource: Plain) -> tuple[int, str]:
    return resource["resource_type"], resource["resource_name"]


def _answers(broker: Broker, request: Request, *, incremental: bool) -> list[Plain]:
    resources = request.body.get("resources") or []
    counts = Counter(resource_key(r) for r in resources)
    validate_only = bool(request.body.get("validate_only", False))
    answers = []
    for resource in resources:
        problem = request_problem(resource, counts, incremental=incremental)
        if problem is not None:
            answers.append(result(resource, INVALID_REQUEST, problem))
        elif resource["resource_type"] == BROKER_RESOURCE:
            code, message = broker_configs.alter(
                broker, resource, incremental=incremental, validate_only=validate_only
            )
            answers.append(result(resource, code, message))
        else:
            answers.append(_topic(broker, resource, incremental, validate_only, request.api_key))
    return answers


def request_problem(
    resource: Plain, counts: Counter[tuple[int, str]], *, incremental: bool
) -> str | None:
    """Why Kafka's broker answers ``resource`` INVALID_REQUEST before authorizing it or asking
    the controller (its ``ConfigAdminManager.preprocess``), or None. ``counts``: how often each
    (type, name) appears in the request."""
    if counts[resource_key(resource)] > 1:
        return "Each resource must appear at most once."
    configs = resource.get("configs") or []
    names = [config["name"] for config in configs]
    if len(set(names)) != len(names):
        return "Error due to duplicate config keys"
    nulls = [
        config["name"]
        for config in configs
        if config.get("value") is None
        and not (incremental and config.get("config_operation") == OpType.DELETE)
    ]
    if nulls:
        return "Null value not supported for : " + ", ".join(shown_value(name) for name in nulls)
    if incremental:
        unknown = [c["config_operation"] for c in configs if c["config_operation"] not in _OPS]
        if unknown:
            return f"Unknown operations type {unknown[0]}"
    if resource["resource_type"] not in (TOPIC_RESOURCE, BROKER_RESOURCE):
        return (
            f"Unknown resource type {resource['resource_type']}: txnlog serve alters the configs "
            f"of topics ({TOPIC_RESOURCE}) and brokers ({BROKER_RESOURCE}) only"
        )
    return None


_OPS = {op.value for op in OpType}


def _topic(
    broker: Broker, resource: Plain, incremental: bool, validate_only: bool, api_key: int
) -> Plain:
    name = resource["resource_name"]
    if not name:
        return result(resource, INVALID_REQUEST, "Default topic resources are not allowed.")
    configs = resource.get("configs") or []
    try:
        if incremental:
            ops = [
                AlterConfigOp(c["name"], OpType(c["config_operation"]), c["value"]) for c in configs
            ]
            broker.log.incremental_alter_topic_config(name, ops, validate_only=validate_only)
        else:
            values = {config["name"]: config["value"] for config in configs}
            broker.log.alter_topic_config(name, values, validate_only=validate_only)
    except TxnLogError as error:
        return result(resource, error_code(error, api_key), str(error))
    return result(resource, 0, None)


def result(resource: Plain, code: int, message: str | None) -> Plain:
    return {
        "resource_type": resource["resource_type"],
        "resource_name": resource["resource_name"],
        "error_code": code,
        "error_message": message,
    }
