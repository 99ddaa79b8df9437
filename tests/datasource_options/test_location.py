"""Exactly one of ``path`` or ``kafka.bootstrap.servers`` says where a source or sink works
(issue 16 item 1); every other ``kafka.*`` option goes to the Kafka client, as in Spark's Kafka
connector."""

from __future__ import annotations

from pathlib import Path

import pytest

from datasource_options.location import KafkaCluster, parse_location
from datasource_options.parsing import normalize_options
from txn_log.errors import ConfigError

USAGE = ".load(path)"


def test_a_path_alone_is_a_log_directory(tmp_path: Path) -> None:
    assert parse_location({"path": str(tmp_path)}, usage=USAGE) == str(tmp_path.resolve())


def test_bootstrap_servers_alone_is_a_cluster_with_every_kafka_setting() -> None:
    given = {
        "kafka.bootstrap.servers": " a:9092, b:9093 ",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.client.id": "etl",
    }
    cluster = parse_location(given, usage=USAGE)
    assert cluster == KafkaCluster(
        "a:9092,b:9093",
        (
            ("bootstrap.servers", "a:9092, b:9093"),
            ("client.id", "etl"),
            ("security.protocol", "SASL_PLAINTEXT"),
        ),
    )
    assert isinstance(cluster, KafkaCluster)
    config = cluster.client_config(isolation_level="read_committed", enable_auto_commit=False)
    assert config["security.protocol"] == "SASL_PLAINTEXT"
    assert config["isolation.level"] == "read_committed"
    assert config["enable.auto.commit"] is False


def test_the_connector_default_settings_yield_to_the_users() -> None:
    defaults = KafkaCluster.at("h:1").client_config()
    assert defaults["reconnect.backoff.ms"] == "10"  # CLIENT_DEFAULTS
    cluster = parse_location(
        {"kafka.bootstrap.servers": "h:1", "kafka.reconnect.backoff.ms": "250"}, usage=USAGE
    )
    assert isinstance(cluster, KafkaCluster)
    assert cluster.client_config()["reconnect.backoff.ms"] == "250"


def test_both_or_neither_is_refused_naming_both_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'path'.*'kafka.bootstrap.servers'.*exactly one"):
        parse_location({"path": str(tmp_path), "kafka.bootstrap.servers": "h:1"}, usage=USAGE)
    with pytest.raises(ConfigError, match="option 'path' is required"):
        parse_location({}, usage=USAGE)


@pytest.mark.parametrize("servers", ["", "host", "host:", ":9092", "h:0", "h:65536", "h:x", "a:1,"])
def test_a_malformed_bootstrap_list_is_refused(servers: str) -> None:
    with pytest.raises(ConfigError, match=r"'kafka.bootstrap.servers' must be .*host:port"):
        parse_location({"kafka.bootstrap.servers": servers}, usage=USAGE)


def test_a_refused_kafka_option_names_what_to_use_instead() -> None:
    refused = {"kafka.auto.offset.reset": "use startingOffsets"}
    given = {"kafka.bootstrap.servers": "h:1", "kafka.auto.offset.reset": "latest"}
    with pytest.raises(ConfigError, match=r"'kafka.auto.offset.reset'.*use startingOffsets"):
        parse_location(given, usage=USAGE, refused=refused)


def test_kafka_settings_for_a_log_directory_are_refused_not_ignored(tmp_path: Path) -> None:
    given = {"path": str(tmp_path), "kafka.security.protocol": "SSL"}
    with pytest.raises(ConfigError, match=r"'kafka.security.protocol'.*does not use"):
        parse_location(given, usage=USAGE)
    allowed = {"path": str(tmp_path), "kafka.isolation.level": "read_committed"}
    assert parse_location(allowed, usage=USAGE, also_for_path=("kafka.isolation.level",))


def test_kafka_options_pass_the_unknown_option_check_only_with_the_prefix() -> None:
    given = {"Path": "/x", "KAFKA.Client.Id": "c"}
    assert normalize_options(given, ("path",), role="source", prefix="kafka.") == {
        "path": "/x",
        "kafka.client.id": "c",
    }
    with pytest.raises(ConfigError, match=r"kafka\.<name>"):
        normalize_options({"kafak.client.id": "c"}, ("path",), role="source", prefix="kafka.")
