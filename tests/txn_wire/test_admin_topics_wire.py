"""CreateTopics and DescribeConfigs (issue 16 item 3) through confluent-kafka's AdminClient
against a real ``txnlog serve``: what the Kafka sink's ``createTopic`` and its compacted ledger
topic need. Each refusal has Kafka's error code and leaves the log as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.txn_wire.auth_clients import sasl_config, write_acls, write_users
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log

WAIT_S = 30


def admin(server: ServeProcess, **extra: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, **extra})


def create(client: AdminClient, *topics: NewTopic, validate_only: bool = False) -> dict[str, int]:
    """topic → Kafka error code (0 when created)."""
    futures = client.create_topics(list(topics), validate_only=validate_only)
    codes = {}
    for name, future in futures.items():
        try:
            future.result(WAIT_S)
            codes[name] = 0
        except KafkaException as error:
            codes[name] = error.args[0].code()
    return codes


def test_create_topics_creates_a_compacted_topic_the_log_and_describe_configs_see(
    server: ServeProcess, log_dir: Path
) -> None:
    client = admin(server)
    topic = NewTopic("ledger", 3, 1, config={"cleanup.policy": "compact"})
    assert create(client, topic) == {"ledger": 0}
    with Log.open(log_dir) as log:
        assert len(log.partitions("ledger")) == 3
        assert log.topic_config("ledger").compact
    resource = ConfigResource(ConfigResource.Type.TOPIC, "ledger")
    configs = client.describe_configs([resource])[resource].result(WAIT_S)
    assert configs["cleanup.policy"].value == "compact"
    assert not configs["cleanup.policy"].is_default
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["max.message.bytes"].is_default


def test_create_topics_with_the_server_defaults(server: ServeProcess, log_dir: Path) -> None:
    assert create(admin(server), NewTopic("plain")) == {"plain": 0}  # -1 partitions, -1 rf
    with Log.open(log_dir) as log:
        assert len(log.partitions("plain")) == 1
        assert not log.topic_config("plain").compact


def test_create_topics_refusals_carry_kafkas_codes_and_create_nothing(
    server: ServeProcess, log_dir: Path
) -> None:
    client = admin(server)
    codes = create(
        client,
        NewTopic("orders", 1),
        NewTopic("bad name!", 1),
        NewTopic("bad-config", 1, config={"cleanup.policy": "shred"}),
        NewTopic("three-copies", 1, 3),
        NewTopic("no-partitions", 0),
    )
    assert codes == {
        "orders": KafkaError.TOPIC_ALREADY_EXISTS,
        "bad name!": KafkaError.TOPIC_EXCEPTION,
        "bad-config": KafkaError.INVALID_CONFIG,
        "three-copies": KafkaError.INVALID_REPLICATION_FACTOR,
        "no-partitions": KafkaError.INVALID_PARTITIONS,
    }
    assert KafkaError.TOPIC_ALREADY_EXISTS == 36
    with Log.open(log_dir) as log:
        assert log.topics() == ["orders"]
        assert len(log.partitions("orders")) == 2  # the existing topic is untouched


def test_validate_only_creates_nothing(server: ServeProcess, log_dir: Path) -> None:
    client = admin(server)
    assert create(client, NewTopic("maybe", 2), validate_only=True) == {"maybe": 0}
    assert create(client, NewTopic("maybe!", 2), validate_only=True) == {
        "maybe!": KafkaError.TOPIC_EXCEPTION
    }
    # what the real create would refuse, validate_only refuses too (it answered 0 for these)
    assert create(client, NewTopic("huge", 20_000), validate_only=True) == {
        "huge": KafkaError.INVALID_PARTITIONS
    }
    assert create(client, NewTopic("huge", 20_000)) == {"huge": KafkaError.INVALID_PARTITIONS}
    with Log.open(log_dir) as log:
        assert log.topics() == ["orders"]


def test_describe_configs_of_an_unknown_topic_is_unknown_topic(server: ServeProcess) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, "nowhere")
    client = admin(server)  # kept alive: a destroyed client fails its futures
    with pytest.raises(KafkaException) as raised:
        client.describe_configs([resource])[resource].result(WAIT_S)
    assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_topics_needs_create_on_the_cluster_or_the_topic(
    tmp_path: Path, log_dir: Path
) -> None:
    users = write_users(tmp_path / "users.json", {"ops": "pw-ops", "app": "pw-app", "no": "pw-no"})
    acls = write_acls(
        tmp_path / "acls.txt",
        [
            "User:ops cluster kafka-cluster Create allow",
            "User:app topic app-* Create allow",
            "User:app topic app-* DescribeConfigs allow",
        ],
    )
    served = start_serve(log_dir, "--users-file", str(users), "--acl-file", str(acls))
    try:
        ops = admin(served, **sasl_config("PLAIN", "ops", "pw-ops"))
        app = admin(served, **sasl_config("PLAIN", "app", "pw-app"))
        nobody = admin(served, **sasl_config("PLAIN", "no", "pw-no"))
        assert create(ops, NewTopic("anything", 1)) == {"anything": 0}
        assert create(app, NewTopic("app-out", 1), NewTopic("other", 1)) == {
            "app-out": 0,
            "other": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        }
        assert create(nobody, NewTopic("app-x", 1)) == {
            "app-x": KafkaError.TOPIC_AUTHORIZATION_FAILED
        }
        mine = ConfigResource(ConfigResource.Type.TOPIC, "app-out")
        configs = app.describe_configs([mine])[mine].result(WAIT_S)
        assert configs["max.message.bytes"].value == "1048588"
        theirs = ConfigResource(ConfigResource.Type.TOPIC, "orders")
        with pytest.raises(KafkaException) as raised:
            app.describe_configs([theirs])[theirs].result(WAIT_S)
        assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        assert served.stop() == 0
    with Log.open(log_dir) as log:
        assert log.topics() == ["anything", "app-out", "orders"]


def test_create_topics_takes_a_replica_assignment_that_fits_the_one_broker(
    server: ServeProcess, log_dir: Path
) -> None:
    """librdkafka 0081: an assignment placing every partition on this broker (id 0) creates
    the topic with that many partitions, as Kafka does; one naming a broker that does not
    exist, leaving a gap in the partition ids, or listing a broker twice is
    INVALID_REPLICA_ASSIGNMENT (39); an assignment beside a partition count or replication
    factor is INVALID_REQUEST (42), as Kafka's ``ReplicationControlManager`` answers."""
    client = admin(server)
    codes = create(
        client,
        NewTopic("placed", 3, replica_assignment=[[0], [0], [0]]),
        NewTopic("elsewhere", 2, replica_assignment=[[0], [1]]),
        NewTopic("twice", 1, replica_assignment=[[0, 0]]),
    )
    assert codes == {
        "placed": 0,
        "elsewhere": KafkaError.INVALID_REPLICA_ASSIGNMENT,
        "twice": KafkaError.INVALID_REPLICA_ASSIGNMENT,
    }
    raw = RawClient(server.port)
    answer = raw.request(
        19,
        4,
        {
            "topics": [
                _raw_topic("gap", -1, [(0, [0]), (2, [0])]),
                _raw_topic("both", 2, [(0, [0]), (1, [0])]),
                _raw_topic("empty", -1, [(0, [])]),
            ],
            "timeout_ms": 30_000,
            "validate_only": False,
        },
    )
    raw.close()
    assert {t["name"]: t["error_code"] for t in answer["topics"]} == {
        "gap": 39,
        "both": 42,
        "empty": 39,
    }
    with Log.open(log_dir) as log:
        assert log.topics() == ["orders", "placed"]
        assert len(log.partitions("placed")) == 3


def _raw_topic(
    name: str, partitions: int, placed: list[tuple[int, list[int]]]
) -> dict[str, object]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": -1,
        "assignments": [{"partition_index": p, "broker_ids": ids} for p, ids in placed],
        "configs": [],
    }
