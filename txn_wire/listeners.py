"""The listeners of ``txnlog serve``: where it accepts connections and how each authenticates,
as Kafka's ``listeners`` and ``listener.security.protocol.map`` say it for a broker.

A listener is written as Kafka writes one, ``PROTOCOL://HOST:PORT`` (``[::1]`` for an IPv6
host; port 0 picks a free one), the protocol being its name, as in Kafka's default map:

- ``PLAINTEXT``: no authentication, every connection is ``User:ANONYMOUS``;
- ``SASL_PLAINTEXT``: every connection logs in with SASL (PLAIN, SCRAM-SHA-256/512) against
  the server's SCRAM credential store before anything but ApiVersions and SASL is answered.

One server may have one listener of each (Kafka: a listener name appears once); both serve
the same log, ACLs and credential store, so a credential upserted on the PLAINTEXT listener
logs in on the SASL_PLAINTEXT one. TLS (SSL, SASL_SSL) is not offered. Immutable values.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class SecurityProtocol(enum.Enum):
    """Kafka's ``SecurityProtocol``, the two this server speaks."""

    PLAINTEXT = "PLAINTEXT"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"

    @property
    def sasl(self) -> bool:
        return self is SecurityProtocol.SASL_PLAINTEXT


class ListenerError(ValueError):
    """A listener that cannot be used: the message names it and says what would be valid."""


@dataclass(frozen=True)
class Listener:
    """One address to accept connections on, and its security protocol."""

    protocol: SecurityProtocol
    host: str
    port: int

    @property
    def address(self) -> str:
        """``HOST:PORT`` (``[HOST]:PORT`` for IPv6)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.protocol.value}://{self.address}"


def parse_listener(text: str) -> Listener:
    """``PLAINTEXT://127.0.0.1:9092`` → its Listener; ListenerError if malformed."""
    protocol, sep, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not host or not port.isdigit():
        raise ListenerError(
            f"listener {text!r}: expected PROTOCOL://HOST:PORT, e.g. PLAINTEXT://127.0.0.1:9092"
        )
    names = [p.value for p in SecurityProtocol]
    if protocol not in names:
        raise ListenerError(
            f"listener {text!r}: security protocol {protocol!r} is not one of "
            f"{' or '.join(names)} (no TLS here)"
        )
    if not 0 <= int(port) <= 65535:
        raise ListenerError(f"listener {text!r}: port {port} is not 0 to 65535")
    return Listener(SecurityProtocol(protocol), host.removeprefix("[").removesuffix("]"), int(port))


def check_listeners(listeners: Sequence[Listener]) -> None:
    """ListenerError unless there is at least one and each protocol (listener name) is named
    once, as Kafka requires of ``listeners``."""
    if not listeners:
        raise ListenerError("no listener: name at least one, e.g. PLAINTEXT://127.0.0.1:9092")
    seen: set[SecurityProtocol] = set()
    for listener in listeners:
        if listener.protocol in seen:
            raise ListenerError(
                f"listener {listener}: {listener.protocol.value} twice (each listener name "
                "once, as in Kafka's listeners)"
            )
        seen.add(listener.protocol)


def command_line_listeners(
    given: Sequence[str] | None, host: str | None, port: int | None, *, users_file_given: bool
) -> list[Listener]:
    """``txnlog serve``'s listeners: the ``--listener`` options, or else the one listener of
    ``--host`` (127.0.0.1) and ``--port`` (9092), PLAINTEXT, or SASL_PLAINTEXT when a
    ``--users-file`` is given (what that option meant before listeners existed).
    ListenerError for a malformed one, a protocol twice, or ``--host``/``--port`` beside
    ``--listener``."""
    if given:
        if host is not None or port is not None:
            raise ListenerError(
                "--host and --port name the one listener of a server without --listener; "
                "with --listener, each listener names its own host and port"
            )
        listeners = [parse_listener(text) for text in given]
    else:
        sasl = SecurityProtocol.SASL_PLAINTEXT
        protocol = sasl if users_file_given else SecurityProtocol.PLAINTEXT
        listeners = [Listener(protocol, host or "127.0.0.1", 9092 if port is None else port)]
    check_listeners(listeners)
    return listeners


def security(listeners: Sequence[Listener], users: int, acl_rules: int | None) -> str:
    """What ``txnlog serve`` says at start of who must authenticate where (``users``: how many
    users the credential store has), its ACLs (None: no ACL file) and who can reach it."""
    loopback = all(one.host.startswith("127.") or one.host == "::1" for one in listeners)
    reach = "bound to loopback only" if loopback else "reachable from others"
    if len(listeners) == 1 and not listeners[0].protocol.sasl and acl_rules is None:
        return f"the server is open: no authentication, no ACLs; {reach}"
    sasl = f"SASL required (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) for {users} users"
    anonymous = "no authentication (every client is User:ANONYMOUS)"
    ways = [sasl if one.protocol.sasl else anonymous for one in listeners]
    if len(listeners) > 1:
        ways = [f"{one.protocol.value}: {way}" for one, way in zip(listeners, ways, strict=True)]
    acls = f"{acl_rules} ACL rules" if acl_rules is not None else "no ACLs"
    return f"{', '.join(ways)}; {acls}; {reach}"
