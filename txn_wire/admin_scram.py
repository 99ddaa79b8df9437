"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554: the SCRAM
credentials of the server's store (``scram_users.ScramCredentialStore``), answered per user
as Kafka answers them.

Describe: no users named (null or empty) describes every user with a credential, by name;
otherwise one result per distinct name, in the request's order: its mechanisms and iterations,
RESOURCE_NOT_FOUND (91) for a user without credentials, DUPLICATE_RESOURCE (92) for a name
given twice. The request-level error is always 0: librdkafka aborts on any other
(``authorize_scram``), and a store that no longer loads is answered from what it last held.

Alter, per user, validated first (STYLE 3) in Kafka's order: an empty user name is
UNACCEPTABLE_CREDENTIAL (93), a mechanism other than SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2)
UNSUPPORTED_SASL_MECHANISM (33), iterations outside 4096 to 16384 UNACCEPTABLE_CREDENTIAL, one
(user, mechanism) pair named twice, in deletions or upsertions or both, DUPLICATE_RESOURCE;
then, under the store's lock, a deletion of a credential the user does not have is
RESOURCE_NOT_FOUND. A user with any of these errors is left as it was; the others' changes are
written in one durable replace. The user/mechanism rule is that of Kafka's ZooKeeper-era
``ZkAdminManager`` (two mechanisms of one user in one request are fine), which
``txnlog users --add-config SCRAM-SHA-256=[…],SCRAM-SHA-512=[…]`` also allows; Kafka's KRaft
controller refuses any user named twice. One result per distinct user, in the order the request
first names them. An upsertion carries the client's salt and SaltedPassword; the stored key and
server key are derived from it as Kafka's ``ScramFormatter`` does (``sasl``), and the password
never reaches the server. Thread-safe (the store locks).
"""

from __future__ import annotations

import logging
from collections import Counter

from txn_log.errors import TxnLogError
from txn_wire.broker import error_code
from txn_wire.codec import Plain, Request
from txn_wire.sasl import (
    ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    UsersFileError,
    credential_from_salted_password,
)
from txn_wire.scram_users import MAX_ITERATIONS, ScramCredentialStore, UserAlteration

logger = logging.getLogger(__name__)

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
MECHANISMS = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
"""Kafka's ``ScramMechanism`` type byte → mechanism name (0 is UNKNOWN)."""
MECHANISM_TYPES = {name: code for code, name in MECHANISMS.items()}

Error = tuple[int, str]
"""A Kafka error code and its message."""
_DESCRIBED_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request"


def handle_describe_user_scram_credentials(store: ScramCredentialStore, request: Request) -> Plain:
    users = store.users()
    named = [user["name"] for user in request.body.get("users") or []]
    counts = Counter(named)
    results = []
    for name in sorted(users) if not named else list(dict.fromkeys(named)):
        held = users.get(name, {})
        if counts[name] > 1:
            message = f"{_DESCRIBED_TWICE}: {name}"
            results.append(_described(name, (DUPLICATE_RESOURCE, message)))
        elif not held:
            message = f"Attempt to describe a user credential that does not exist: {name}"
            results.append(_described(name, (RESOURCE_NOT_FOUND, message)))
        else:
            infos = [
                {"mechanism": MECHANISM_TYPES[m], "iterations": held[m].iterations}
                for m in sorted(held, key=MECHANISM_TYPES.__getitem__)
            ]
            results.append({**_described(name, None), "credential_infos": infos})
    return {"error_code": 0, "error_message": None, "results": results}


def _described(user: str, error: Error | None) -> Plain:
    code, message = error if error is not None else (0, None)
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


def handle_alter_user_scram_credentials(store: ScramCredentialStore, request: Request) -> Plain:
    deletions = request.body.get("deletions") or []
    upsertions = request.body.get("upsertions") or []
    users = list(dict.fromkeys(a["name"] for a in [*deletions, *upsertions]))
    errors = _request_errors(deletions, upsertions)
    alterations = [_alteration(user, deletions, upsertions) for user in users if user not in errors]
    if alterations:
        errors.update(_apply(store, alterations))
    return {"results": [_altered(user, errors.get(user)) for user in users]}


def _request_errors(deletions: list[Plain], upsertions: list[Plain]) -> dict[str, Error]:
    """user → the first error of its alterations that the request alone shows."""
    errors: dict[str, Error] = {}
    named = [(d, False) for d in deletions] + [(u, True) for u in upsertions]
    for alteration, upsert in named:
        problem = _problem(alteration, upsert=upsert)
        if problem is not None:
            errors.setdefault(alteration["name"], problem)
    pairs = Counter((a["name"], a["mechanism"]) for a in [*deletions, *upsertions])
    for (user, _), count in pairs.items():
        if count > 1 and user not in errors:
            message = "A user credential cannot be altered twice in the same request"
            errors[user] = (DUPLICATE_RESOURCE, message)
    return errors


def _problem(alteration: Plain, *, upsert: bool) -> Error | None:
    if not alteration["name"]:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if alteration["mechanism"] not in MECHANISMS:
        return UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {alteration['mechanism']}"
    if upsert and alteration["iterations"] < ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, f"Too few iterations (at least {ITERATIONS})"
    if upsert and alteration["iterations"] > MAX_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, f"Too many iterations (at most {MAX_ITERATIONS})"
    return None


def _alteration(user: str, deletions: list[Plain], upsertions: list[Plain]) -> UserAlteration:
    upserted: dict[str, ScramCredential] = {}
    for upsertion in upsertions:
        if upsertion["name"] == user:
            mechanism = MECHANISMS[upsertion["mechanism"]]
            upserted[mechanism] = credential_from_salted_password(
                upsertion["salted_password"], mechanism, upsertion["salt"], upsertion["iterations"]
            )
    deleted = frozenset(MECHANISMS[d["mechanism"]] for d in deletions if d["name"] == user)
    return UserAlteration(user, upserted, deleted)


def _apply(store: ScramCredentialStore, alterations: list[UserAlteration]) -> dict[str, Error]:
    """The errors of the users the store did not alter."""
    try:
        outcomes = store.alter(alterations)
    except (UsersFileError, TxnLogError, OSError) as error:
        logger.error("AlterUserScramCredentials: %s not changed: %s", store.path, error)
        failed = (error_code(error), f"the credential store cannot be changed: {error}")
        return {alteration.user: failed for alteration in alterations}
    return {
        user: (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        for user, outcome in outcomes.items()
        if outcome.missing
    }


def _altered(user: str, error: Error | None) -> Plain:
    code, message = error if error is not None else (0, None)
    return {"user": user, "error_code": code, "error_message": message}
