"""Helpers for the authentication and ACL tests: users and ACL files, a raw client that logs
in with SASL PLAIN, and confluent-kafka settings for SASL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.txn_wire.wire_clients import RawClient

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
