"""``txnlog serve PATH``: speak Kafka's wire protocol over the log (``txn_wire``, DESIGN §1).

The server is one more peer of the directory: other processes keep reading and writing it
directly. It prints the addresses it listens on (``--port 0`` picks a free port), binds
127.0.0.1 unless told otherwise, and says at start whether it is open or needs SASL and ACLs
(``--acl-file``, ``txn_wire.acl``, which AdminClients edit with CreateAcls and DeleteAcls;
``--super-users``, Kafka's super.users, are allowed everything).

Listeners, as Kafka's ``listeners`` (``txn_wire.listeners``): without ``--listener`` the server
has one, at ``--host``:``--port``, PLAINTEXT, or SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256/512,
``txn_wire.sasl``) when ``--users-file`` is given, as before listeners existed; with
``--listener PROTOCOL://HOST:PORT`` (repeatable, one PLAINTEXT and one SASL_PLAINTEXT at most)
it has those instead. Either way its SCRAM credential store (SASL logins,
DescribeUserScramCredentials, AlterUserScramCredentials) is the ``--users-file`` or, without
one, ``users.json`` in the log directory (``txn_wire.scram_users``), so the credential APIs
work on a PLAINTEXT-only server too, as Kafka's do. A listener, users or ACL file that cannot be
used stops it before it listens, with the file, line and field at fault (exit 2), as do super
users without an ACL file. Frames are
capped as Kafka caps them: ``--socket-request-max-bytes`` (socket.request.max.bytes, 100 MiB),
and on a SASL_PLAINTEXT listener ``--sasl-max-receive-size`` (sasl.server.max.receive.size,
512 KiB) until a connection has authenticated.
SIGTERM or SIGINT stops it cleanly: no new connections, requests in flight answered, the log
closed. ``txn_wire`` (and its ``kio`` dependency) is imported only here, inside the command,
so the rest of the CLI and the engine never load it (DESIGN §1).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from txn_log.cli.common import EXIT_OK, EXIT_USAGE, create_log


def add_parser(subparsers: Any) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="serve the log to Kafka clients over Kafka's protocol (modifies the log)",
        description=(
            "Listen for Kafka clients (confluent-kafka, kafka-python, ...) and serve the log "
            "at PATH to them: produce, fetch, list offsets, transactions, group offsets, "
            "topic administration, SCRAM credentials. "
            "Creates the log if PATH is missing. Stops on SIGTERM or SIGINT."
        ),
    )
    serve.add_argument("path")
    serve.add_argument(
        "--host", help="address of the one listener without --listener (default 127.0.0.1)"
    )
    serve.add_argument(
        "--port",
        type=int,
        help="port of the one listener without --listener; 0 picks a free port (default 9092)",
    )
    serve.add_argument(
        "--listener",
        action="append",
        metavar="PROTOCOL://HOST:PORT",
        help="listen here instead of --host/--port, as Kafka's listeners: PLAINTEXT (no "
        "authentication) or SASL_PLAINTEXT (SASL against the SCRAM credential store); "
        "repeatable, each protocol once, e.g. --listener PLAINTEXT://127.0.0.1:9092 "
        "--listener SASL_PLAINTEXT://127.0.0.1:9093",
    )
    serve.add_argument(
        "--auto-create-topics",
        action="store_true",
        help="create unknown topics on Metadata and Produce (auto.create.topics.enable)",
    )
    serve.add_argument(
        "--default-partitions",
        type=int,
        default=1,
        help="partitions of an auto-created topic (default 1)",
    )
    serve.add_argument(
        "--socket-request-max-bytes",
        type=_positive,
        default=None,
        help="refuse, unread, a request larger than this (socket.request.max.bytes; "
        "default 104857600)",
    )
    serve.add_argument(
        "--sasl-max-receive-size",
        type=_positive,
        default=None,
        help="on a SASL_PLAINTEXT listener: refuse, unread, a frame larger than this from a "
        "connection that has not authenticated yet (sasl.server.max.receive.size; default "
        "524288)",
    )
    serve.add_argument(
        "--group-min-session-timeout-ms",
        type=_positive,
        default=None,
        help="the smallest session.timeout.ms a consumer group member may ask for "
        "(group.min.session.timeout.ms; default 6000)",
    )
    serve.add_argument(
        "--group-max-session-timeout-ms",
        type=_positive,
        default=None,
        help="the largest session.timeout.ms a consumer group member may ask for "
        "(group.max.session.timeout.ms; default 1800000)",
    )
    serve.add_argument(
        "--group-initial-rebalance-delay-ms",
        type=_not_negative,
        default=None,
        help="how long a new (empty) group's first join round waits for more members, again "
        "after each one joins, up to the rebalance timeout (group.initial.rebalance.delay.ms; "
        "default 3000; 0 forms the generation as soon as every member has joined)",
    )
    serve.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="also serve GET /metrics (Prometheus text: live producer ids, LSO, transactional "
        "ids, read_committed lag) on this port of the (first) listener's host; 0 picks a free "
        "port",
    )
    serve.add_argument(
        "--users-file",
        help="JSON users file, the SCRAM credential store (default: users.json in the log "
        "directory; txnlog users and AlterUserScramCredentials change it); without --listener, "
        "giving it makes the one listener SASL_PLAINTEXT: clients must authenticate with SASL "
        "PLAIN or SCRAM-SHA-256/512",
    )
    serve.add_argument(
        "--acl-file",
        help="ACL file (principal, resource type, name, operation, allow|deny per line): "
        "every request is checked; what no rule allows is refused. AdminClients with Alter on "
        "the cluster add and remove rules (CreateAcls, DeleteAcls); with Describe, list them "
        "(DescribeAcls); without this option those APIs answer SECURITY_DISABLED",
    )
    serve.add_argument(
        "--super-users",
        metavar="'User:a;User:b'",
        help="with --acl-file: principals allowed every operation whatever the rules say, "
        "separated by ';' (Kafka's super.users)",
    )
    serve.set_defaults(run=run_serve)


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number (of bytes or ms), got {text}")
    return value


def _not_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more (ms), got {text}")
    return value


def run_serve(args: argparse.Namespace) -> int:
    import functools

    from txn_wire.acl import Authorizer, load_acls, parse_super_users
    from txn_wire.broker import ServeConfig
    from txn_wire.listeners import Listener, command_line_listeners, security
    from txn_wire.scram_users import ScramCredentialStore, default_users_file
    from txn_wire.server import serve
    from txn_wire.watched_file import WatchedFile

    authorizer: Authorizer | None = None
    watched_acls: WatchedFile[Authorizer] | None = None
    try:
        super_users = parse_super_users(args.super_users or "")
        if super_users and not args.acl_file:
            raise ValueError("--super-users needs --acl-file (without ACLs everyone may do all)")
        listeners = command_line_listeners(
            args.listener, args.host, args.port, users_file_given=bool(args.users_file)
        )
        # `txnlog users --alter` and AlterUserScramCredentials apply to the next connection
        users_file = Path(args.users_file or default_users_file(args.path))
        credentials = ScramCredentialStore(users_file, must_exist=bool(args.users_file))
        if args.acl_file:
            load = functools.partial(load_acls, super_users=super_users)
            authorizer = load(args.acl_file)
            # `txnlog acls` and CreateAcls/DeleteAcls apply to the next request, no restart
            watched_acls = WatchedFile(args.acl_file, load, authorizer)
    except ValueError as error:  # UsersFileError, AclFileError, ListenerError, a super user
        print(f"txnlog serve: {error}", file=sys.stderr, flush=True)
        return EXIT_USAGE

    limits = {
        name: value
        for name, value in (
            ("max_request_bytes", args.socket_request_max_bytes),
            ("sasl_max_receive_size", args.sasl_max_receive_size),
            ("group_min_session_timeout_ms", args.group_min_session_timeout_ms),
            ("group_max_session_timeout_ms", args.group_max_session_timeout_ms),
            ("group_initial_rebalance_delay_ms", args.group_initial_rebalance_delay_ms),
        )
        if value is not None
    }
    config = ServeConfig(
        auto_create_topics=args.auto_create_topics,
        default_partitions=args.default_partitions,
        **limits,
    )

    def on_listening(bound: list[Listener]) -> None:
        named = [f"{b.address} ({b.protocol.value})" for b in bound]
        addresses = ", ".join(named) if args.listener else bound[0].address
        print(f"txnlog serve: listening on {addresses} for the log at {args.path}", flush=True)
        rules = len(authorizer.rules) if authorizer is not None else None
        who = security(bound, len(credentials.users()), rules)
        if super_users:
            who += f"; super users {', '.join(sorted(super_users))}"
        print(f"txnlog serve: {who}; SCRAM credentials in {users_file}", flush=True)

    def on_metrics(host: str, port: int) -> None:
        print(f"txnlog serve: metrics on http://{host}:{port}/metrics", flush=True)

    log, _ = create_log(args.path)
    try:
        asyncio.run(
            serve(
                log,
                listeners,
                credentials,
                config,
                on_listening=on_listening,
                metrics_port=args.metrics_port,
                on_metrics=on_metrics,
                authorizer=watched_acls.current if watched_acls is not None else None,
                acl_file=Path(args.acl_file) if args.acl_file else None,
            )
        )
    finally:
        log.close()
    print("txnlog serve: stopped", file=sys.stderr, flush=True)
    return EXIT_OK
