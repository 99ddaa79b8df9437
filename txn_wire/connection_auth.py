"""One connection's authentication: who it is, and its SaslHandshake / SaslAuthenticate.

On a PLAINTEXT listener every connection is ``User:ANONYMOUS`` from the start. On a
SASL_PLAINTEXT one (``listeners``), a connection is nobody until a SASL exchange succeeds, and
until then only ApiVersions, SaslHandshake and SaslAuthenticate are answered: any other
request closes the connection, as Kafka's ``SaslServerAuthenticator`` does. The exchange, as
Kafka runs it:

- SaslHandshake v1 names the mechanism (UNSUPPORTED_SASL_MECHANISM 33 with the list of
  mechanisms, then the connection is closed, if it is not one of ``sasl.MECHANISMS``); then
  SaslAuthenticate requests carry the tokens (PLAIN: one; SCRAM: two).
- SaslHandshake v0 (older clients): after its answer the client sends bare length-prefixed
  tokens, not requests, and gets bare tokens back; a failure closes the connection.
- Frames are capped lower until the exchange succeeds (``max_receive_bytes``): Kafka's
  sasl.server.max.receive.size (512 KiB) for requests and bare tokens alike, so that nobody
  can make the server wait for (and hold) a 100 MiB frame without credentials; after it,
  socket.request.max.bytes.
- A failed exchange answers SASL_AUTHENTICATION_FAILED (58) with a message that does not say
  whether the user exists, then closes the connection. A handshake after success, or tokens
  out of order, is ILLEGAL_SASL_STATE (34), then close.

The hashing (PBKDF2) runs on a worker thread. Used by one connection's task only.
"""

from __future__ import annotations

import asyncio
import logging

from txn_wire.acl import ANONYMOUS
from txn_wire.api_versions import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from txn_wire.broker import ServeConfig
from txn_wire.codec import LENGTH, MalformedRequestError, Plain, Request
from txn_wire.sasl import MECHANISMS, SaslAuthenticationError, SaslSession, Users

logger = logging.getLogger(__name__)

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


class ConnectionAuth:
    """Authentication state of one connection."""

    def __init__(self, users: Users | None, peer: object) -> None:
        """``users``: the SCRAM credentials as the connection was accepted (a SASL_PLAINTEXT
        listener), None on a PLAINTEXT one."""
        self._sasl = SaslSession(users) if users is not None else None
        self._peer = peer
        self.raw_tokens = False
        """True after SaslHandshake v0 until the exchange ends: frames are bare tokens."""
        self.close_after = False
        """True once the answer being sent is the connection's last."""

    @property
    def sasl(self) -> bool:
        """Whether the connection came to a SASL_PLAINTEXT listener (SASL is offered)."""
        return self._sasl is not None

    @property
    def principal(self) -> str | None:
        """``User:NAME`` once authenticated (``User:ANONYMOUS`` on a PLAINTEXT listener), else
        None."""
        if self._sasl is None:
            return ANONYMOUS
        return f"User:{self._sasl.principal}" if self._sasl.principal is not None else None

    def max_receive_bytes(self, config: ServeConfig) -> tuple[int, str]:
        """The largest frame this connection may send next, and Kafka's name for that limit:
        sasl.server.max.receive.size until it has authenticated (bare tokens after
        SaslHandshake v0 included), socket.request.max.bytes after (R-12)."""
        if self.principal is None:
            return config.sasl_max_receive_size, "sasl.server.max.receive.size"
        return config.max_request_bytes, "socket.request.max.bytes"

    def check_allowed(self, api_key: int) -> None:
        """MalformedRequestError (the connection is closed) for a request other than
        ApiVersions and SASL before authentication."""
        if self.principal is None and api_key not in _BEFORE_AUTHENTICATION:
            raise MalformedRequestError(
                f"api key {api_key} before SASL authentication (only ApiVersions, "
                "SaslHandshake and SaslAuthenticate are answered before it)"
            )

    def handshake(self, request: Request) -> Plain:
        sasl = self._sasl
        mechanisms = list(MECHANISMS)
        if sasl is None or sasl.mechanism is not None or self.principal is not None:
            self.close_after = True
            return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
        if not sasl.handshake(request.body["mechanism"]):
            self.close_after = True
            logger.info("%s asked for SASL mechanism %r", self._peer, request.body["mechanism"])
            return {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": mechanisms}
        self.raw_tokens = request.api_version == 0
        return {"error_code": 0, "mechanisms": mechanisms}

    async def authenticate(self, request: Request) -> Plain:
        sasl = self._sasl
        if sasl is None or sasl.mechanism is None or self.raw_tokens:
            self.close_after = True
            return {"error_code": ILLEGAL_SASL_STATE, "error_message": "no SaslHandshake first"}
        try:
            token = await asyncio.to_thread(sasl.authenticate, request.body["auth_bytes"])
        except SaslAuthenticationError as error:
            logger.info("SASL authentication from %s failed: %s", self._peer, error)
            self.close_after = True
            return {
                "error_code": SASL_AUTHENTICATION_FAILED,
                "error_message": str(error),
                "auth_bytes": b"",
            }
        return {"error_code": 0, "error_message": None, "auth_bytes": token, "session_lifetime": 0}

    async def raw_token(self, frame: bytes) -> bytes:
        """The length-prefixed answer to a bare token (after SaslHandshake v0)."""
        sasl = self._sasl
        if sasl is None:
            raise MalformedRequestError("a bare SASL token without SASL")
        try:
            token = await asyncio.to_thread(sasl.authenticate, frame)
        except SaslAuthenticationError as error:
            raise MalformedRequestError(f"SASL authentication failed: {error}") from error
        if sasl.principal is not None:
            self.raw_tokens = False
        return LENGTH.pack(len(token)) + token
