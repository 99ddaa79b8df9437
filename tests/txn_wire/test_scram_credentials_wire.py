"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), as Kafka answers them
(KIP-554, R-12), through confluent-kafka's AdminClient against real ``txnlog serve``
processes: a server started as librdkafka's suite starts it (open, no users file) answers both
from the credential store beside its log; credentials upserted through the API let a SCRAM
client in on a SASL_PLAINTEXT listener of the same server, and a deleted one no longer does;
refused alterations are named with Kafka's codes and leave the users file as it was; the API
from two connections and ``txnlog users`` in another process lose none of each other's
changes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.txn_wire.auth_clients import (
    admin_as,
    logs_in,
    plain_login,
    sasl_config,
    serve_with_grants,
)
from tests.txn_wire.serve_process import TXNLOG, ServeProcess, start_serve
from tests.txn_wire.wire_clients import WAIT_S, RawClient

SHA_256, SHA_512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
API_VERSIONS, METADATA, DESCRIBE, ALTER = 18, 3, 50, 51
SASL_HANDSHAKE = 17
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 91, 92, 93
UNSUPPORTED_SASL_MECHANISM, CLUSTER_AUTHORIZATION_FAILED = 33, 31
TWO_LISTENERS = (
    "--listener", "PLAINTEXT://127.0.0.1:0", "--listener", "SASL_PLAINTEXT://127.0.0.1:0",
)  # fmt: skip


@pytest.fixture
def suite_server(log_dir: Path) -> Iterator[ServeProcess]:
    """As ``integration/librdkafka_run.py`` starts it: open, no users file."""
    served = start_serve(log_dir, "--auto-create-topics", "--default-partitions", "4")
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def two_listeners(log_dir: Path) -> Iterator[ServeProcess]:
    """One PLAINTEXT and one SASL_PLAINTEXT listener over the same log and credentials."""
    served = start_serve(log_dir, "--auto-create-topics", *TWO_LISTENERS)
    try:
        yield served
    finally:
        served.stop()


def admin(bootstrap: str, **config: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **config})


def upsert(user: str, password: bytes, iterations: int = 8192, mechanism: Any = SHA_256) -> Any:
    return UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), password, b"salt-of-" + user.encode()
    )


def alter(client: AdminClient, alterations: list[UserScramCredentialAlteration]) -> dict[str, Any]:
    """user → None (applied) or the Kafka error code it was refused with."""
    futures = client.alter_user_scram_credentials(alterations, request_timeout=WAIT_S)
    return {user: _outcome(future) for user, future in futures.items()}


def describe(client: AdminClient, users: list[str]) -> dict[str, Any]:
    """user → [(mechanism, iterations)] or the Kafka error code of its description."""
    futures = client.describe_user_scram_credentials(users, request_timeout=WAIT_S)
    return {user: _outcome(future) for user, future in futures.items()}


def _outcome(future: Any) -> Any:
    try:
        result = future.result(WAIT_S)
    except KafkaException as error:
        code: int = error.args[0].code()
        return code
    if result is None:
        return None
    return [(info.mechanism, info.iterations) for info in result.scram_credential_infos]


def test_an_open_server_started_as_the_suite_starts_it_answers_both_apis(
    suite_server: ServeProcess,
) -> None:
    client = admin(suite_server.bootstrap)
    assert describe(client, ["nobody"]) == {"nobody": RESOURCE_NOT_FOUND}
    assert alter(client, [upsert("alice", b"alice-secret")]) == {"alice": None}
    assert describe(client, ["alice"]) == {"alice": [(SHA_256, 8192)]}
    # kept beside the log, salted: the password is not on disk
    stored = (suite_server.path / "users.json").read_text()
    assert "alice-secret" not in stored and "stored_key" in stored
    assert alter(client, [UserScramCredentialDeletion("alice", SHA_256)]) == {"alice": None}
    assert describe(client, ["alice"]) == {"alice": RESOURCE_NOT_FOUND}
    everyone = client.describe_user_scram_credentials(request_timeout=WAIT_S).result(WAIT_S)
    assert everyone == {}


def test_null_bytes_in_salt_and_password_are_taken_as_librdkafka_sends_them(
    suite_server: ServeProcess,
) -> None:
    """librdkafka's 0081 third variant: salt b"s\\0l\\0", password b"\\0as\\0word"."""
    client = admin(suite_server.bootstrap)
    nulls = UserScramCredentialUpsertion(
        "nul-user", ScramCredentialInfo(SHA_256, 10000), b"\0as\0word", b"s\0l\0"
    )
    assert alter(client, [nulls]) == {"nul-user": None}
    assert describe(client, ["nul-user"]) == {"nul-user": [(SHA_256, 10000)]}


def test_upserted_credentials_let_a_scram_client_in_on_the_sasl_listener_until_deleted(
    two_listeners: ServeProcess,
) -> None:
    plaintext = f"127.0.0.1:{two_listeners.listener_ports['PLAINTEXT']}"
    sasl = f"127.0.0.1:{two_listeners.listener_ports['SASL_PLAINTEXT']}"
    client = admin(plaintext)
    assert not logs_in(sasl, "SCRAM-SHA-256", "carol", "carol-secret")
    both = [
        upsert("carol", b"carol-secret", 8192, SHA_256),
        upsert("carol", b"carol-secret", 4096, SHA_512),
    ]
    assert alter(client, both) == {"carol": None}
    assert describe(client, ["carol"]) == {"carol": [(SHA_256, 8192), (SHA_512, 4096)]}
    assert logs_in(sasl, "SCRAM-SHA-256", "carol", "carol-secret")
    assert logs_in(sasl, "SCRAM-SHA-512", "carol", "carol-secret", consumer=True)
    assert logs_in(sasl, "PLAIN", "carol", "carol-secret")
    assert not logs_in(sasl, "SCRAM-SHA-256", "carol", "not-carols")
    # the API on the SASL listener itself, logged in as carol (no ACLs: allowed)
    as_carol = admin(sasl, **sasl_config("SCRAM-SHA-256", "carol", "carol-secret"))
    assert alter(as_carol, [UserScramCredentialDeletion("carol", SHA_256)]) == {"carol": None}
    assert describe(client, ["carol"]) == {"carol": [(SHA_512, 4096)]}
    assert not logs_in(sasl, "SCRAM-SHA-256", "carol", "carol-secret")
    assert alter(client, [UserScramCredentialDeletion("carol", SHA_512)]) == {"carol": None}
    assert describe(client, ["carol"]) == {"carol": RESOURCE_NOT_FOUND}
    assert not logs_in(sasl, "SCRAM-SHA-512", "carol", "carol-secret")
    assert not logs_in(sasl, "PLAIN", "carol", "carol-secret")


def test_each_listener_keeps_its_security_protocol(two_listeners: ServeProcess) -> None:
    """PLAINTEXT: no SASL offered, every request answered; SASL_PLAINTEXT: only ApiVersions and
    SASL before a login. Both advertise the SCRAM credential APIs, v0."""
    ports = two_listeners.listener_ports
    assert "PLAINTEXT" in two_listeners.banner[0] and "SASL_PLAINTEXT" in two_listeners.banner[0]
    for protocol, sasl in (("PLAINTEXT", False), ("SASL_PLAINTEXT", True)):
        client = RawClient(ports[protocol])
        versions = client.request(API_VERSIONS, 3, {"client_software_name": "t"})
        ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}
        assert ranges[DESCRIBE] == ranges[ALTER] == (0, 0)
        assert (SASL_HANDSHAKE in ranges) is sasl
        if sasl:
            with pytest.raises(ConnectionError):
                client.request(METADATA, 9, {"topics": None})
        else:
            brokers = client.request(METADATA, 9, {"topics": None})["brokers"]
            assert brokers[0]["port"] == ports[protocol]  # the listener asked
        client.close()


def test_refused_alterations_are_named_and_leave_the_users_file_unchanged(
    suite_server: ServeProcess,
) -> None:
    client = admin(suite_server.bootstrap)
    assert alter(client, [upsert("alice", b"alice-secret")]) == {"alice": None}
    users_file = suite_server.path / "users.json"
    before = users_file.read_bytes()
    refused = alter(
        client,
        [
            upsert("few", b"pw", iterations=4095),
            upsert("many", b"pw", iterations=16385),
            UserScramCredentialDeletion("alice", SHA_512),  # alice has no SCRAM-SHA-512
            upsert("twice", b"pw"),
            UserScramCredentialDeletion("twice", SHA_256),
        ],
    )
    assert refused == {
        "few": UNACCEPTABLE_CREDENTIAL,
        "many": UNACCEPTABLE_CREDENTIAL,
        "alice": RESOURCE_NOT_FOUND,
        "twice": DUPLICATE_RESOURCE,
    }
    assert users_file.read_bytes() == before
    # what no client library sends: an unknown mechanism, an empty user, a user described twice
    raw = RawClient(suite_server.port)
    empty_user = {"name": "", "mechanism": 1, "iterations": 4096, "salt": b"s"}
    answer = raw.request(
        ALTER,
        0,
        {
            "deletions": [{"name": "alice", "mechanism": 3}],
            "upsertions": [{**empty_user, "salted_password": b"p"}],
        },
    )
    assert [(r["user"], r["error_code"]) for r in answer["results"]] == [
        ("alice", UNSUPPORTED_SASL_MECHANISM),
        ("", UNACCEPTABLE_CREDENTIAL),
    ]
    assert all(r["error_message"] for r in answer["results"])
    described = raw.request(DESCRIBE, 0, {"users": [{"name": "alice"}, {"name": "alice"}]})
    assert described["error_code"] == 0
    assert [(r["user"], r["error_code"]) for r in described["results"]] == [
        ("alice", DUPLICATE_RESOURCE)
    ]
    raw.close()
    assert users_file.read_bytes() == before
    assert describe(client, ["alice"]) == {"alice": [(SHA_256, 8192)]}


def test_describe_needs_describe_and_alter_needs_alter_on_the_cluster(
    tmp_path: Path, log_dir: Path
) -> None:
    grants = {
        "auditor": ["cluster kafka-cluster Describe"],
        "operator": ["cluster kafka-cluster Alter"],
        "nobody": ["topic orders Read"],
    }
    with serve_with_grants(tmp_path, log_dir, grants) as served:
        users_file = tmp_path / "users.json"
        before = users_file.read_bytes()
        nobody, auditor = admin_as(served, "nobody"), admin_as(served, "auditor")
        assert describe(nobody, ["auditor"]) == {"auditor": CLUSTER_AUTHORIZATION_FAILED}
        assert alter(nobody, [upsert("nobody", b"x")]) == {"nobody": CLUSTER_AUTHORIZATION_FAILED}
        assert describe(auditor, ["operator"]) == {"operator": [(SHA_256, 4096), (SHA_512, 4096)]}
        assert alter(auditor, [upsert("auditor", b"x"), upsert("zed", b"y")]) == {
            "auditor": CLUSTER_AUTHORIZATION_FAILED,
            "zed": CLUSTER_AUTHORIZATION_FAILED,
        }
        assert users_file.read_bytes() == before
        # Alter implies Describe, as in Kafka
        operator = admin_as(served, "operator")
        assert alter(operator, [upsert("zed", b"zed-secret")]) == {"zed": None}
        assert describe(operator, ["zed"]) == {"zed": [(SHA_256, 8192)]}
        assert "zed-secret" not in users_file.read_text()
        # the file named by --users-file is the store: nothing was written beside the log
        assert not (log_dir / "users.json").exists()
        # refused per user, never at the top (librdkafka aborts on a request-level error);
        # every user, for one who may describe none, is none
        raw = plain_login(served.port, "nobody", "pw-nobody")
        refused = raw.request(DESCRIBE, 0, {"users": [{"name": "operator"}]})
        assert (refused["error_code"], refused["results"][0]["error_code"]) == (0, 31)
        assert raw.request(DESCRIBE, 0, {"users": None})["results"] == []
        raw.close()


API_WORKER = """
import sys
from confluent_kafka.admin import (
    AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion,
)
bootstrap, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})
for i in range(count):
    user = f"{who}-{i}"
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsertion = UserScramCredentialUpsertion(user, info, f"pw-{user}".encode())
    admin.alter_user_scram_credentials([upsertion])[user].result(60)
"""

CLI_WORKER = """
import sys
from txn_log.cli import main
users_file, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(count):
    user = f"{who}-{i}"
    config = f"SCRAM-SHA-512=[password=pw-{user}]"
    code = main(["users", "--users-file", users_file, "--alter", "--entity-name", user,
                 "--add-config", config])
    assert code == 0, code
"""


def test_the_api_from_two_connections_and_txnlog_users_lose_no_change(
    two_listeners: ServeProcess,
) -> None:
    plaintext = f"127.0.0.1:{two_listeners.listener_ports['PLAINTEXT']}"
    users_file = two_listeners.path / "users.json"
    count = 8
    workers = [
        subprocess.Popen([sys.executable, "-c", API_WORKER, plaintext, who, str(count)])
        for who in ("left", "right")
    ]
    workers.append(
        subprocess.Popen([sys.executable, "-c", CLI_WORKER, str(users_file), "cli", str(count)])
    )
    for worker in workers:
        assert worker.wait(timeout=WAIT_S * 4) == 0
    expected = {f"{who}-{i}" for who in ("left", "right", "cli") for i in range(count)}
    assert set(json.loads(users_file.read_text())) == expected
    client = admin(plaintext)  # held: a destroyed client fails its futures
    described = client.describe_user_scram_credentials(request_timeout=WAIT_S).result(WAIT_S)
    assert set(described) == expected
    assert [i.mechanism for i in described["cli-0"].scram_credential_infos] == [SHA_512]
    sasl = f"127.0.0.1:{two_listeners.listener_ports['SASL_PLAINTEXT']}"
    assert logs_in(sasl, "SCRAM-SHA-256", "right-7", "pw-right-7")
    assert logs_in(sasl, "SCRAM-SHA-512", "cli-7", "pw-cli-7")


def test_the_stored_keys_are_kafkas_from_the_salted_password() -> None:
    """Kafka's ScramFormatter: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
    HMAC(SaltedPassword, "Server Key"), the same as from the password itself."""
    from txn_wire.sasl import SCRAM_SHA_512, credential_from_salted_password, scram_credential

    salt = b"s\0l\0"
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", salt, 4096)
    derived = credential_from_salted_password(salted, SCRAM_SHA_512, salt, 4096)
    assert derived == scram_credential("pw", SCRAM_SHA_512, salt, 4096)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--listener", "SSL://127.0.0.1:0"], "PLAINTEXT or SASL_PLAINTEXT"),
        (["--listener", "PLAINTEXT://127.0.0.1"], "PROTOCOL://HOST:PORT"),
        (["--listener", "PLAINTEXT://127.0.0.1:0", "--port", "9092"], "--port"),
        (["--listener", "PLAINTEXT://127.0.0.1:0"] * 2, "PLAINTEXT twice"),
    ],
)
def test_listeners_are_checked_before_anything_starts(
    tmp_path: Path, options: list[str], named: str
) -> None:
    served = subprocess.run(
        [TXNLOG, "serve", str(tmp_path / "log"), *options],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert served.returncode == 2, served.stderr
    assert named in served.stderr
    assert not (tmp_path / "log").exists()
