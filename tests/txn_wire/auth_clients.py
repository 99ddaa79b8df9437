"""Helpers for the authentication and ACL tests: users and ACL files, a raw client that logs
in with SASL PLAIN, confluent-kafka settings for SASL, and a server whose users hold grants."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import WAIT_S, RawClient, confluent_consumer, confluent_producer

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


def write_users(path: Path, users: dict[str, str]) -> Path:
    """A users file of plain passwords (hashed by the server on load)."""
    path.write_text(json.dumps({user: {"password": pw} for user, pw in users.items()}))
    return path


def write_acls(path: Path, lines: list[str]) -> Path:
    path.write_text("# principal resource-type name operation permission\n" + "\n".join(lines))
    return path


def plain_login(port: int, user: str, password: str) -> RawClient:
    """A raw connection authenticated with SaslHandshake v1 + SaslAuthenticate v2 (PLAIN)."""
    client = RawClient(port)
    handshake = client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    if handshake["error_code"] != 0:
        raise AssertionError(f"SaslHandshake answered {handshake}")
    token = b"\0" + user.encode() + b"\0" + password.encode()
    answer = client.request(SASL_AUTHENTICATE, 2, {"auth_bytes": token})
    if answer["error_code"] != 0:
        raise AssertionError(f"SaslAuthenticate answered {answer}")
    return client


def sasl_config(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def logs_in(
    bootstrap: str, mechanism: str, user: str, password: str, *, consumer: bool = False
) -> bool:
    """Whether a new confluent-kafka producer with these credentials gets a record to
    "orders" acked (True) or the authentication error (False); ``consumer``: whether a new
    consumer gets the topic's metadata."""
    errors: list[KafkaError] = []
    config = {**sasl_config(mechanism, user, password), "error_cb": errors.append}
    if consumer:
        return _consumer_logs_in(bootstrap, config, errors)
    acked: list[object] = []
    producer = confluent_producer(bootstrap, **config)
    producer.produce("orders", b"x", partition=0, on_delivery=lambda e, m: acked.append(e))
    deadline = time.monotonic() + WAIT_S
    while not acked and not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()
    producer.flush(5)
    if errors:
        assert errors[0].code() == KafkaError._AUTHENTICATION, errors
        return False
    assert acked == [None], f"neither acked nor refused within {WAIT_S}s"
    return True


def _consumer_logs_in(bootstrap: str, config: dict[str, Any], errors: list[KafkaError]) -> bool:
    client = confluent_consumer(bootstrap, "read_committed", **config)
    try:
        deadline = time.monotonic() + WAIT_S
        while not errors and time.monotonic() < deadline:
            try:
                client.list_topics("orders", timeout=0.5)
            except KafkaException:
                continue
            return not errors
    finally:
        client.close()
    assert errors, f"neither answered nor refused within {WAIT_S}s"
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors
    return False


@contextmanager
def serve_with_grants(
    files: Path, log_dir: Path, grants: dict[str, list[str]]
) -> Iterator[ServeProcess]:
    """``txnlog serve`` over ``log_dir`` whose users (password ``pw-<user>``, files written in
    ``files``) are each allowed their ``grants`` ("topic app-* Delete" ...), nothing else."""
    users = write_users(files / "users.json", {user: f"pw-{user}" for user in grants})
    lines = [f"User:{u} {grant} allow" for u, listed in grants.items() for grant in listed]
    acls = write_acls(files / "acls.txt", lines)
    served = start_serve(log_dir, "--users-file", str(users), "--acl-file", str(acls))
    try:
        yield served
    finally:
        served.stop()


def admin_as(server: ServeProcess, user: str) -> AdminClient:
    """An AdminClient logged in as ``user`` of ``serve_with_grants``."""
    return AdminClient(
        {"bootstrap.servers": server.bootstrap, **sasl_config("PLAIN", user, f"pw-{user}")}
    )
