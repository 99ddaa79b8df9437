"""SCRAM users of ``txnlog serve --users-file``, changed without writing Python: what Kafka's
``kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=…]'`` does
to a Kafka cluster, ``txnlog users`` does to a users file (format in ``txn_wire.sasl``).

Only salted credentials are written (salt, iterations, stored key, server key), never a
password: a user still held as a plain password is turned into the credentials it stands for
when it is first altered. Each change happens under an exclusive lock beside the file
(``<file>.lock``) and replaces the file whole, durably, so two operators never lose each
other's change and a running server (``WatchedFile``) reads the old file or the new one.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txn_log.storage.durable_file import write_durably
from txn_wire.sasl import (
    FILE_KEYS,
    ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    entry_credentials,
    load_users,
    scram_credential,
)
from txn_wire.watched_file import editor_lock

SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations
_ENTRY = re.compile(r"\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[([^\]]*)\]\s*(?:,|$)")


class ScramConfigError(ValueError):
    """A ``--add-config`` / ``--delete-config`` that cannot be applied: the message names the
    user, the mechanism and what would be valid. Nothing was written."""


@dataclass(frozen=True)
class ScramChange:
    """What to set for one mechanism of one user."""

    mechanism: str
    password: str
    iterations: int = ITERATIONS


def parse_add_config(text: str) -> list[ScramChange]:
    """Kafka's ``--add-config`` form for users:
    ``SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=…]``."""
    changes: list[ScramChange] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _ENTRY.match(text, position)
        if match is None:
            raise ScramConfigError(
                f"cannot read --add-config at {text[position:][:40]!r}; expected "
                "SCRAM-SHA-256=[password=SECRET] or SCRAM-SHA-512=[iterations=8192,password=SECRET]"
                ", comma-separated"
            )
        mechanism, body = match.group(1), match.group(2)
        changes.append(_change(mechanism, body))
        position = match.end()
    if not changes:
        raise ScramConfigError("--add-config is empty; expected SCRAM-SHA-256=[password=SECRET]")
    seen = [change.mechanism for change in changes]
    if len(set(seen)) != len(seen):
        raise ScramConfigError(f"--add-config names a mechanism twice: {', '.join(seen)}")
    return changes


def _change(mechanism: str, body: str) -> ScramChange:
    # the password is last and may hold commas (Kafka's form puts it last as well)
    settings: dict[str, str] = {}
    rest = body
    while rest:
        key, sep, value = rest.partition("=")
        key = key.strip()
        if not sep:
            raise ScramConfigError(f"{mechanism}=[{body}]: expected key=value pairs")
        if key == "password":
            settings["password"] = value
            break
        value, _, rest = value.partition(",")
        settings[key] = value.strip()
    unknown = set(settings) - {"password", "iterations"}
    if unknown:
        raise ScramConfigError(
            f"{mechanism}: unknown setting {', '.join(sorted(unknown))}; valid are iterations, "
            "password"
        )
    if not settings.get("password"):
        raise ScramConfigError(f"{mechanism}: no password; expected {mechanism}=[password=SECRET]")
    iterations = settings.get("iterations", str(ITERATIONS))
    if not iterations.isdigit() or not ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
        raise ScramConfigError(
            f"{mechanism}: iterations {iterations!r} out of range; valid are {ITERATIONS} to "
            f"{MAX_ITERATIONS} (Kafka's limits)"
        )
    return ScramChange(mechanism, settings["password"], int(iterations))


def parse_delete_config(text: str) -> list[str]:
    """``SCRAM-SHA-256,SCRAM-SHA-512`` → the mechanisms to remove."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in SCRAM_MECHANISMS]
    if bad or not names:
        raise ScramConfigError(
            f"--delete-config {text!r}: expected {' and/or '.join(SCRAM_MECHANISMS)}"
        )
    return names


def alter_user(
    path: Path, user: str, add: Iterable[ScramChange] = (), delete: Iterable[str] = ()
) -> dict[str, int]:
    """Set and remove SCRAM credentials of ``user`` in the users file at ``path`` (created when
    missing); returns the user's mechanisms and their iterations after the change (a user left
    with none is removed). ScramConfigError, with nothing written, when asked to remove a
    credential the user does not have (Kafka: RESOURCE_NOT_FOUND) or to both add and remove one
    mechanism; UsersFileError when the file does not load."""
    add, delete = list(add), list(delete)
    if not user:
        raise ScramConfigError("--entity-name: a user name is needed")
    both = {change.mechanism for change in add} & set(delete)
    if both:
        raise ScramConfigError(
            f"user {user!r}: {', '.join(sorted(both))} is both added and deleted in one change"
        )
    path = Path(path)
    with editor_lock(path):
        document = _read_document(path)
        entry = document.get(user)
        held = entry_credentials(path, user, entry) if entry is not None else {}
        missing = [mechanism for mechanism in delete if mechanism not in held]
        if missing:
            raise ScramConfigError(
                f"user {user!r} has no {', '.join(missing)} credential to delete; it has "
                f"{', '.join(sorted(held)) or 'none'}"
            )
        for mechanism in delete:
            del held[mechanism]
        for change in add:
            held[change.mechanism] = scram_credential(
                change.password, change.mechanism, iterations=change.iterations
            )
        if held:
            document[user] = {FILE_KEYS[m]: _stored(held[m]) for m in sorted(held)}
        else:
            document.pop(user, None)
        write_durably(path, (json.dumps(document, indent=1, sort_keys=True) + "\n").encode())
    return {mechanism: held[mechanism].iterations for mechanism in sorted(held)}


def describe_users(path: Path) -> dict[str, dict[str, int]]:
    """user → mechanism → iterations, as the server would load them."""
    return {
        user: {mechanism: credential.iterations for mechanism, credential in sorted(held.items())}
        for user, held in sorted(load_users(path).items())
    }


def _read_document(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    load_users(path)  # refuse to rewrite a file the server could not read
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def _stored(credential: ScramCredential) -> dict[str, Any]:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "salt": b64(credential.salt),
        "iterations": credential.iterations,
        "stored_key": b64(credential.stored_key),
        "server_key": b64(credential.server_key),
    }
