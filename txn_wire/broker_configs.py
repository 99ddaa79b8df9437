"""BROKER resources of AlterConfigs (33), IncrementalAlterConfigs (44) and DescribeConfigs
(32): the log's dynamic broker configs (``txn_log.log_dir.broker_config``, the store every
``txnlog serve`` of the log and ``txnlog configs --entity-type brokers`` share), answered as
Kafka's broker answers them.

A BROKER resource is broker 0 (named "0": every server of a log is broker 0) or the
cluster-wide default (named ""); another id, or a name that is no integer, is INVALID_REQUEST
in Kafka's words. A change is the engine's (``Log.broker_configs.alter``: AlterConfigs replaces
the resource's configs, IncrementalAlterConfigs changes the keys named), and every refusal of
it (an unknown key or one Kafka does not change dynamically, a per-broker key at the cluster
default, a bad value, APPEND to a key that is no list) is INVALID_REQUEST with the engine's
message naming the key: Kafka's broker validates dynamic broker configs before it forwards
them and answers every failure so (KAFKA-13609). ``validate_only`` writes nothing.

DescribeConfigs of broker 0 lists every dynamic broker key with its value and source
(DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG or DEFAULT_CONFIG), its synonyms in the
order Kafka resolves them (when asked) and its documentation (when asked: what the key does
here, or that it is accepted and not applied, and why); the cluster default lists the keys
set on it. Thread-safe: runs on worker threads like every blocking handler.
"""

from __future__ import annotations

from txn_log.errors import TxnLogError
from txn_log.log_dir.alter_configs import AlterConfigOp, OpType
from txn_log.log_dir.broker_config import (
    CLUSTER_DEFAULT,
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    THIS_BROKER,
    BrokerConfig,
)
from txn_log.log_dir.broker_config_keys import KEYS
from txn_log.topic_config import shown_value
from txn_wire.broker import BROKER_ID, Broker
from txn_wire.codec import Plain

INVALID_REQUEST = 42
SOURCES = {
    "DYNAMIC_TOPIC_CONFIG": 1,
    DYNAMIC_BROKER_CONFIG: 2,
    DYNAMIC_DEFAULT_BROKER_CONFIG: 3,
    DEFAULT_CONFIG: 5,
}
"""Kafka's ``ConfigSource`` ids (DescribeConfigs v1+) of the engine's source names."""


def resource_of(name: str) -> str:
    """The engine's resource for a BROKER resource name; ValueError in Kafka's words when it
    is neither this broker nor the cluster default."""
    if not name:
        return CLUSTER_DEFAULT
    try:
        node_id = int(name)
    except ValueError:  # not digits, or more of them than int() reads
        raise ValueError(f"Node id must be an integer, but it is: {shown_value(name)}") from None
    if node_id != BROKER_ID:
        raise ValueError(
            f"Unexpected broker id, expected {BROKER_ID}, but received {shown_value(name)}"
        )
    return THIS_BROKER


def alter(
    broker: Broker, resource: Plain, *, incremental: bool, validate_only: bool
) -> tuple[int, str | None]:
    """(error code, message) of one BROKER resource of AlterConfigs (``incremental`` False)
    or IncrementalAlterConfigs."""
    try:
        name = resource_of(resource["resource_name"])
    except ValueError as error:
        return INVALID_REQUEST, str(error)
    configs = resource.get("configs") or []
    ops = [
        AlterConfigOp(
            c["name"], OpType(c["config_operation"]) if incremental else OpType.SET, c["value"]
        )
        for c in configs
    ]
    try:
        broker.log.broker_configs.alter(
            name, ops, replace=not incremental, validate_only=validate_only
        )
    except TxnLogError as error:
        return INVALID_REQUEST, str(error)
    return 0, None


def describe(broker: Broker, resource: Plain, *, synonyms: bool, documentation: bool) -> Plain:
    """One BROKER resource of DescribeConfigs."""
    result = {
        "resource_type": resource["resource_type"],
        "resource_name": resource["resource_name"],
        "configs": [],
    }
    try:
        name = resource_of(resource["resource_name"])
        config = broker.log.broker_configs.current()
    except (ValueError, TxnLogError) as error:
        return {**result, "error_code": INVALID_REQUEST, "error_message": str(error)}
    keys = resource.get("configuration_keys")
    chosen = [key for key in sorted(KEYS) if keys is None or key in keys]
    if name == CLUSTER_DEFAULT:
        chosen = [key for key in chosen if key in config.configs.get(CLUSTER_DEFAULT, {})]
    entries = [_entry(config, key, name, synonyms, documentation) for key in chosen]
    return {**result, "error_code": 0, "error_message": None, "configs": entries}


def _entry(
    config: BrokerConfig, key: str, resource: str, synonyms: bool, documentation: bool
) -> Plain:
    definition = KEYS[key]
    if resource == CLUSTER_DEFAULT:
        value, source = config.configs[CLUSTER_DEFAULT][key], DYNAMIC_DEFAULT_BROKER_CONFIG
    else:
        value, source = config.value(key)
    return {
        "name": key,
        "value": value,
        "read_only": False,
        "config_source": SOURCES[source],
        "is_default": source == DEFAULT_CONFIG,
        "is_sensitive": False,
        "synonyms": _synonyms(config, key, resource) if synonyms else [],
        "config_type": definition.type.value,
        "documentation": definition.documentation if documentation else None,
    }


def _synonyms(config: BrokerConfig, key: str, resource: str) -> list[Plain]:
    """Every value ``key`` has, in the order Kafka resolves them (the first is in force)."""
    levels = [(CLUSTER_DEFAULT, DYNAMIC_DEFAULT_BROKER_CONFIG)]
    if resource == THIS_BROKER:
        levels.insert(0, (THIS_BROKER, DYNAMIC_BROKER_CONFIG))
    found = [
        {"name": key, "value": config.configs[level][key], "source": SOURCES[source]}
        for level, source in levels
        if key in config.configs.get(level, {})
    ]
    return [*found, {"name": key, "value": KEYS[key].default, "source": SOURCES[DEFAULT_CONFIG]}]
