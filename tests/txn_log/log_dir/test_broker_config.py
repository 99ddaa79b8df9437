"""The log's dynamic broker configs in the engine (``log_dir.broker_config``): Kafka's
AlterConfigs / IncrementalAlterConfigs of a BROKER resource, per broker ("0") and as the
cluster-wide default (""), resolved as Kafka resolves them; refusals in Kafka's words naming
the key, writing nothing (STYLE 3); ``log.cleanup.policy`` applied as the cleanup.policy of
the topics that do not set their own, internal topics aside. The processes' side is
``tests/txn_log/processes/test_config_alter_processes.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import directory_bytes
from txn_log.errors import ConfigError, InvalidConfigError
from txn_log.log import Log
from txn_log.log_dir.alter_configs import AlterConfigOp, OpType
from txn_log.log_dir.broker_config import (
    CLUSTER_DEFAULT,
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    FILE_NAME,
    THIS_BROKER,
)
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC
from txn_log.topic_partition import TopicPartition

SET, DELETE, APPEND, SUBTRACT = OpType.SET, OpType.DELETE, OpType.APPEND, OpType.SUBTRACT
POLICY, THREADS, RELOGIN = (
    "log.cleanup.policy",
    "background.threads",
    "sasl.kerberos.min.time.before.relogin",
)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log", housekeeping_interval_ms=None)
    log.create_topic("plain", 1)
    log.create_topic("own", 1, {"cleanup.policy": "delete"})
    return log


def op(key: str, op_type: OpType = SET, value: str | None = None) -> AlterConfigOp:
    return AlterConfigOp(key, op_type, value)


def test_the_three_keys_resolve_per_broker_then_cluster_default_then_kafkas_default(
    log: Log,
) -> None:
    """0081's operations, each answered as Kafka's dynamic broker config answers them."""
    config = log.broker_configs.current()
    assert config.value(THREADS) == ("10", DEFAULT_CONFIG)
    assert config.value(RELOGIN) == ("60000", DEFAULT_CONFIG)
    assert config.value(POLICY) == ("delete", DEFAULT_CONFIG)
    log.broker_configs.alter(THIS_BROKER, [op(THREADS, SET, "9"), op(POLICY, APPEND, "compact")])
    log.broker_configs.alter(THIS_BROKER, [op(RELOGIN, SET, "58000")])
    log.broker_configs.alter(CLUSTER_DEFAULT, [op(THREADS, SET, "4")])
    config = log.broker_configs.current()
    assert config.value(THREADS) == ("9", DYNAMIC_BROKER_CONFIG)
    assert config.value(POLICY) == ("compact,delete", DYNAMIC_BROKER_CONFIG)
    assert config.value(RELOGIN) == ("58000", DYNAMIC_BROKER_CONFIG)
    log.broker_configs.alter(
        THIS_BROKER, [op(THREADS, DELETE, ""), op(POLICY, SUBTRACT, "compact")]
    )
    config = Log.open(log.path, read_only=True).broker_configs.current()  # another process's view
    assert config.value(THREADS) == ("4", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert config.value(POLICY) == ("delete", DYNAMIC_BROKER_CONFIG)
    document = json.loads((log.path / FILE_NAME).read_text())
    assert document == {
        "format_version": 1,
        "configs": {
            "": {THREADS: "4"},
            "0": {POLICY: "delete", RELOGIN: "58000"},
        },
    }
    replaced = log.broker_configs.alter(THIS_BROKER, [op(THREADS, SET, "2")], replace=True)
    assert replaced.configs == {"": {THREADS: "4"}, "0": {THREADS: "2"}}  # AlterConfigs


@pytest.mark.parametrize(
    ("resource", "ops", "message"),
    [
        ("0", [op("log.retention.ms", SET, "1")], "Cannot update these configs dynamically: 'log"),
        ("0", [op("broker.id", SET, "1")], "Cannot update these configs dynamically: 'broker.id'"),
        ("0", [op(THREADS, SET, "0")], "Invalid value '0' for configuration background.threads"),
        ("0", [op(THREADS, SET, "nine")], "background.threads: Not a number of type INT"),
        ("0", [op(THREADS, SET, str(2**31))], "background.threads: Not a number of type INT"),
        ("0", [op(RELOGIN, SET, "soon")], "relogin: Not a number of type LONG"),
        ("0", [op(POLICY, SET, "forever")], "log.cleanup.policy: String must be one of"),
        ("0", [op(POLICY, SUBTRACT, "delete")], "log.cleanup.policy: String must be one of"),
        ("0", [op(THREADS, APPEND, "1")], "Config value append is not allowed for config key"),
        ("0", [op(THREADS, SET, "1"), op(THREADS, DELETE)], "duplicate config keys"),
        ("0", [op(THREADS, SET, None)], "Null value not supported"),
        ("", [op(RELOGIN, SET, "58000")], "at default cluster level, broker id must be specified"),
        ("7", [op(THREADS, SET, "9")], "only the cluster default ('') and broker 0"),
    ],
)
def test_refusals_name_the_key_in_kafkas_words_and_write_nothing(
    log: Log, resource: str, ops: list[AlterConfigOp], message: str
) -> None:
    log.broker_configs.alter(THIS_BROKER, [op(THREADS, SET, "3")])
    before = directory_bytes(log.path, content_only=True)
    with pytest.raises(InvalidConfigError) as refused:
        log.broker_configs.alter(resource, ops)
    assert message in str(refused.value)
    assert len(str(refused.value)) < 1000
    assert directory_bytes(log.path, content_only=True) == before
    assert log.broker_configs.current().value(THREADS) == ("3", DYNAMIC_BROKER_CONFIG)


def test_validate_only_checks_and_writes_nothing_and_a_read_only_log_refuses(log: Log) -> None:
    before = directory_bytes(log.path, content_only=True)
    checked = log.broker_configs.alter(THIS_BROKER, [op(THREADS, SET, "9")], validate_only=True)
    assert checked.value(THREADS) == ("9", DYNAMIC_BROKER_CONFIG)
    assert directory_bytes(log.path, content_only=True) == before
    with pytest.raises(ConfigError, match="read-only"):
        Log.open(log.path, read_only=True).broker_configs.alter(THIS_BROKER, [op(THREADS)])


def test_log_cleanup_policy_is_the_policy_of_topics_without_their_own(log: Log) -> None:
    """As in Kafka: a topic that sets cleanup.policy keeps it; the others take the broker's,
    per broker over the cluster default; the internal topics stay compact; deleting the
    dynamic values gives the others back Kafka's default, delete."""
    log.broker_configs.alter(CLUSTER_DEFAULT, [op(POLICY, SET, "compact")])
    assert log.topic_config("plain").cleanup_policy == "compact"
    assert log.topic_config("own").cleanup_policy == "delete"
    log.broker_configs.alter(THIS_BROKER, [op(POLICY, SET, "compact,delete")])
    assert log.topic_config("plain").cleanup_policy == "compact,delete"
    log.create_topic("later", 1)  # created while it is set: takes it, as Kafka's topics do
    assert log.topic_config("later").cleanup_policy == "compact,delete"
    assert log.topic_config(CONSUMER_OFFSETS_TOPIC).cleanup_policy == "compact"
    with Log.open(log.path, housekeeping_interval_ms=None) as elsewhere:  # another process
        assert elsewhere.topic_config("plain").cleanup_policy == "compact,delete"
        assert elsewhere.topic_config(CONSUMER_OFFSETS_TOPIC).cleanup_policy == "compact"
    # a topic alteration that returns the key to its default hands it back to the broker's
    log.incremental_alter_topic_config("own", [op("cleanup.policy", DELETE)])
    assert log.topic_config("own").cleanup_policy == "compact,delete"
    log.broker_configs.alter(THIS_BROKER, [op(POLICY, DELETE)])
    log.broker_configs.alter(CLUSTER_DEFAULT, [op(POLICY, DELETE)])
    assert log.topic_config("plain").cleanup_policy == "delete"
    assert log.topic_config("later").cleanup_policy == "delete"


def test_a_file_that_is_no_broker_config_is_refused_naming_it(log: Log) -> None:
    """The file is only ever replaced whole, validated; one that does not parse (edited by
    hand) is refused wherever a broker default is looked for, never guessed at. The internal
    topics never look, so the coordinators go on."""
    (log.path / FILE_NAME).write_text('{"format_version": 7}')
    fresh = Log.open(log.path, housekeeping_interval_ms=None)
    with pytest.raises(ConfigError, match=r"broker-config\.json: not a broker config file"):
        fresh.broker_configs.current()
    with pytest.raises(ConfigError, match="restore it or delete it"):
        fresh.topic_config("plain")
    fresh.group_offsets.commit("g", {TopicPartition("plain", 0): 1})  # __consumer_offsets
    assert fresh.topic_config(CONSUMER_OFFSETS_TOPIC).cleanup_policy == "compact"
    (log.path / FILE_NAME).unlink()
    assert fresh.topic_config("plain").cleanup_policy == "delete"
    fresh.close()
