"""AlterConfigs (33) and IncrementalAlterConfigs (44) against a real ``txnlog serve``, through
confluent-kafka's AdminClient and, for what it will not send (a resource twice, null values,
unknown operations and resource types, huge strings), the raw client: Kafka's codes per
resource, validate_only, DescribeConfigs reflecting the change with its source, the ACL rule
(AlterConfigs on the topic or the cluster), and a topic's ``compression.type`` applied to what
a confluent producer sends, transactions included. Every refusal leaves the log as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from tests.support import directory_bytes
from tests.txn_wire.auth_clients import admin_as, plain_login, serve_with_grants
from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_log.record.batch_header import Compression
from txn_log.topic_partition import TopicPartition as EngineTopicPartition

pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # on purpose
WAIT_S = 30
ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, API_VERSIONS = 33, 44, 18
UNKNOWN_TOPIC, INVALID_TOPIC, TOPIC_DENIED, CLUSTER_DENIED = 3, 17, 29, 31
INVALID_CONFIG, INVALID_REQUEST = 40, 42
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def admin(server: ServeProcess, **extra: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, **extra})


def outcomes(futures: dict[ConfigResource, Future[Any]]) -> dict[str, tuple[int, str]]:
    """resource name → (Kafka error code, its message), (0, "") when done."""
    answers = {}
    for resource, future in futures.items():
        try:
            future.result(WAIT_S)
            answers[resource.name] = (0, "")
        except KafkaException as error:
            answers[resource.name] = (error.args[0].code(), error.args[0].str())
    return answers


def codes(futures: dict[ConfigResource, Future[Any]]) -> dict[str, int]:
    return {name: code for name, (code, _) in outcomes(futures).items()}


def described(client: AdminClient, topic: str) -> dict[str, tuple[str, ConfigSource]]:
    """key → (value, source) as DescribeConfigs answers for ``topic``."""
    [future] = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {k: (e.value, ConfigSource(e.source)) for k, e in future.result(WAIT_S).items()}


def incremental(topic: str, *entries: tuple[str, str | None, AlterConfigOpType]) -> ConfigResource:
    return ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op) for key, value, op in entries
        ],
    )


def raw_alter(port: int, api: int, version: int, resources: list[Any], **extra: Any) -> Any:
    raw = RawClient(port)
    try:
        body = {"resources": resources, "validate_only": False, **extra}
        return raw.request(api, version, body)["responses"]
    finally:
        raw.close()


def resource(name: str, configs: list[dict[str, Any]], kind: int = TOPIC) -> dict[str, Any]:
    return {"resource_type": kind, "resource_name": name, "configs": configs}


# --- the two APIs through AdminClient ---------------------------------------------------------


def test_incremental_alter_configs_changes_only_the_keys_named_and_describe_shows_it(
    server: ServeProcess, log_dir: Path
) -> None:
    client = admin(server)
    assert described(client, "orders")["compression.type"] == (
        "producer",
        ConfigSource.DEFAULT_CONFIG,
    )
    altered = client.incremental_alter_configs(
        [
            incremental(
                "orders",
                ("compression.type", "zstd", AlterConfigOpType.SET),
                ("retention.ms", "60000", AlterConfigOpType.SET),
                ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
            )
        ]
    )
    assert codes(altered) == {"orders": 0}
    shown = described(client, "orders")
    dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert shown["compression.type"] == ("zstd", dynamic)
    assert shown["retention.ms"] == ("60000", dynamic)
    assert shown["cleanup.policy"] == ("compact,delete", dynamic)
    assert shown["segment.bytes"][1] == ConfigSource.DEFAULT_CONFIG
    back = incremental(
        "orders",
        ("retention.ms", None, AlterConfigOpType.DELETE),
        ("cleanup.policy", "compact", AlterConfigOpType.SUBTRACT),
    )
    assert codes(client.incremental_alter_configs([back])) == {"orders": 0}
    shown = described(client, "orders")
    assert shown["retention.ms"] == (str(7 * 24 * 3600 * 1000), ConfigSource.DEFAULT_CONFIG)
    assert shown["cleanup.policy"] == ("delete", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    with Log.open(log_dir, read_only=True) as log:
        assert log.topic_config("orders").compression_type == "zstd"


def test_alter_configs_replaces_the_config_and_validate_only_writes_nothing(
    server: ServeProcess, log_dir: Path
) -> None:
    client = admin(server)
    first = ConfigResource(ResourceType.TOPIC, "orders", set_config={"retention.ms": "5000"})
    assert codes(client.alter_configs([first])) == {"orders": 0}
    before = directory_bytes(log_dir, content_only=True)
    second = ConfigResource(ResourceType.TOPIC, "orders", set_config={"segment.ms": "70000"})
    assert codes(client.alter_configs([second], validate_only=True)) == {"orders": 0}
    assert directory_bytes(log_dir, content_only=True) == before
    assert codes(client.alter_configs([second])) == {"orders": 0}
    shown = described(client, "orders")
    assert shown["segment.ms"] == ("70000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert shown["retention.ms"][1] == ConfigSource.DEFAULT_CONFIG  # not given: back to default


def test_flush_keys_are_taken_validated_and_described_as_librdkafkas_0081_sets_them(
    server: ServeProcess, log_dir: Path
) -> None:
    """librdkafka's 0081 sets ``flush.ms`` beside ``compression.type``: taken (LONG, at least
    0; ``flush.messages`` at least 1), reported as set, and refused out of range naming the
    key. The engine syncs every append acknowledged as durable, and the others by these bounds
    (``storage.flush_policy``)."""
    client = admin(server)
    legacy = ConfigResource(
        ResourceType.TOPIC,
        "orders",
        set_config={"compression.type": "gzip", "flush.ms": "12345678"},
    )
    assert codes(client.alter_configs([legacy])) == {"orders": 0}
    more = incremental("orders", ("flush.messages", "10000", AlterConfigOpType.SET))
    assert codes(client.incremental_alter_configs([more])) == {"orders": 0}
    shown = described(client, "orders")
    dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert shown["flush.ms"] == ("12345678", dynamic)
    assert shown["flush.messages"] == ("10000", dynamic)
    before = directory_bytes(log_dir, content_only=True)
    for key, value in (("flush.ms", "-1"), ("flush.messages", "0")):
        bad = incremental("orders", (key, value, AlterConfigOpType.SET))
        [(code, message)] = outcomes(client.incremental_alter_configs([bad])).values()
        assert code == INVALID_CONFIG and f"for topic config '{key}'; the minimum" in message
    assert directory_bytes(log_dir, content_only=True) == before
    with Log.open(log_dir, read_only=True) as log:
        config = log.topic_config("orders")
    assert (config.flush_ms, config.flush_messages, config.compression_type) == (
        12345678,
        10000,
        "gzip",
    )


def test_bad_values_unknown_keys_and_unknown_topics_get_kafkas_codes_and_change_nothing(
    server: ServeProcess, log_dir: Path
) -> None:
    client = admin(server)
    with Log.open(log_dir) as log:
        log.create_topic("other", 1)
    before = directory_bytes(log_dir, content_only=True)
    answer = outcomes(
        client.incremental_alter_configs(
            [
                incremental("orders", ("compression.type", "brotli", AlterConfigOpType.SET)),
                incremental("other", ("retention.ms", "5", AlterConfigOpType.APPEND)),
                incremental("nowhere", ("retention.ms", "5", AlterConfigOpType.SET)),
                incremental(
                    "__consumer_offsets", ("cleanup.policy", "delete", AlterConfigOpType.SET)
                ),
            ]
        )
    )
    assert {name: code for name, (code, _) in answer.items()} == {
        "orders": INVALID_CONFIG,
        "other": INVALID_CONFIG,
        "nowhere": UNKNOWN_TOPIC,
        "__consumer_offsets": INVALID_CONFIG,
    }
    assert (
        "'compression.type'; valid values are uncompressed, zstd, lz4, snappy, gzip"
        in (answer["orders"][1])
    )
    assert "because its type is not LIST" in answer["other"][1]
    assert "internal to txnlog" in answer["__consumer_offsets"][1]
    unknown_key = ConfigResource(ResourceType.TOPIC, "orders", set_config={"no.such": "1"})
    [(code, message)] = outcomes(client.alter_configs([unknown_key])).values()
    assert code == INVALID_CONFIG and "unknown topic config 'no.such'" in message
    assert directory_bytes(log_dir, content_only=True) == before


def test_a_broker_resource_is_answered_as_kafka_answers_configs_that_are_not_dynamic(
    server: ServeProcess,
) -> None:
    client = admin(server)
    broker = ConfigResource(ResourceType.BROKER, "0", set_config={"log.retention.ms": "1"})
    [(code, message)] = outcomes(client.alter_configs([broker])).values()
    assert code == INVALID_REQUEST and "Cannot update these configs dynamically" in message
    # the AdminClient sends a BROKER resource to that broker: another id only raw
    config = [{"name": "x", "value": "1"}]
    other, named, nothing = raw_alter(
        server.port,
        ALTER_CONFIGS,
        2,
        [resource("7", config, BROKER), resource("me", config, BROKER), resource("", [], BROKER)],
    )
    assert other["error_code"] == INVALID_REQUEST
    assert "Unexpected broker id, expected 0, but received '7'" in other["error_message"]
    assert named["error_code"] == INVALID_REQUEST and "must be an integer" in named["error_message"]
    assert nothing["error_code"] == 0  # nothing to change: done, as Kafka answers it


# --- what only a raw client sends -------------------------------------------------------------


def test_hostile_requests_get_a_typed_error_per_resource_never_a_crash(
    server: ServeProcess, log_dir: Path
) -> None:
    before = directory_bytes(log_dir, content_only=True)
    huge = "x" * 200_000
    answers = raw_alter(
        server.port,
        INCREMENTAL_ALTER_CONFIGS,
        1,
        [
            resource("orders", [{"name": "retention.ms", "config_operation": SET, "value": "1"}]),
            resource("orders", [{"name": "segment.ms", "config_operation": SET, "value": "1"}]),
            resource("a", [{"name": "retention.ms", "config_operation": SET, "value": None}]),
            resource("b", [{"name": "retention.ms", "config_operation": 9, "value": "1"}]),
            resource(
                "c",
                [
                    {"name": "retention.ms", "config_operation": SET, "value": "1"},
                    {"name": "retention.ms", "config_operation": DELETE, "value": None},
                ],
            ),
            resource("d", [{"name": huge, "config_operation": SET, "value": huge}]),
            resource("g", [], kind=32),
            resource("", []),
            resource("../x", [{"name": "retention.ms", "config_operation": SET, "value": "1"}]),
        ],
    )
    got = [(a["resource_name"][:10], a["error_code"]) for a in answers]
    assert got == [
        ("orders", INVALID_REQUEST),
        ("orders", INVALID_REQUEST),
        ("a", INVALID_REQUEST),
        ("b", INVALID_REQUEST),
        ("c", INVALID_REQUEST),
        ("d", UNKNOWN_TOPIC),
        ("g", INVALID_REQUEST),
        ("", INVALID_REQUEST),
        ("../x", INVALID_TOPIC),
    ]
    assert all(len(a["error_message"]) < 1000 for a in answers)
    [huge_value] = raw_alter(
        server.port,
        INCREMENTAL_ALTER_CONFIGS,
        1,
        [resource("orders", [{"name": "retention.ms", "config_operation": SET, "value": huge}])],
    )
    assert huge_value["error_code"] == INVALID_CONFIG and len(huge_value["error_message"]) < 1000
    legacy_null = raw_alter(
        server.port,
        ALTER_CONFIGS,
        0,
        [resource("orders", [{"name": "retention.ms", "value": None}])],
    )
    assert legacy_null[0]["error_code"] == INVALID_REQUEST
    assert "Null value not supported" in legacy_null[0]["error_message"]
    assert directory_bytes(log_dir, content_only=True) == before
    raw = RawClient(server.port)  # the server still answers
    hello = {"client_software_name": "t", "client_software_version": "1"}
    listed = raw.request(API_VERSIONS, 3, hello)["api_keys"]
    versions = {a["api_key"]: (a["min_version"], a["max_version"]) for a in listed}
    raw.close()
    assert versions[ALTER_CONFIGS] == (0, 2) and versions[INCREMENTAL_ALTER_CONFIGS] == (0, 1)


# --- compression.type applied to a confluent producer's batches -------------------------------


def stored_codecs(log_dir: Path, topic: str) -> list[Compression]:
    with Log.open(log_dir, read_only=True) as log:
        reader = log.partition_reader(EngineTopicPartition(topic, 0))
        return [h.compression for h, _ in reader.read(0, reader.log_end_offset) if not h.is_control]


def consume_all(server: ServeProcess, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        while len(values) < count:
            message = consumer.poll(WAIT_S)
            assert message is not None, f"only {values} of {count} records arrived"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_a_topic_created_with_compression_zstd_stores_uncompressed_produce_as_zstd(
    server: ServeProcess, log_dir: Path
) -> None:
    """librdkafka 0081 creates topics with compression.type; the batches of a producer that
    compresses nothing are stored zstd and read back whole, idempotent and transactional."""
    client = admin(server)
    created = client.create_topics([NewTopic("zipped", 1, 1, config={"compression.type": "zstd"})])
    created["zipped"].result(WAIT_S)
    assert described(client, "zipped")["compression.type"] == (
        "zstd",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    base = {"bootstrap.servers": server.bootstrap, "compression.type": "none", "linger.ms": 0}
    idempotent = Producer({**base, "enable.idempotence": True})
    for i in range(3):
        idempotent.produce("zipped", b"idem-%d" % i, partition=0)
    assert idempotent.flush(WAIT_S) == 0
    transactional = Producer({**base, "transactional.id": "zip-tx"})
    transactional.init_transactions(WAIT_S)
    for commit in (False, True):
        transactional.begin_transaction()
        transactional.produce("zipped", b"committed" if commit else b"aborted", partition=0)
        transactional.flush(WAIT_S)
        if commit:
            transactional.commit_transaction(WAIT_S)
        else:
            transactional.abort_transaction(WAIT_S)
    assert set(stored_codecs(log_dir, "zipped")) == {Compression.ZSTD}
    assert consume_all(server, "zipped", 4) == [b"idem-0", b"idem-1", b"idem-2", b"committed"]


def test_compression_altered_on_a_live_topic_applies_to_the_next_batch(
    server: ServeProcess, log_dir: Path
) -> None:
    producer = Producer({"bootstrap.servers": server.bootstrap, "compression.type": "gzip"})
    producer.produce("orders", b"before" * 200, partition=0)  # librdkafka sends it gzip
    assert producer.flush(WAIT_S) == 0
    change = incremental("orders", ("compression.type", "uncompressed", AlterConfigOpType.SET))
    assert codes(admin(server).incremental_alter_configs([change])) == {"orders": 0}
    producer.produce("orders", b"after" * 200, partition=0)
    assert producer.flush(WAIT_S) == 0
    assert stored_codecs(log_dir, "orders") == [Compression.GZIP, Compression.NONE]


# --- ACLs ---------------------------------------------------------------------------------------


CONFIG_GRANTS = {
    "tuner": ["topic app-* AlterConfigs"],
    "viewer": ["topic * Describe", "topic * DescribeConfigs"],
    "operator": ["cluster kafka-cluster AlterConfigs"],
    "nobody": [],
}


@pytest.fixture
def acl_server(tmp_path: Path, log_dir: Path) -> Iterator[ServeProcess]:
    with Log.open(log_dir) as log:
        for topic in ("app-a", "other"):
            log.create_topic(topic, 1)
    with serve_with_grants(tmp_path, log_dir, CONFIG_GRANTS) as served:
        yield served


def test_alter_configs_needs_alter_configs_on_the_topic_or_the_cluster(
    acl_server: ServeProcess, log_dir: Path
) -> None:
    before = directory_bytes(log_dir, content_only=True)
    asked = [
        incremental("app-a", ("retention.ms", "1000", AlterConfigOpType.SET)),
        incremental("other", ("retention.ms", "1000", AlterConfigOpType.SET)),
    ]
    for user in ("nobody", "viewer", "operator"):
        assert codes(admin_as(acl_server, user).incremental_alter_configs(asked)) == {
            "app-a": TOPIC_DENIED,
            "other": TOPIC_DENIED,
        }, user
    assert directory_bytes(log_dir, content_only=True) == before
    assert codes(admin_as(acl_server, "tuner").incremental_alter_configs(asked)) == {
        "app-a": 0,
        "other": TOPIC_DENIED,
    }
    with Log.open(log_dir, read_only=True) as log:
        assert log.topic_config("app-a").retention_ms == 1000
        assert log.topic_config("other").retention_ms != 1000
    # the legacy API and a broker resource: AlterConfigs on the cluster
    broker = ConfigResource(ResourceType.BROKER, "0", set_config={"x": "1"})
    tuner, operator = admin_as(acl_server, "tuner"), admin_as(acl_server, "operator")
    [(code, _)] = outcomes(tuner.alter_configs([broker])).values()
    assert code == CLUSTER_DENIED
    [(code, _)] = outcomes(operator.alter_configs([broker])).values()
    assert code == INVALID_REQUEST  # allowed, and answered as Kafka answers it
    # a resource named twice is INVALID_REQUEST before any ACL, as Kafka's broker answers it
    raw = plain_login(acl_server.port, "nobody", "pw-nobody")
    twice = [resource("other", [{"name": "retention.ms", "value": "1"}])] * 2
    answer = raw.request(ALTER_CONFIGS, 1, {"resources": twice, "validate_only": False})
    raw.close()
    assert [r["error_code"] for r in answer["responses"]] == [INVALID_REQUEST] * 2
