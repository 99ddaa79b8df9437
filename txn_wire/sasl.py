"""SASL for ``txnlog serve --users-file``: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802,
RFC 7677), the mechanisms Kafka offers, checked against one users file.

The users file is JSON: an object of user name → credentials, where credentials are either a
plain password, hashed on load (never kept), or SCRAM credentials computed beforehand (the
password is then not on disk at all; ``scram_credential`` computes them)::

    {"alice": {"password": "alice-secret"},
     "bob": {"scram-sha-256": {"salt": "<base64>", "iterations": 4096,
                               "stored_key": "<base64>", "server_key": "<base64>"}}}

A plain password gets SCRAM-SHA-256 and SCRAM-SHA-512 credentials with a random salt and
``ITERATIONS`` rounds. PLAIN is checked against the user's SCRAM credentials (the password it
carries is salted and hashed the same way), so a user may log in with any mechanism that has a
credential for them. User names and passwords are compared as given (no SASLprep).

``SaslSession`` is one connection's exchange, sans-IO: ``handshake`` picks a mechanism,
``authenticate`` takes each client token and gives the server's answer. A failed exchange
raises ``SaslAuthenticationError`` (Kafka's SASL_AUTHENTICATION_FAILED, 58) without saying
whether the user or the password was wrong. Not thread-safe: one per connection.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
ITERATIONS = 4096  # Kafka's minimum for SCRAM
_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
FILE_KEYS = {SCRAM_SHA_256: "scram-sha-256", SCRAM_SHA_512: "scram-sha-512"}
_FAILED = "Authentication failed: invalid user name or password"
_UNKNOWN_USER_KEY = secrets.token_bytes(32)
"""Per process: derives the salt shown for a user that does not exist (same on every try)."""


class SaslAuthenticationError(Exception):
    """SASL_AUTHENTICATION_FAILED (58): the exchange failed; the connection is closed."""


class UsersFileError(ValueError):
    """The users file cannot be read: the message names the file, the user and the field."""


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a password for one SCRAM mechanism (RFC 5802 §3)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def scram_credential(
    password: str, mechanism: str, salt: bytes | None = None, iterations: int = ITERATIONS
) -> ScramCredential:
    """The SCRAM credential of ``password`` (a random 32-byte salt unless given)."""
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)
    return credential_from_salted_password(salted, mechanism, salt, iterations)


def credential_from_salted_password(
    salted_password: bytes, mechanism: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential of a SaltedPassword (RFC 5802 ``Hi(password, salt, i)``), as Kafka's
    ``ScramFormatter.generateCredential`` makes it from what AlterUserScramCredentials carries:
    StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
    "Server Key"). The password itself is never needed."""
    name = _HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", name).digest()
    server_key = hmac.new(salted_password, b"Server Key", name).digest()
    return ScramCredential(salt, iterations, hashlib.new(name, client_key).digest(), server_key)


Users = dict[str, dict[str, ScramCredential]]
"""user name → mechanism → credential."""


def load_users(path: Path) -> Users:
    """Read a users file (format in the module docstring); UsersFileError if malformed. An
    empty object is a file with no users yet: every login is refused."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise UsersFileError(f"users file {path}: {error}") from error
    if not isinstance(data, dict):
        raise UsersFileError(f"users file {path}: expected a JSON object of user → credentials")
    return {str(user): entry_credentials(path, str(user), entry) for user, entry in data.items()}


def entry_credentials(path: Path, user: str, entry: Any) -> dict[str, ScramCredential]:
    where = f"users file {path}, user {user!r}"
    if not isinstance(entry, dict):
        raise UsersFileError(f"{where}: expected an object with 'password' or 'scram-sha-256'")
    if isinstance(entry.get("password"), str):
        password = entry["password"]
        return {m: scram_credential(password, m) for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
    found = {}
    for mechanism, key in FILE_KEYS.items():
        if key in entry:
            found[mechanism] = _stored(where, key, entry[key])
    if not found:
        raise UsersFileError(
            f"{where}: no credential; give 'password' (a string), 'scram-sha-256' or "
            "'scram-sha-512' (salt, iterations, stored_key, server_key)"
        )
    return found


def _stored(where: str, key: str, value: Any) -> ScramCredential:
    try:
        credential = ScramCredential(
            base64.b64decode(value["salt"], validate=True),
            int(value["iterations"]),
            base64.b64decode(value["stored_key"], validate=True),
            base64.b64decode(value["server_key"], validate=True),
        )
    except (TypeError, KeyError, ValueError) as error:
        raise UsersFileError(
            f"{where}, {key}: needs base64 salt, stored_key, server_key and an integer "
            f"iterations ({type(error).__name__}: {error})"
        ) from error
    if credential.iterations < ITERATIONS:
        raise UsersFileError(f"{where}, {key}: iterations must be at least {ITERATIONS}")
    return credential


class SaslSession:
    """One connection's SASL exchange: ``principal`` is set once it succeeded."""

    def __init__(
        self, users: Users, *, server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24)
    ) -> None:
        self._users = users
        self._server_nonce = server_nonce
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: _ScramExchange | None = None

    def handshake(self, mechanism: str) -> bool:
        """Pick ``mechanism``; False if it is not one of ``MECHANISMS``."""
        if mechanism not in MECHANISMS:
            return False
        self.mechanism = mechanism
        return True

    def authenticate(self, token: bytes) -> bytes:
        """The server's answer to one client token; SaslAuthenticationError on failure."""
        if self.mechanism is None or self.principal is not None:
            raise SaslAuthenticationError("SaslAuthenticate outside a SASL exchange")
        if self.mechanism == PLAIN:
            self.principal = self._plain(token)
            return b""
        if self._scram is None:
            self._scram = _ScramExchange(self.mechanism, self._users, self._server_nonce())
            return self._scram.first(token)
        user, answer = self._scram.final(token)
        self.principal = user
        return answer

    def _plain(self, token: bytes) -> str:
        """RFC 4616: ``[authzid] NUL authcid NUL passwd``; authzid empty or the user."""
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("malformed PLAIN token")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise SaslAuthenticationError(f"PLAIN: {user!r} may not act as {authzid!r}")
        credentials = self._users.get(user)
        # an unknown user costs the same hashing, so timing does not tell users apart
        mechanism, credential = next(iter((credentials or _unknown(user)).items()))
        expected = scram_credential(password, mechanism, credential.salt, credential.iterations)
        if not hmac.compare_digest(expected.stored_key, credential.stored_key) or not credentials:
            raise SaslAuthenticationError(_FAILED)
        return user


class _ScramExchange:
    """RFC 5802 server side: client-first → server-first, client-final → server-final."""

    def __init__(self, mechanism: str, users: Users, server_nonce: str) -> None:
        self._hash = _HASHES[mechanism]
        self._mechanism = mechanism
        self._users = users
        self._user = ""
        self._credential: ScramCredential | None = None
        self._server_nonce = server_nonce
        self._client_nonce = ""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""

    def first(self, token: bytes) -> bytes:
        message = _text(token)
        gs2_flag, authzid, bare = [*message.split(",", 2), "", ""][:3]
        if gs2_flag not in ("n", "y") or not bare:
            raise SaslAuthenticationError("SCRAM: malformed client-first message")
        attributes = _attributes(bare)
        user = _unescape(attributes.get("n", ""))
        if authzid and _unescape(authzid.removeprefix("a=")) != user:
            raise SaslAuthenticationError(f"SCRAM: {user!r} may not act as another user")
        client_nonce = attributes.get("r", "")
        if not user or not client_nonce:
            raise SaslAuthenticationError("SCRAM: client-first message without user or nonce")
        self._user = user
        self._credential = self._users.get(user, {}).get(self._mechanism)
        # an unknown user gets a made-up salt, the same on every try, so the answer does not
        # tell users apart; the proof is then refused
        credential = self._credential or _unknown(user)[SCRAM_SHA_256]
        self._gs2_header = f"{gs2_flag},{authzid},"
        self._client_first_bare = bare
        self._client_nonce = client_nonce
        self._nonce = client_nonce + self._server_nonce
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def final(self, token: bytes) -> tuple[str, bytes]:
        message = _text(token)
        without_proof, _, proof_part = message.rpartition(",p=")
        attributes = _attributes(without_proof)
        channel_binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attributes.get("c") != channel_binding or not self._nonce_matches(attributes.get("r")):
            raise SaslAuthenticationError("SCRAM: channel binding or nonce mismatch")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError as error:
            raise SaslAuthenticationError("SCRAM: malformed proof") from error
        credential = self._credential
        if credential is None:
            raise SaslAuthenticationError(_FAILED)
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = hmac.new(credential.stored_key, auth_message, self._hash).digest()
        if len(proof) != len(client_signature):
            raise SaslAuthenticationError(_FAILED)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), credential.stored_key
        ):
            raise SaslAuthenticationError(_FAILED)
        server_signature = hmac.new(credential.server_key, auth_message, self._hash).digest()
        return self._user, b"v=" + base64.b64encode(server_signature)

    def _nonce_matches(self, sent: str | None) -> bool:
        """RFC 5802: client-final carries the combined nonce of server-first. librdkafka up
        to 2.6.0 (Debian's kcat links 2.0.2) sends its own nonce once more in front of it
        (librdkafka#4895, fixed in 2.6.1); Kafka 3.8.1 to 3.9 accept that, and so does this
        server, in that exact form only: the fresh server nonce must still come back."""
        return sent in (self._nonce, self._client_nonce + self._nonce)


def _unknown(user: str) -> dict[str, ScramCredential]:
    """A credential no password matches, with a salt that depends on the user name only."""
    salt = hmac.new(_UNKNOWN_USER_KEY, user.encode(), "sha256").digest()
    return {SCRAM_SHA_256: ScramCredential(salt, ITERATIONS, b"", b"")}


def _text(token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SaslAuthenticationError("SCRAM: a message that is not UTF-8") from error


def _attributes(message: str) -> dict[str, str]:
    """``k=v,k=v`` → {k: v} (values may hold '=', never ',')."""
    out: dict[str, str] = {}
    for item in message.split(","):
        key, sep, value = item.partition("=")
        if sep and len(key) == 1:
            out.setdefault(key, value)
    return out


def _unescape(name: str) -> str:
    """RFC 5802 saslname: '=2C' is ',', '=3D' is '='."""
    return name.replace("=2C", ",").replace("=3D", "=")
