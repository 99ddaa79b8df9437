"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31) against real ``txnlog serve``
processes (R-12), through confluent-kafka's AdminClient and raw frames: SECURITY_DISABLED
without an ACL file; with one, Alter (create, delete) or Describe (describe) on the cluster,
CLUSTER_AUTHORIZATION_FAILED otherwise with the file unchanged; a created rule enforced by
the same server at the next request and gone once deleted; creations the file cannot hold
refused by name with nothing written; super users (``--super-users``); AdminClient processes
on two servers and ``txnlog acls`` editing one file at once without losing an update; and
hostile requests, and a file broken by hand, that change nothing and leave the server up."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.txn_wire.auth_clients import plain_login, sasl_config, write_acls, write_users
from tests.txn_wire.serve_process import TXNLOG, ServeProcess, start_serve
from tests.txn_wire.wire_clients import WAIT_S, RawClient
from txn_wire.acl import load_acls
from txn_wire.codec import LENGTH, REQUEST_PREFIX

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
INVALID_REQUEST, SECURITY_DISABLED, CLUSTER_AUTHORIZATION_FAILED = 42, 54, 31
TOPIC_AUTHORIZATION_FAILED, UNKNOWN_SERVER_ERROR = 29, -1
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
MATCH, ANY_PATTERN = ResourcePatternType.MATCH, ResourcePatternType.ANY
ALLOW, DENY, ANY_PERMISSION = AclPermissionType.ALLOW, AclPermissionType.DENY, AclPermissionType.ANY
ANY_OPERATION = AclOperation.ANY
HEADER = "# principal resource-type name operation permission\n"
ADMIN_RULE = "User:admin cluster kafka-cluster Alter allow\n"  # Alter implies Describe


def binding(
    resource: ResourceType,
    name: str,
    pattern: ResourcePatternType,
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def acl_filter(
    resource: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern: ResourcePatternType = ANY_PATTERN,
    principal: str | None = None,
    operation: AclOperation = ANY_OPERATION,
    permission: AclPermissionType = ANY_PERMISSION,
    host: str | None = None,
) -> AclBindingFilter:
    return AclBindingFilter(resource, name, pattern, principal, host, operation, permission)


def row(found: AclBinding) -> tuple[Any, ...]:
    return (
        found.restype,
        found.name,
        found.resource_pattern_type,
        found.principal,
        found.host,
        found.operation,
        found.permission_type,
    )


def create(admin: AdminClient, bindings: list[AclBinding]) -> list[KafkaError | None]:
    """Each binding's outcome: None when created, else its error."""
    futures = admin.create_acls(bindings, request_timeout=WAIT_S)
    return [_error_of(futures[b]) for b in bindings]


def _error_of(future: Any) -> KafkaError | None:
    try:
        future.result(timeout=WAIT_S)
    except KafkaException as error:
        return error.args[0]  # type: ignore[no-any-return]
    return None


def describe(admin: AdminClient, wanted: AclBindingFilter) -> set[tuple[Any, ...]]:
    return {row(b) for b in admin.describe_acls(wanted, request_timeout=WAIT_S).result(WAIT_S)}


def delete(admin: AdminClient, wanted: AclBindingFilter) -> list[tuple[Any, ...]]:
    result = admin.delete_acls([wanted], request_timeout=WAIT_S)[wanted].result(WAIT_S)
    return [row(b) for b in result]


def produce_error(server: ServeProcess, user: str, topic: str = "orders") -> int:
    """Produce one record as ``user`` (password ``pw-<user>``): 0 when acknowledged, else the
    error code its delivery failed with."""
    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "message.timeout.ms": 20_000,
            **sasl_config("PLAIN", user, f"pw-{user}"),
        }
    )
    outcome: list[int] = []
    producer.produce(
        topic,
        b"x",
        partition=0,
        on_delivery=lambda error, _: outcome.append(0 if error is None else error.code()),
    )
    producer.flush(WAIT_S)
    if not outcome:
        raise AssertionError(f"no delivery report for {user}'s record")
    return outcome[0]


@contextmanager
def users_and_acls(
    tmp_path: Path, log_dir: Path, users: list[str], *extra: str
) -> Iterator[tuple[ServeProcess, Path]]:
    """A server whose ``users`` (password ``pw-<user>``) log in with SASL, over an ACL file
    granting User:admin Alter on the cluster."""
    users_file = write_users(tmp_path / "users.json", {u: f"pw-{u}" for u in users})
    path = tmp_path / "acls.txt"
    path.write_text(HEADER + ADMIN_RULE)
    served = start_serve(log_dir, "--users-file", str(users_file), "--acl-file", str(path), *extra)
    try:
        yield served, path
    finally:
        served.stop()


def admin_as(server: ServeProcess, user: str) -> AdminClient:
    return AdminClient(
        {"bootstrap.servers": server.bootstrap, **sasl_config("PLAIN", user, f"pw-{user}")}
    )


# --- no ACL file -------------------------------------------------------------------------------


def test_without_an_acl_file_the_acl_apis_answer_security_disabled(server: ServeProcess) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    new = binding(TOPIC, "orders", LITERAL, "User:alice", AclOperation.READ)
    [error] = create(admin, [new])
    assert error is not None and error.code() == SECURITY_DISABLED
    # librdkafka reads DescribeAcls' top-level error code but never reports it (it answers an
    # empty list), so the raw answer below is what shows it
    assert describe(admin, acl_filter()) == set()
    with pytest.raises(KafkaException) as deleted:
        delete(admin, acl_filter())
    assert deleted.value.args[0].code() == SECURITY_DISABLED
    client = RawClient(server.port)
    answer = client.request(DESCRIBE_ACLS, 3, raw_filter())
    assert answer["error_code"] == SECURITY_DISABLED
    assert answer["error_message"] == "No Authorizer is configured on the broker"
    answer = client.request(CREATE_ACLS, 1, {"creations": [raw_creation()]})
    assert answer["results"] == [
        {"error_code": SECURITY_DISABLED, "error_message": "No Authorizer is configured."}
    ]
    answer = client.request(DELETE_ACLS, 2, {"filters": [raw_filter()]})
    [result] = answer["filter_results"]
    assert result["error_code"] == SECURITY_DISABLED and result["matching_acls"] == []
    client.close()


# --- create, describe, enforce, delete ---------------------------------------------------------


def test_created_acls_are_described_enforced_at_once_and_deleted(
    tmp_path: Path, log_dir: Path
) -> None:
    with users_and_acls(tmp_path, log_dir, ["admin", "alice"]) as (served, path):
        admin = admin_as(served, "admin")
        assert produce_error(served, "alice") == TOPIC_AUTHORIZATION_FAILED
        alice_writes = binding(TOPIC, "orders", LITERAL, "User:alice", AclOperation.WRITE)
        carol = [
            binding(TOPIC, "ord", PREFIXED, "User:carol", AclOperation.READ),
            binding(TOPIC, "*", LITERAL, "User:carol", AclOperation.DESCRIBE, DENY),
            binding(TOPIC, "other", LITERAL, "User:carol", AclOperation.READ),
            binding(GROUP, "orders", LITERAL, "User:carol", AclOperation.READ),
            binding(CLUSTER, "kafka-cluster", LITERAL, "User:carol", AclOperation.IDEMPOTENT_WRITE),
        ]
        assert create(admin, [alice_writes, *carol]) == [None] * 6
        assert path.read_text() == HEADER + ADMIN_RULE + (
            "User:alice topic orders Write allow\n"
            "User:carol topic ord* Read allow\n"
            "User:carol topic * Describe deny\n"
            "User:carol topic other Read allow\n"
            "User:carol group orders Read allow\n"
            "User:carol cluster kafka-cluster IdempotentWrite allow\n"
        )
        assert create(admin, [alice_writes]) == [None]  # already there: success, not written twice
        assert len(load_acls(path).rules) == 7
        assert produce_error(served, "alice") == 0  # enforced by the same server at once

        admin_row = row(
            binding(CLUSTER, "kafka-cluster", LITERAL, "User:admin", AclOperation.ALTER)
        )
        alice_row, ord_row, star_row, other_row, group_row, cluster_row = map(
            row, [alice_writes, *carol]
        )
        assert describe(admin, acl_filter()) == {
            admin_row,
            alice_row,
            ord_row,
            star_row,
            other_row,
            group_row,
            cluster_row,
        }
        assert describe(admin, acl_filter(TOPIC, "orders", MATCH)) == {alice_row, ord_row, star_row}
        assert describe(admin, acl_filter(ResourceType.ANY, "orders", MATCH)) == {
            alice_row,
            ord_row,
            star_row,
            group_row,
        }
        assert describe(admin, acl_filter(TOPIC, "orders", LITERAL)) == {alice_row}
        assert describe(admin, acl_filter(TOPIC, "ord", PREFIXED)) == {ord_row}
        assert describe(admin, acl_filter(TOPIC, "ord", ANY_PATTERN)) == {ord_row}
        assert describe(admin, acl_filter(TOPIC, "orders", PREFIXED)) == set()
        assert describe(admin, acl_filter(principal="User:alice")) == {alice_row}
        assert describe(admin, acl_filter(permission=DENY)) == {star_row}
        assert describe(admin, acl_filter(operation=AclOperation.IDEMPOTENT_WRITE)) == {cluster_row}
        assert describe(admin, acl_filter(host="10.0.0.7")) == set()
        assert len(describe(admin, acl_filter(host="*"))) == 7

        assert delete(admin, acl_filter(TOPIC, "orders", LITERAL, "User:alice")) == [alice_row]
        assert produce_error(served, "alice") == TOPIC_AUTHORIZATION_FAILED  # gone at once
        assert sorted(delete(admin, acl_filter(TOPIC, "orders", MATCH, "User:carol"))) == sorted(
            [ord_row, star_row]
        )
        assert delete(admin, acl_filter(TOPIC, "orders", MATCH)) == []
        assert path.read_text() == HEADER + ADMIN_RULE + (
            "User:carol topic other Read allow\n"
            "User:carol group orders Read allow\n"
            "User:carol cluster kafka-cluster IdempotentWrite allow\n"
        )
        assert served.process.poll() is None


def test_a_principal_without_alter_or_describe_on_the_cluster_is_refused_and_nothing_changes(
    tmp_path: Path, log_dir: Path
) -> None:
    with users_and_acls(tmp_path, log_dir, ["admin", "bob", "viewer"]) as (served, path):
        path.write_text(path.read_text() + "User:viewer cluster kafka-cluster Describe allow\n")
        before = path.read_bytes()
        bob, viewer = admin_as(served, "bob"), admin_as(served, "viewer")
        new = binding(TOPIC, "orders", LITERAL, "User:bob", AclOperation.ALL)
        for client in (bob, viewer):
            [error] = create(client, [new])
            assert error is not None and error.code() == CLUSTER_AUTHORIZATION_FAILED
            with pytest.raises(KafkaException) as deleted:
                delete(client, acl_filter())
            assert deleted.value.args[0].code() == CLUSTER_AUTHORIZATION_FAILED
        raw = plain_login(served.port, "bob", "pw-bob")  # librdkafka hides describe's error
        answer = raw.request(DESCRIBE_ACLS, 3, raw_filter())
        raw.close()
        assert answer["error_code"] == CLUSTER_AUTHORIZATION_FAILED and answer["resources"] == []
        assert "Describe on the cluster" in answer["error_message"]
        assert len(describe(viewer, acl_filter())) == 2  # Describe on the cluster is enough
        assert path.read_bytes() == before


def test_creations_the_file_cannot_hold_are_refused_by_name_and_nothing_is_written(
    tmp_path: Path, log_dir: Path
) -> None:
    with users_and_acls(tmp_path, log_dir, ["admin"]) as (served, path):
        admin = admin_as(served, "admin")
        refused = {
            "resource name 'abc*' (LITERAL) ends in '*'": binding(
                TOPIC, "abc*", LITERAL, "User:a", AclOperation.READ
            ),
            "resource name 'a b' holds whitespace or '#'": binding(
                TOPIC, "a b", LITERAL, "User:a", AclOperation.READ
            ),
            "resource name 'x#y' holds whitespace or '#'": binding(
                GROUP, "x#y", PREFIXED, "User:a", AclOperation.READ
            ),
            "host '10.1.2.3': host-specific ACLs are not supported": binding(
                TOPIC, "t", LITERAL, "User:a", AclOperation.READ, host="10.1.2.3"
            ),
            "principal 'Group:ops'": binding(TOPIC, "t", LITERAL, "Group:ops", AclOperation.READ),
            "The only valid name for the CLUSTER resource is kafka-cluster": binding(
                CLUSTER, "other", LITERAL, "User:a", AclOperation.ALTER
            ),
        }
        before = path.read_bytes()
        errors = create(admin, list(refused.values()))
        for message, error in zip(refused, errors, strict=True):
            assert error is not None and error.code() == INVALID_REQUEST, (message, error)
            assert message in error.str(), (message, error.str())
        assert path.read_bytes() == before
        good = binding(TOPIC, "t", LITERAL, "User:a", AclOperation.READ)
        errors = create(
            admin, [refused["host '10.1.2.3': host-specific ACLs are not supported"], good]
        )
        assert errors[0] is not None and errors[1] is None
        assert path.read_text() == HEADER + ADMIN_RULE + "User:a topic t Read allow\n"


# --- super users -------------------------------------------------------------------------------


def test_a_super_user_is_allowed_everything_without_a_rule(tmp_path: Path, log_dir: Path) -> None:
    extra = ("--super-users", "User:root; User:ops")
    with users_and_acls(tmp_path, log_dir, ["root", "alice"], *extra) as (served, _):
        assert "super users User:ops, User:root" in served.banner[1]
        root = admin_as(served, "root")
        futures = root.create_topics([NewTopic("fresh", 1)], request_timeout=WAIT_S)
        futures["fresh"].result(WAIT_S)
        assert produce_error(served, "root", "fresh") == 0
        assert produce_error(served, "alice", "fresh") == TOPIC_AUTHORIZATION_FAILED
        reader = binding(TOPIC, "fresh", LITERAL, "User:alice", AclOperation.WRITE)
        assert create(root, [reader]) == [None]
        assert produce_error(served, "alice", "fresh") == 0
        assert len(describe(root, acl_filter())) == 2  # super users are no rules of the file


def test_super_users_need_an_acl_file(log_dir: Path) -> None:
    result = subprocess.run(
        [TXNLOG, "serve", str(log_dir), "--port", "0", "--super-users", "User:root"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "--super-users needs --acl-file" in result.stderr


# --- concurrency -------------------------------------------------------------------------------


def test_admin_clients_on_two_servers_and_acls_cli_edit_one_file_without_losing_an_update(
    tmp_path: Path, log_dir: Path
) -> None:
    """Four AdminClient processes (two on each of two servers over the same ACL file) each
    create ten rules and delete five, one request at a time, while ``txnlog acls add``
    processes add rules beside them: the file ends with exactly the rules expected."""
    path = write_acls(tmp_path / "acls.txt", [])
    flags = ("--acl-file", str(path), "--super-users", "User:ANONYMOUS")
    servers = [start_serve(log_dir, *flags), start_serve(log_dir, *flags)]
    count = 10
    try:
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.txn_wire.acl_admin_workers",
                    servers[n % 2].bootstrap,
                    str(n),
                    str(count),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(4)
        ]
        editors = [
            subprocess.run(
                [
                    TXNLOG,
                    "acls",
                    "add",
                    str(path),
                    "--allow-principal",
                    f"User:cli{m}",
                    "--operation",
                    "Write",
                    "--group",
                    f"g{m}",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            for m in range(6)
        ]
        reports = []
        for worker in workers:
            out, err = worker.communicate(timeout=300)
            assert worker.returncode == 0, err
            reports.append(json.loads(out))
        assert all(editor.returncode == 0 for editor in editors), editors
        for n, report in enumerate(reports):
            assert report["created"] == [None] * count
            assert report["deleted"] == [
                [["TOPIC", f"t{n}-{i}", "LITERAL", f"User:w{n}", "*", "READ", "ALLOW"]]
                for i in range(1, count, 2)
            ]
        expected = {
            f"User:w{n} topic t{n}-{i} Read allow" for n in range(4) for i in range(0, count, 2)
        }
        expected |= {f"User:cli{m} group g{m} Write allow" for m in range(6)}
        lines = [
            line for line in path.read_text().splitlines() if line and not line.startswith("#")
        ]
        assert sorted(lines) == sorted(expected)  # no line twice, none lost
        assert len(load_acls(path).rules) == len(expected)
        assert all(s.process.poll() is None for s in servers)
    finally:
        for served in servers:
            served.stop()


# --- hostile requests --------------------------------------------------------------------------


def raw_creation(**changes: Any) -> dict[str, Any]:
    fields = {
        "resource_type": 2,
        "resource_name": "orders",
        "resource_pattern_type": 3,
        "principal": "User:alice",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
    }
    return {**fields, **changes}


def raw_filter(**changes: Any) -> dict[str, Any]:
    fields = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    return {**fields, **changes}


@pytest.fixture
def open_acl_server(tmp_path: Path, log_dir: Path) -> Iterator[tuple[ServeProcess, Path]]:
    """A server without users over an ACL file of one rule, its anonymous clients super users."""
    path = tmp_path / "acls.txt"
    path.write_text(HEADER + "User:alice topic orders Read allow\n")
    served = start_serve(log_dir, "--acl-file", str(path), "--super-users", "User:ANONYMOUS")
    try:
        yield served, path
    finally:
        served.stop()


HOSTILE_CREATIONS = [
    raw_creation(resource_type=99),
    raw_creation(resource_type=-1),
    raw_creation(resource_type=7),
    raw_creation(resource_pattern_type=0),
    raw_creation(resource_pattern_type=2),
    raw_creation(resource_pattern_type=127),
    raw_creation(operation=0),
    raw_creation(operation=1),
    raw_creation(operation=14),
    raw_creation(operation=-128),
    raw_creation(permission_type=1),
    raw_creation(permission_type=77),
    raw_creation(resource_name=""),
    raw_creation(principal=""),
    raw_creation(principal="User:a\nUser:b topic * All allow"),
    raw_creation(resource_name="x\nUser:evil topic * All allow"),
    raw_creation(host="::1"),
]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_hostile_acl_requests_change_nothing_and_leave_the_server_up(
    open_acl_server: tuple[ServeProcess, Path], version: int
) -> None:
    served, path = open_acl_server
    before = path.read_bytes()
    client = RawClient(served.port)
    answer = client.request(CREATE_ACLS, version, {"creations": HOSTILE_CREATIONS})
    assert [r["error_code"] for r in answer["results"]] == [INVALID_REQUEST] * len(
        HOSTILE_CREATIONS
    )
    assert all(r["error_message"] for r in answer["results"])
    many = client.request(
        CREATE_ACLS, version, {"creations": [raw_creation(resource_name="")] * 5000}
    )
    assert {r["error_code"] for r in many["results"]} == {INVALID_REQUEST}
    assert len(many["results"]) == 5000
    for bad in (
        raw_filter(resource_type_filter=0),
        raw_filter(pattern_type_filter=9),
        raw_filter(operation=99),
        raw_filter(permission_type=-3),
    ):
        answer = client.request(DESCRIBE_ACLS, version, bad)
        assert answer["error_code"] == INVALID_REQUEST and answer["resources"] == []
    answer = client.request(
        DELETE_ACLS,
        version,
        {"filters": [raw_filter(operation=0), raw_filter(principal_filter="User:x")]},
    )
    assert [r["error_code"] for r in answer["filter_results"]] == [INVALID_REQUEST, 0]
    assert path.read_bytes() == before
    answer = client.request(DESCRIBE_ACLS, version, raw_filter())
    assert answer["error_code"] == 0
    [resource] = answer["resources"]
    assert (resource["resource_type"], resource["resource_name"]) == (2, "orders")
    assert resource["acls"] == [
        {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    ]
    client.close()
    assert served.process.poll() is None


def test_a_frame_declaring_a_huge_array_is_closed_unread_and_the_server_stays_up(
    open_acl_server: tuple[ServeProcess, Path],
) -> None:
    served, path = open_acl_server
    before = path.read_bytes()
    for api_key in (CREATE_ACLS, DELETE_ACLS):
        client = RawClient(served.port)
        header = REQUEST_PREFIX.pack(api_key, 1, 7) + struct.pack(">h", -1)  # null client id
        body = header + struct.pack(">i", 2**31 - 1)  # creations / filters: 2**31-1 elements
        client.send_bytes(LENGTH.pack(len(body)) + body)
        assert client.is_closed_by_server()
        client.close()
    client = RawClient(served.port)
    assert client.request(DESCRIBE_ACLS, 1, raw_filter())["error_code"] == 0
    client.close()
    assert path.read_bytes() == before


def test_a_file_broken_by_hand_is_left_alone_and_its_last_good_rules_are_described(
    open_acl_server: tuple[ServeProcess, Path],
) -> None:
    served, path = open_acl_server
    path.write_text(path.read_text() + "User:bob topic\n")
    broken = path.read_bytes()
    client = RawClient(served.port)
    answer = client.request(CREATE_ACLS, 3, {"creations": [raw_creation(), raw_creation(host="")]})
    [stored, refused] = answer["results"]
    assert stored["error_code"] == UNKNOWN_SERVER_ERROR
    assert "line 3: expected 5 fields" in stored["error_message"]
    assert refused["error_code"] == INVALID_REQUEST
    answer = client.request(DELETE_ACLS, 3, {"filters": [raw_filter()]})
    [result] = answer["filter_results"]
    assert result["error_code"] == UNKNOWN_SERVER_ERROR and result["matching_acls"] == []
    answer = client.request(DESCRIBE_ACLS, 3, raw_filter())  # the rules still in force
    assert [r["resource_name"] for r in answer["resources"]] == ["orders"]
    client.close()
    assert path.read_bytes() == broken
