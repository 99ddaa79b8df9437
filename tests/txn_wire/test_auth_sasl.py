"""SASL on ``txnlog serve --users-file`` (issue 15 item 4, R-12): real confluent-kafka clients
log in with PLAIN and SCRAM against a real server subprocess; wrong passwords, requests
before authentication and unknown mechanisms are refused as Kafka refuses them, and write
nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from tests.support import directory_bytes
from tests.txn_wire.auth_clients import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    plain_login,
    sasl_config,
    write_users,
)
from tests.txn_wire.serve_process import TXNLOG, ServeProcess, start_serve
from tests.txn_wire.wire_clients import (
    WAIT_S,
    RawClient,
    confluent_consumer,
    confluent_producer,
    consume_to,
    produce_all,
)
from txn_wire.codec import LENGTH
from txn_wire.sasl import (
    SCRAM_SHA_256,
    SaslAuthenticationError,
    SaslSession,
    UsersFileError,
    load_users,
    scram_credential,
)

API_VERSIONS, METADATA = 18, 3
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture
def sasl_server(log_dir: Path, tmp_path: Path) -> Iterator[ServeProcess]:
    served = start_serve(log_dir, "--users-file", str(write_users(tmp_path / "users.json", USERS)))
    try:
        yield served
    finally:
        served.stop()


def test_scram_sha_256_server_matches_the_rfc7677_example() -> None:
    """RFC 7677 §3: user "user", password "pencil"; our server's messages are the RFC's."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    users = {"user": {SCRAM_SHA_256: scram_credential("pencil", SCRAM_SHA_256, salt, 4096)}}
    session = SaslSession(users, server_nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert session.handshake(SCRAM_SHA_256)
    server_first = session.authenticate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    server_final = session.authenticate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert session.principal == "user"


def test_a_wrong_scram_proof_fails_and_names_no_user() -> None:
    users = {"user": {SCRAM_SHA_256: scram_credential("pencil", SCRAM_SHA_256)}}
    session = SaslSession(users, server_nonce=lambda: "server")
    session.handshake(SCRAM_SHA_256)
    first = session.authenticate(b"n,,n=user,r=client").decode()
    nonce = first.split(",")[0][2:]
    with pytest.raises(SaslAuthenticationError, match="invalid user name or password"):
        session.authenticate(f"c=biws,r={nonce},p={base64.b64encode(bytes(32)).decode()}".encode())
    assert session.principal is None


def _client_final(
    password: str, nonce_sent: str, client_first_bare: str, server_first: str
) -> bytes:
    """The client-final message of a SCRAM-SHA-256 client that puts ``nonce_sent`` in it."""
    attrs = dict(item.split("=", 1) for item in server_first.split(","))
    credential = scram_credential(
        password, SCRAM_SHA_256, base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    without_proof = f"c=biws,r={nonce_sent}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(credential.stored_key, auth_message, "sha256").digest()
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_librdkafka_before_2_6_1_sends_its_nonce_twice_and_is_accepted_R12() -> None:
    """librdkafka up to 2.6.0 (Debian's kcat links 2.0.2) puts its own nonce in front of the
    combined nonce once more in client-final (librdkafka#4895); Kafka 3.8.1-3.9 accept that
    form, and so does the server: that exact form only, so the server's fresh nonce must
    still come back (no replay)."""
    users = {"user": {SCRAM_SHA_256: scram_credential("pencil", SCRAM_SHA_256)}}
    for sent, accepted in (
        ("client" + "client" + "server", True),  # librdkafka < 2.6.1
        ("client" + "server", True),  # RFC 5802
        ("someone" + "client" + "server", False),
        ("client" + "client" + "other", False),
        ("clientclient", False),
    ):
        session = SaslSession(users, server_nonce=lambda: "server")
        session.handshake(SCRAM_SHA_256)
        first = session.authenticate(b"n,,n=user,r=client").decode()
        final = _client_final("pencil", sent, "n=user,r=client", first)
        if accepted:
            assert session.authenticate(final).startswith(b"v=")
            assert session.principal == "user"
        else:
            with pytest.raises(SaslAuthenticationError, match="nonce mismatch"):
                session.authenticate(final)
            assert session.principal is None


def test_users_file_errors_name_the_file_the_user_and_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "users.json"
    bad.write_text(json.dumps({"carol": {"scram-sha-256": {"salt": "!!", "iterations": 4096}}}))
    with pytest.raises(UsersFileError, match=r"users.json, user 'carol', scram-sha-256"):
        load_users(bad)
    bad.write_text(json.dumps({"dave": {"pasword": "typo"}}))
    with pytest.raises(UsersFileError, match=r"user 'dave': no credential"):
        load_users(bad)
    bad.write_text("alice:secret")  # not JSON
    with pytest.raises(UsersFileError, match="users file"):
        load_users(bad)
    served = subprocess.run(
        [TXNLOG, "serve", str(tmp_path / "log"), "--port", "0", "--users-file", str(bad)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert served.returncode == 2
    assert "users file" in served.stderr and not (tmp_path / "log").exists()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_authenticates_then_produces_and_consumes(
    sasl_server: ServeProcess, mechanism: str
) -> None:
    config = sasl_config(mechanism, "alice", USERS["alice"])
    producer = confluent_producer(sasl_server.bootstrap, **config)
    acked = produce_all(producer, [("orders", 0, f"{mechanism}-{i}".encode()) for i in range(5)])
    assert acked == [(0, i) for i in range(5)]
    consumer = confluent_consumer(sasl_server.bootstrap, "read_committed", **config)
    got = consume_to(consumer, "orders", {0: 5})
    consumer.close()
    assert [v for _, _, v in got] == [f"{mechanism}-{i}".encode() for i in range(5)]
    assert "SASL required" in sasl_server.banner[1]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_is_the_clients_authentication_error_and_writes_nothing(
    sasl_server: ServeProcess, mechanism: str
) -> None:
    before = directory_bytes(sasl_server.path, content_only=True)
    errors: list[KafkaError] = []
    producer = confluent_producer(
        sasl_server.bootstrap,
        **sasl_config(mechanism, "alice", "not-alices-password"),
        error_cb=errors.append,
        **{"message.timeout.ms": 3000},
    )
    producer.produce("orders", b"must-not-land", partition=0)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and not errors:
        producer.poll(0.2)
    producer.purge()
    producer.flush(5)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed" in errors[0].str()
    assert directory_bytes(sasl_server.path, content_only=True) == before


def test_before_authentication_only_api_versions_and_sasl_are_answered(
    sasl_server: ServeProcess,
) -> None:
    before = directory_bytes(sasl_server.path, content_only=True)
    client = RawClient(sasl_server.port)
    versions = client.request(API_VERSIONS, 3, {"client_software_name": "t"})
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}
    assert ranges[SASL_HANDSHAKE] == (0, 1) and ranges[SASL_AUTHENTICATE] == (0, 2)
    with pytest.raises(ConnectionError):
        client.request(METADATA, 9, {"topics": None})  # Kafka closes the connection
    client.close()
    # a wrong PLAIN password: SASL_AUTHENTICATION_FAILED, then the connection is closed
    client = RawClient(sasl_server.port)
    assert client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    failed = client.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0wrong"})
    assert failed["error_code"] == 58 and "alice" not in failed["error_message"]
    assert client.is_closed_by_server()
    client.close()
    # an unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the ones there are, then closed
    client = RawClient(sasl_server.port)
    refused = client.request(SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
    assert refused == {
        "error_code": 33,
        "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
    }
    assert client.is_closed_by_server()
    client.close()
    # and after a successful login the same request is answered
    client = plain_login(sasl_server.port, "bob", USERS["bob"])
    listed = client.request(METADATA, 9, {"topics": None})["topics"]
    assert "orders" in [t["name"] for t in listed]
    client.close()
    assert directory_bytes(sasl_server.path, content_only=True) == before


def test_sasl_handshake_v0_then_bare_tokens(sasl_server: ServeProcess) -> None:
    """Older clients: after SaslHandshake v0 the tokens travel bare, length-prefixed."""
    client = RawClient(sasl_server.port)
    assert client.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
    token = b"\0alice\0" + USERS["alice"].encode()
    client.send_bytes(LENGTH.pack(len(token)) + token)
    assert client.read_frame() == b""  # PLAIN's empty server token: logged in
    assert (
        client.request(METADATA, 9, {"topics": [{"name": "orders"}]})["topics"][0]["error_code"]
        == 0
    )
    client.close()
    client = RawClient(sasl_server.port)
    client.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
    client.send_bytes(LENGTH.pack(13) + b"\0alice\0wrong!")
    assert client.is_closed_by_server()
    client.close()


def test_without_a_users_file_sasl_is_neither_advertised_nor_answered(
    server: ServeProcess,
) -> None:
    client = RawClient(server.port)
    versions = client.request(API_VERSIONS, 3, {"client_software_name": "t"})
    keys = {k["api_key"] for k in versions["api_keys"]}
    assert SASL_HANDSHAKE not in keys and SASL_AUTHENTICATE not in keys
    with pytest.raises(ConnectionError):
        client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    client.close()
    assert "the server is open" in server.banner[1]


def test_an_unknown_user_sees_the_same_salt_every_time_and_is_refused_like_a_wrong_password() -> (
    None
):
    users = {"user": {SCRAM_SHA_256: scram_credential("pencil", SCRAM_SHA_256)}}
    salts = []
    for _ in range(2):
        session = SaslSession(users, server_nonce=lambda: "server")
        session.handshake(SCRAM_SHA_256)
        first = session.authenticate(b"n,,n=nobody,r=client").decode()
        salts.append(first.split(",")[1])
        proof = base64.b64encode(bytes(32)).decode()
        with pytest.raises(SaslAuthenticationError, match="invalid user name or password"):
            session.authenticate(f"c=biws,r=clientserver,p={proof}".encode())
    assert salts[0] == salts[1]
    plain = SaslSession(users)
    plain.handshake("PLAIN")
    with pytest.raises(SaslAuthenticationError, match="invalid user name or password"):
        plain.authenticate(b"\0nobody\0pencil")


KCAT = shutil.which("kcat")


@pytest.mark.skipif(
    KCAT is None,
    reason="the kcat binary is not on PATH: install the Debian package (apt-get install kcat; "
    ".ci/run does) to run the kcat wire tests",
)
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_debians_kcat_logs_in_with_the_right_password_only_R12(
    sasl_server: ServeProcess, mechanism: str
) -> None:
    """Debian's kcat links librdkafka 2.0.2, whose SCRAM client-final repeats its nonce: it
    must log in, produce and read back with the right password, and fail with a wrong one."""
    assert KCAT is not None

    def run(
        password: str, *args: str, stdin: str = "", quiet: str = "-q"
    ) -> subprocess.CompletedProcess[str]:
        config = sasl_config(mechanism, "alice", password)
        config["sasl.mechanisms"] = config.pop("sasl.mechanism")  # kcat's librdkafka 2.0.2
        sasl = [f"-X{key}={value}" for key, value in config.items()]
        return subprocess.run(
            [KCAT, "-b", sasl_server.bootstrap, quiet, *sasl, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )

    produced = run(USERS["alice"], "-P", "-t", "orders", "-p", "0", stdin="k1\nk2\n")
    assert produced.returncode == 0, produced.stderr
    consumed = run(USERS["alice"], "-C", "-t", "orders", "-p", "0", "-o", "beginning", "-e")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["k1", "k2"]
    before = directory_bytes(sasl_server.path, content_only=True)
    refused = run("not-alices-password", "-P", "-t", "orders", "-p", "0", stdin="x\n", quiet="-v")
    assert refused.returncode != 0
    assert "Authentication failed" in refused.stderr
    assert directory_bytes(sasl_server.path, content_only=True) == before
