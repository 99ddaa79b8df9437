"""``txnlog serve PATH``: speak Kafka's wire protocol over the log (``txn_wire``, DESIGN §1).

The server is one more peer of the directory: other processes keep reading and writing it
directly. It prints the address it listens on (``--port 0`` picks a free port), binds
127.0.0.1 unless told otherwise, and says at start whether it is open or needs SASL
(``--users-file``: PLAIN, SCRAM-SHA-256/512, ``txn_wire.sasl``) and ACLs (``--acl-file``,
``txn_wire.acl``, which AdminClients edit with CreateAcls and DeleteAcls; ``--super-users``,
Kafka's super.users, are allowed everything). A users or ACL file that cannot be read stops
it before it listens, with the file, line and field at fault (exit 2), as do super users
without an ACL file. Frames are capped as Kafka caps them:
``--socket-request-max-bytes`` (socket.request.max.bytes, 100 MiB), and with a users file
``--sasl-max-receive-size`` (sasl.server.max.receive.size, 512 KiB) until a connection has
authenticated.
SIGTERM or SIGINT stops it cleanly: no new connections, requests in flight answered, the log
closed. ``txn_wire`` (and its ``kio`` dependency) is imported only here, inside the command,
so the rest of the CLI and the engine never load it (DESIGN §1).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from txn_log.cli.common import EXIT_OK, EXIT_USAGE, create_log


def add_parser(subparsers: Any) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="serve the log to Kafka clients over Kafka's protocol (modifies the log)",
        description=(
            "Listen for Kafka clients (confluent-kafka, kafka-python, ...) and serve the log "
            "at PATH to them: produce, fetch, list offsets, transactions, group offsets. "
            "Creates the log if PATH is missing. Stops on SIGTERM or SIGINT."
        ),
    )
    serve.add_argument("path")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=9092, help="0 picks a free port (default 9092)")
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
        help="with --users-file: refuse, unread, a frame larger than this from a connection "
        "that has not authenticated yet (sasl.server.max.receive.size; default 524288)",
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
        "ids, read_committed lag) on this port of the same host; 0 picks a free port",
    )
    serve.add_argument(
        "--users-file",
        help="JSON users file: clients must authenticate with SASL PLAIN or SCRAM-SHA-256/512",
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
    from pathlib import Path

    from txn_wire.acl import Authorizer, load_acls, parse_super_users
    from txn_wire.broker import ServeConfig
    from txn_wire.sasl import Users, load_users
    from txn_wire.server import serve
    from txn_wire.watched_file import WatchedFile

    users: Users | None = None
    watched_users: WatchedFile[Users] | None = None
    authorizer: Authorizer | None = None
    watched_acls: WatchedFile[Authorizer] | None = None
    try:
        super_users = parse_super_users(args.super_users or "")
        if super_users and not args.acl_file:
            raise ValueError("--super-users needs --acl-file (without ACLs everyone may do all)")
        if args.users_file:
            users = load_users(args.users_file)
            # `txnlog users --alter` applies to the next connection, without a restart
            watched_users = WatchedFile(args.users_file, load_users, users)
        if args.acl_file:
            load = functools.partial(load_acls, super_users=super_users)
            authorizer = load(args.acl_file)
            # `txnlog acls` and CreateAcls/DeleteAcls apply to the next request, no restart
            watched_acls = WatchedFile(args.acl_file, load, authorizer)
    except ValueError as error:  # UsersFileError, AclFileError, a super user not User:NAME
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

    def on_listening(host: str, port: int) -> None:
        print(f"txnlog serve: listening on {host}:{port} for the log at {args.path}", flush=True)
        reach = "bound to loopback only" if host.startswith("127.") else "reachable from others"
        if users is None and authorizer is None:
            print(
                f"txnlog serve: the server is open: no authentication, no ACLs; {reach}", flush=True
            )
            return
        who = (
            f"SASL required (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) for {len(users)} users"
            if users is not None
            else "no authentication (every client is User:ANONYMOUS)"
        )
        acls = f"{len(authorizer.rules)} ACL rules" if authorizer is not None else "no ACLs"
        if super_users:
            acls += f", super users {', '.join(sorted(super_users))}"
        print(f"txnlog serve: {who}; {acls}; {reach}", flush=True)

    def on_metrics(host: str, port: int) -> None:
        print(f"txnlog serve: metrics on http://{host}:{port}/metrics", flush=True)

    log, _ = create_log(args.path)
    try:
        asyncio.run(
            serve(
                log,
                args.host,
                args.port,
                config,
                on_listening=on_listening,
                metrics_port=args.metrics_port,
                on_metrics=on_metrics,
                users=watched_users.current if watched_users is not None else None,
                authorizer=watched_acls.current if watched_acls is not None else None,
                acl_file=Path(args.acl_file) if args.acl_file else None,
            )
        )
    finally:
        log.close()
    print("txnlog serve: stopped", file=sys.stderr, flush=True)
    return EXIT_OK
