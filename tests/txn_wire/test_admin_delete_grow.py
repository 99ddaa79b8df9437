"""DeleteTopics (20) and CreatePartitions (37) against a real ``txnlog serve``, through
confluent-kafka's AdminClient and, for what it cannot send (topic ids, a name twice), the raw
client: each of Kafka's answers, the ACLs each needs, and the authorized operations Metadata
reports (issue 25). Every refusal leaves the log as it was."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewPartitions

from tests.support import directory_bytes
from tests.txn_wire.auth_clients import (
    admin_as,
    plain_login,
    sasl_config,
    serve_with_grants,
    write_acls,
    write_users,
)
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_wire.acl import AclRule, Authorizer, Operation, ResourceType, load_acls
from txn_wire.authorize import RULES
from txn_wire.metadata import kafka_topic_id
from txn_wire.server import HANDLERS

WAIT_S = 30
DELETE_TOPICS, CREATE_PARTITIONS, METADATA, API_VERSIONS = 20, 37, 3, 18
UNKNOWN_TOPIC, INVALID_TOPIC, NOT_AUTHORIZED, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 3, 17, 29, 42, 100
NIL = uuid.UUID(int=0)
TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}


def admin(server: ServeProcess, **extra: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, **extra})


def outcomes(futures: dict[str, Future[None]]) -> dict[str, tuple[int, str]]:
    """topic → (Kafka error code, its message), (0, "") when done."""
    codes = {}
    for name, future in futures.items():
        try:
            future.result(WAIT_S)
            codes[name] = (0, "")
        except KafkaException as error:
            codes[name] = (error.args[0].code(), error.args[0].str())
    return codes


def codes(futures: dict[str, Future[None]]) -> dict[str, int]:
    return {name: code for name, (code, _) in outcomes(futures).items()}


def partition_dirs(log_dir: Path, topic: str) -> list[str]:
    return sorted(p.name for p in log_dir.glob(f"{topic}-*") if p.is_dir())


# --- DeleteTopics ------------------------------------------------------------------------------


def test_delete_topics_deletes_whole_topics_and_answers_kafkas_codes(
    server: ServeProcess, log_dir: Path
) -> None:
    with Log.open(log_dir) as log:
        log.create_topic("gone", 3)
    client = admin(server)
    answer = codes(
        client.delete_topics(["gone", "nowhere", "__consumer_offsets"], operation_timeout=5)
    )
    assert answer == {
        "gone": 0,
        "nowhere": KafkaError.UNKNOWN_TOPIC_OR_PART,
        "__consumer_offsets": KafkaError.TOPIC_EXCEPTION,  # the engine keeps internal topics
    }
    assert partition_dirs(log_dir, "gone") == []
    with Log.open(log_dir) as log:
        assert log.topics() == ["orders"]
        assert len(log.partitions("__consumer_offsets")) == 1
    assert codes(client.delete_topics(["gone"])) == {"gone": KafkaError.UNKNOWN_TOPIC_OR_PART}


def test_delete_topics_v6_names_a_topic_by_its_id_as_kafka_answers(
    server: ServeProcess, log_dir: Path
) -> None:
    """v6 (what the Java AdminClient sends): a topic named by its id (the one Metadata
    reports) is deleted and answered with its name; an id no topic has is UNKNOWN_TOPIC_ID,
    also the id of a topic deleted and re-created since; a request naming a topic twice, by
    neither or both name and id, or by name and by id, is INVALID_REQUEST once."""
    with Log.open(log_dir) as log:
        for topic in ("a", "b", "c", "d"):
            log.create_topic(topic, 1)
        ids = {t: kafka_topic_id(log.topic_id(t)) for t in ("a", "b", "c", "d", "orders")}
        log.delete_topic("d")
        log.create_topic("d", 1)  # "d" is another topic now: its old id names nothing
    raw = RawClient(server.port)
    metadata = raw.request(METADATA, 12, {"topics": [{"name": "a"}]})
    assert metadata["topics"][0]["topic_id"] == ids["a"]
    stranger = uuid.UUID(int=12345)
    asked = [
        {"name": None, "topic_id": ids["a"]},
        {"name": None, "topic_id": stranger},
        {"name": None, "topic_id": ids["d"]},
        {"name": "b", "topic_id": NIL},
        {"name": "b", "topic_id": NIL},
        {"name": "c", "topic_id": ids["c"]},
        {"name": None, "topic_id": NIL},
        {"name": "orders", "topic_id": NIL},
        {"name": None, "topic_id": ids["orders"]},
    ]
    answer = raw.request(DELETE_TOPICS, 6, {"topics": asked, "timeout": 30_000})["responses"]
    raw.close()
    got = [(r["name"] or "", str(r["topic_id"] or NIL), r["error_code"]) for r in answer]
    assert sorted(got) == sorted(
        [
            ("a", str(ids["a"]), 0),
            ("", str(stranger), UNKNOWN_TOPIC_ID),
            ("", str(ids["d"]), UNKNOWN_TOPIC_ID),
            ("b", str(NIL), INVALID_REQUEST),
            ("c", str(ids["c"]), INVALID_REQUEST),
            ("", str(NIL), INVALID_REQUEST),
            ("orders", str(ids["orders"]), INVALID_REQUEST),
        ]
    )
    with Log.open(log_dir) as log:
        assert log.topics() == ["b", "c", "d", "orders"]


def test_delete_topics_v1_answers_without_a_message(server: ServeProcess, log_dir: Path) -> None:
    raw = RawClient(server.port)
    answer = raw.request(DELETE_TOPICS, 1, {"topic_names": ["orders", "x"], "timeout": 0})
    raw.close()
    assert {r["name"]: r["error_code"] for r in answer["responses"]} == {
        "orders": 0,
        "x": UNKNOWN_TOPIC,
    }
    assert answer["throttle_time"] == 0
    assert partition_dirs(log_dir, "orders") == []


# --- CreatePartitions --------------------------------------------------------------------------


def test_create_partitions_grows_a_topic_and_answers_kafkas_codes(
    server: ServeProcess, log_dir: Path
) -> None:
    client = admin(server)
    before = directory_bytes(log_dir, content_only=True)
    assert codes(client.create_partitions([NewPartitions("orders", 5)], validate_only=True)) == {
        "orders": 0
    }
    assert directory_bytes(log_dir, content_only=True) == before  # validate_only: nothing
    answer = outcomes(
        client.create_partitions(
            [
                NewPartitions("orders", 4),
                NewPartitions("nowhere", 3),
                NewPartitions("__transaction_state", 2),
            ]
        )
    )
    assert {name: code for name, (code, _) in answer.items()} == {
        "orders": 0,
        "nowhere": KafkaError.UNKNOWN_TOPIC_OR_PART,
        "__transaction_state": KafkaError.TOPIC_EXCEPTION,  # the engine's coordinators use p0
    }
    assert outcomes(client.create_partitions([NewPartitions("orders", 3)])) == {
        "orders": (
            KafkaError.INVALID_PARTITIONS,
            "topic 'orders' currently has 4 partition(s); 3 would not be an increase",
        )
    }
    assert outcomes(client.create_partitions([NewPartitions("orders", 4)])) == {
        "orders": (KafkaError.INVALID_PARTITIONS, "topic 'orders' already has 4 partition(s)")
    }
    assert partition_dirs(log_dir, "orders") == [f"orders-{p}" for p in range(4)]
    with Log.open(log_dir) as log:
        assert len(log.partitions("orders")) == 4
        assert len(log.partitions("__transaction_state")) == 1


def test_create_partitions_takes_assignments_that_place_each_new_partition_here(
    server: ServeProcess, log_dir: Path
) -> None:
    """An assignment per new partition, each on this broker (0) alone, grows the topic;
    another broker, a broker twice, or not one assignment per new partition is
    INVALID_REPLICA_ASSIGNMENT (39), as Kafka's ``ReplicationControlManager`` answers."""
    client = admin(server)
    refused = codes(
        client.create_partitions(
            [NewPartitions("orders", 4, replica_assignment=[[0], [1]])], validate_only=True
        )
    )
    assert refused == {"orders": KafkaError.INVALID_REPLICA_ASSIGNMENT}
    for assignment in ([[0, 0], [0]], [[0]], [[0], [0], [0]]):
        grow = NewPartitions("orders", 4, replica_assignment=assignment)
        assert codes(client.create_partitions([grow])) == {
            "orders": KafkaError.INVALID_REPLICA_ASSIGNMENT
        }, assignment
    assert partition_dirs(log_dir, "orders") == ["orders-0", "orders-1"]
    grow = NewPartitions("orders", 4, replica_assignment=[[0], [0]])
    assert codes(client.create_partitions([grow])) == {"orders": 0}
    assert partition_dirs(log_dir, "orders") == [f"orders-{p}" for p in range(4)]


def test_create_partitions_answers_a_topic_named_twice_invalid_request_once(
    server: ServeProcess, log_dir: Path
) -> None:
    raw = RawClient(server.port)
    grow = {"name": "orders", "count": 3, "assignments": None}
    for version in (0, 3):
        answer = raw.request(
            CREATE_PARTITIONS,
            version,
            {"topics": [grow, grow], "timeout": 30_000, "validate_only": False},
        )
        assert [(r["name"], r["error_code"]) for r in answer["results"]] == [
            ("orders", INVALID_REQUEST)
        ]
    raw.close()
    assert partition_dirs(log_dir, "orders") == ["orders-0", "orders-1"]


# --- ACLs ---------------------------------------------------------------------------------------


ADMIN_GRANTS = {
    "ops": ["cluster kafka-cluster Delete", "topic * Describe"],
    "owner": ["topic app-* Delete", "topic app-* Alter"],
    "viewer": ["topic * Describe"],
    "nobody": [],
}


@pytest.fixture
def acl_server(tmp_path: Path, log_dir: Path) -> Iterator[ServeProcess]:
    with Log.open(log_dir) as log:
        for topic in ("app-a", "app-b", "app-c", "other"):
            log.create_topic(topic, 1)
    with serve_with_grants(tmp_path, log_dir, ADMIN_GRANTS) as served:
        yield served


as_user = admin_as


def test_delete_topics_needs_delete_on_the_topic_or_the_cluster(
    acl_server: ServeProcess, log_dir: Path
) -> None:
    """Kafka's ``ControllerApis.deleteTopics``: without Describe a topic is refused (29)
    whether or not it exists; with Describe but not Delete, an unknown topic is unknown (3) and
    a known one refused (29); Delete on the cluster deletes any topic."""
    before = directory_bytes(log_dir, content_only=True)
    asked = ["app-a", "other", "app-zzz"]
    assert codes(as_user(acl_server, "nobody").delete_topics(asked)) == dict.fromkeys(
        asked, NOT_AUTHORIZED
    )
    assert codes(as_user(acl_server, "viewer").delete_topics(asked)) == {
        "app-a": NOT_AUTHORIZED,
        "other": NOT_AUTHORIZED,
        "app-zzz": UNKNOWN_TOPIC,
    }
    assert directory_bytes(log_dir, content_only=True) == before
    assert codes(as_user(acl_server, "owner").delete_topics(asked)) == {
        "app-a": 0,  # Delete implies Describe
        "other": NOT_AUTHORIZED,
        "app-zzz": UNKNOWN_TOPIC,
    }
    assert codes(as_user(acl_server, "ops").delete_topics(["other", "nope"])) == {
        "other": 0,
        "nope": UNKNOWN_TOPIC,
    }
    with Log.open(log_dir) as log:
        assert log.topics() == ["app-b", "app-c", "orders"]


def test_delete_topics_by_id_withholds_the_name_of_a_topic_the_principal_may_not_describe(
    acl_server: ServeProcess, log_dir: Path
) -> None:
    with Log.open(log_dir) as log:
        ids = {t: kafka_topic_id(log.topic_id(t)) for t in ("app-b", "other")}
    before = directory_bytes(log_dir, content_only=True)
    by_id = [{"name": None, "topic_id": ids[t]} for t in ("app-b", "other")]
    answers = {}
    for user in ("nobody", "viewer", "owner"):
        raw = plain_login(acl_server.port, user, f"pw-{user}")
        answer = raw.request(DELETE_TOPICS, 6, {"topics": by_id, "timeout": 30_000})
        raw.close()
        answers[user] = sorted((r["name"] or "", r["error_code"]) for r in answer["responses"])
        if user != "owner":
            assert directory_bytes(log_dir, content_only=True) == before
    assert answers == {
        "nobody": [("", NOT_AUTHORIZED), ("", NOT_AUTHORIZED)],
        "viewer": [("app-b", NOT_AUTHORIZED), ("other", NOT_AUTHORIZED)],
        "owner": [("", NOT_AUTHORIZED), ("app-b", 0)],
    }
    with Log.open(log_dir) as log:
        assert "app-b" not in log.topics()


def test_create_partitions_needs_alter_on_the_topic(
    acl_server: ServeProcess, log_dir: Path
) -> None:
    before = directory_bytes(log_dir, content_only=True)
    grow = [NewPartitions("app-c", 3), NewPartitions("other", 3)]
    for user in ("nobody", "viewer", "ops"):  # Delete on the cluster is no Alter on a topic
        assert codes(as_user(acl_server, user).create_partitions(grow)) == {
            "app-c": NOT_AUTHORIZED,
            "other": NOT_AUTHORIZED,
        }, user
    assert directory_bytes(log_dir, content_only=True) == before
    assert codes(as_user(acl_server, "owner").create_partitions(grow)) == {
        "app-c": 0,
        "other": NOT_AUTHORIZED,
    }
    assert partition_dirs(log_dir, "app-c") == [f"app-c-{p}" for p in range(3)]
    assert partition_dirs(log_dir, "other") == ["other-0"]
    raw = plain_login(acl_server.port, "nobody", "pw-nobody")  # a name twice: 42 before ACLs
    twice = {"name": "other", "count": 3, "assignments": None}
    answer = raw.request(
        CREATE_PARTITIONS, 3, {"topics": [twice, twice], "timeout": 0, "validate_only": False}
    )
    raw.close()
    assert [(r["name"], r["error_code"]) for r in answer["results"]] == [("other", INVALID_REQUEST)]


def test_acl_file_names_delete_and_alter_and_their_implications(tmp_path: Path) -> None:
    """Kafka's StandardAuthorizer: an allowed Delete or Alter implies Describe, an allowed
    AlterConfigs implies DescribeConfigs; a denied one denies only itself; All is all."""
    path = write_acls(
        tmp_path / "acls.txt",
        [
            "User:a topic t Delete allow",
            "User:b topic t Alter allow",
            "User:c topic t AlterConfigs allow",
            "User:d topic t All allow",
            "User:d topic t Delete deny",
            "User:e cluster kafka-cluster ClusterAction allow",
        ],
    )
    acls = load_acls(path)
    topic = ResourceType.TOPIC

    def ops(user: str) -> set[Operation]:
        return {o for o in Operation if acls.allows(f"User:{user}", topic, "t", o)}

    assert ops("a") == {Operation.DELETE, Operation.DESCRIBE}
    assert ops("b") == {Operation.ALTER, Operation.DESCRIBE}
    assert ops("c") == {Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS}
    assert ops("d") == set(Operation) - {Operation.DELETE}
    cluster = ResourceType.CLUSTER
    assert acls.allows("User:e", cluster, "kafka-cluster", Operation.CLUSTER_ACTION)
    deny_delete = Authorizer([AclRule("User:f", topic, "t", Operation.DELETE, False)])
    assert not deny_delete.allows("User:f", topic, "t", Operation.DESCRIBE)


def test_every_served_api_but_api_versions_has_an_authorization_rule() -> None:
    assert set(HANDLERS) - {API_VERSIONS} == set(RULES)


# --- Metadata's authorized operations ----------------------------------------------------------


def test_metadata_reports_every_operation_without_acls_and_int32_min_unasked(
    server: ServeProcess,
) -> None:
    client = admin(server)
    asked = client.describe_topics(TopicCollection(["orders"]), include_authorized_operations=True)
    assert set(asked["orders"].result(WAIT_S).authorized_operations) == TOPIC_OPERATIONS
    unasked = client.describe_topics(TopicCollection(["orders"]))
    assert unasked["orders"].result(WAIT_S).authorized_operations is None
    cluster = client.describe_cluster(include_authorized_operations=True).result(WAIT_S)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS
    assert client.describe_cluster().result(WAIT_S).authorized_operations is None
    raw = RawClient(server.port)
    flags = {"include_cluster_authorized_operations": False}
    for version in (8, 10, 12):
        answer = raw.request(
            METADATA,
            version,
            {"topics": [{"name": "orders"}], **flags, "include_topic_authorized_operations": False},
        )
        assert answer["topics"][0]["topic_authorized_operations"] == -(2**31)
        if version <= 10:
            assert answer["cluster_authorized_operations"] == -(2**31)
    raw.close()


def test_metadata_reports_the_principals_operations_with_acls(
    tmp_path: Path, log_dir: Path
) -> None:
    """Per topic listed, the operations the ACLs give (Read implies Describe); the cluster's
    only to a principal that may describe the cluster (else 0); a topic refused keeps
    INT32_MIN."""
    users = write_users(tmp_path / "users.json", {"reader": "pw", "boss": "pw"})
    acls = write_acls(
        tmp_path / "acls.txt",
        [
            "User:reader topic orders Read allow",
            "User:reader topic orders Delete allow",
            "User:reader cluster kafka-cluster Create allow",  # no Describe on it: told 0
            "User:boss topic * All allow",
            "User:boss cluster kafka-cluster Describe allow",
            "User:boss cluster kafka-cluster Create allow",
        ],
    )
    served = start_serve(log_dir, "--users-file", str(users), "--acl-file", str(acls))
    try:
        reader = admin(served, **sasl_config("PLAIN", "reader", "pw"))
        boss = admin(served, **sasl_config("PLAIN", "boss", "pw"))
        topics = TopicCollection(["orders"])
        mine = reader.describe_topics(topics, include_authorized_operations=True)
        assert set(mine["orders"].result(WAIT_S).authorized_operations) == {
            AclOperation.READ,
            AclOperation.DELETE,
            AclOperation.DESCRIBE,
        }
        theirs = boss.describe_topics(topics, include_authorized_operations=True)
        assert set(theirs["orders"].result(WAIT_S).authorized_operations) == TOPIC_OPERATIONS
        cluster = boss.describe_cluster(include_authorized_operations=True).result(WAIT_S)
        assert set(cluster.authorized_operations) == {AclOperation.CREATE, AclOperation.DESCRIBE}
        raw = plain_login(served.port, "reader", "pw")
        body = {
            "topics": [{"name": "orders"}, {"name": "__consumer_offsets"}],
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": True,
        }
        answer = raw.request(METADATA, 10, body)
        raw.close()
        assert answer["cluster_authorized_operations"] == 0
        bits = {
            t["name"]: (t["error_code"], t["topic_authorized_operations"]) for t in answer["topics"]
        }
        assert bits == {
            "orders": (0, (1 << 3) | (1 << 6) | (1 << 8)),
            "__consumer_offsets": (NOT_AUTHORIZED, -(2**31)),
        }
    finally:
        assert served.stop() == 0
