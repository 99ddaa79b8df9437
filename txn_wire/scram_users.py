"""The SCRAM users of a users file: the credential store of ``txnlog serve`` (SASL logins,
DescribeUserScramCredentials, AlterUserScramCredentials) and what ``txnlog users`` changes
without writing Python, as Kafka's ``kafka-configs --entity-type users --alter --add-config
'SCRAM-SHA-256=[password=…]'`` does to a Kafka cluster (format in ``txn_wire.sasl``).

A server's store is the file ``--users-file`` names or, without one, ``users.json`` in its log
directory (``default_users_file``): as Kafka keeps SCRAM credentials in the cluster's
metadata, whatever its listeners, every server over one log directory shares them (DESIGN §1).

Only salted credentials are written (salt, iterations, stored key, server key), never a
password: a user still held as a plain password is turned into the credentials it stands for
when it is first altered. Each change happens under an exclusive lock beside the file
(``<file>.lock``, ``watched_file.editor_lock``) and replaces the file whole, durably, so two
editors (``txnlog users``, the API on any connection of any server) never lose each other's
change and a running server (``WatchedFile``) reads the old file or the new one.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txn_log.storage.durable_file import write_durably
from txn_wire.sasl import (
    FILE_KEYS,
    ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    Users,
    entry_credentials,
    load_users,
    scram_credential,
)
from txn_wire.watched_file import WatchedFile, editor_lock

SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations
DEFAULT_USERS_FILE = "users.json"
"""The credential store in a log directory, for a server started without ``--users-file``."""
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
    upsertions = {
        change.mechanism: scram_credential(
            change.password, change.mechanism, iterations=change.iterations
        )
        for change in add
    }
    outcome = alter_users(Path(path), [UserAlteration(user, upsertions, frozenset(delete))])[user]
    if outcome.missing:
        raise ScramConfigError(
            f"user {user!r} has no {', '.join(outcome.missing)} credential to delete; it has "
            f"{', '.join(outcome.held) or 'none'}"
        )
    return outcome.held


@dataclass(frozen=True)
class UserAlteration:
    """What one change does to one user: the credentials to set, by mechanism, and the
    mechanisms whose credential to remove (never one mechanism in both: the caller refuses
    that first, as Kafka's DUPLICATE_RESOURCE)."""

    user: str
    upsertions: Mapping[str, ScramCredential] = field(default_factory=dict)
    deletions: frozenset[str] = frozenset()


@dataclass(frozen=True)
class UserOutcome:
    """``missing``: the mechanisms asked to be removed that the user has no credential for
    (then nothing of this user changed); ``held``: the user's mechanisms and iterations after."""

    missing: tuple[str, ...]
    held: dict[str, int]


def alter_users(path: Path, alterations: Sequence[UserAlteration]) -> dict[str, UserOutcome]:
    """Apply ``alterations`` (at most one per user) to the users file at ``path`` (created when
    missing), under its editor lock, in one durable replace, and say what became of each user.
    Each user's alteration applies whole or not at all: one removing a credential the user does
    not have changes nothing of that user (Kafka's RESOURCE_NOT_FOUND), the others still apply.
    UsersFileError, nothing written, when the file does not load; StorageError when it cannot
    be replaced (the file is then unchanged)."""
    outcomes: dict[str, UserOutcome] = {}
    with editor_lock(path):
        document = _read_document(path)
        for alteration in alterations:
            user = alteration.user
            entry = document.get(user)
            held = entry_credentials(path, user, entry) if entry is not None else {}
            missing = tuple(sorted(m for m in alteration.deletions if m not in held))
            if not missing:
                for mechanism in alteration.deletions:
                    del held[mechanism]
                held.update(alteration.upsertions)
                if held:
                    document[user] = {FILE_KEYS[m]: _stored(held[m]) for m in sorted(held)}
                else:
                    document.pop(user, None)
            iterations = {mechanism: held[mechanism].iterations for mechanism in sorted(held)}
            outcomes[user] = UserOutcome(missing, iterations)
        if any(not outcome.missing for outcome in outcomes.values()):
            text = json.dumps(document, indent=1, sort_keys=True) + "\n"
            write_durably(path, text.encode())
    return outcomes


class ScramCredentialStore:
    """A server's SCRAM credentials: the users file it authenticates SASL clients with and
    that DescribeUserScramCredentials and AlterUserScramCredentials read and change.

    ``users()`` goes through a ``WatchedFile`` (one ``stat``, the file re-read when it
    changed), ``alter`` through ``alter_users``, so a change made through the API, by
    ``txnlog users`` or by another server over the same file applies to the next connection
    and the next describe, without a restart. Thread-safe."""

    def __init__(self, path: Path, *, must_exist: bool) -> None:
        """Loads the file now: UsersFileError when it does not load, or when it is missing and
        ``must_exist`` (a file named on the command line); a missing default file is a store
        with no users yet, created by the first alteration."""
        self.path = Path(path)
        loaded = load_users(self.path) if must_exist or self.path.exists() else {}
        self._watched = WatchedFile(self.path, load_users, loaded)

    def users(self) -> Users:
        return self._watched.current()

    def alter(self, alterations: Sequence[UserAlteration]) -> dict[str, UserOutcome]:
        return alter_users(self.path, alterations)


def default_users_file(log_dir: Path) -> Path:
    """The credential store of the log at ``log_dir`` (``DEFAULT_USERS_FILE`` in it)."""
    return Path(log_dir) / DEFAULT_USERS_FILE


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
