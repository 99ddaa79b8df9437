"""``txnlog users``: the SCRAM users of ``txnlog serve --users-file``, as Kafka's
``kafka-configs --entity-type users`` manages a cluster's::

    txnlog users --users-file users.json --alter --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    txnlog users --users-file users.json --alter --entity-name alice --delete-config SCRAM-SHA-512
    txnlog users --users-file users.json --describe [--entity-name alice] [--json]

A server started without ``--users-file`` keeps its SCRAM credentials in ``users.json`` in its
log directory: ``--users-file LOG/users.json`` edits those. Only salted credentials reach the
file (``txn_wire.scram_users``); a running server applies a change to its next connection,
and a change made at the same time through AlterUserScramCredentials is not lost (both take
the file's editor lock). This command modifies the users file, not the log.
"""

from __future__ import annotations

import argparse
from typing import Any

from txn_log.cli.common import EXIT_OK, UsageError, emit_json


def add_parser(subparsers: Any) -> None:
    users = subparsers.add_parser(
        "users",
        help="add, change, remove and list SCRAM users of a users file (kafka-configs "
        "--entity-type users); modifies the users file",
    )
    users.add_argument(
        "--users-file",
        required=True,
        help="the file txnlog serve --users-file reads (without that option: users.json in "
        "the log directory)",
    )
    action = users.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list users and mechanisms")
    action.add_argument("--alter", action="store_true", help="add or delete credentials")
    users.add_argument("--entity-name", help="the user name")
    users.add_argument(
        "--add-config",
        help="SCRAM-SHA-256=[iterations=N,password=SECRET] and/or SCRAM-SHA-512=[...], "
        "comma-separated (iterations 4096 to 16384, default 4096)",
    )
    users.add_argument("--delete-config", help="SCRAM-SHA-256 and/or SCRAM-SHA-512")
    users.add_argument("--json", action="store_true")
    users.set_defaults(run=run_users)


def run_users(args: argparse.Namespace) -> int:
    from txn_wire.sasl import UsersFileError
    from txn_wire.scram_users import ScramConfigError

    try:
        return _alter(args) if args.alter else _describe(args)
    except (ScramConfigError, UsersFileError) as error:
        raise UsageError(str(error)) from None


def _alter(args: argparse.Namespace) -> int:
    from txn_wire.scram_users import alter_user, parse_add_config, parse_delete_config

    if not args.entity_name:
        raise UsageError("--alter needs --entity-name USER")
    if not args.add_config and not args.delete_config:
        raise UsageError("--alter needs --add-config and/or --delete-config")
    add = parse_add_config(args.add_config) if args.add_config else []
    delete = parse_delete_config(args.delete_config) if args.delete_config else []
    held = alter_user(args.users_file, args.entity_name, add, delete)
    if args.json:
        emit_json({"user": args.entity_name, "mechanisms": held})
    else:
        print(f"Completed updating config for user {args.entity_name}.")
    return EXIT_OK


def _describe(args: argparse.Namespace) -> int:
    from txn_wire.scram_users import describe_users

    users = describe_users(args.users_file)
    if args.entity_name is not None:
        if args.entity_name not in users:
            known = ", ".join(users) or "none"
            raise UsageError(f"no user {args.entity_name!r} in {args.users_file}; users: {known}")
        users = {args.entity_name: users[args.entity_name]}
    if args.json:
        emit_json(users)
        return EXIT_OK
    if not users:
        print(f"No users in {args.users_file}.")
    for user, mechanisms in users.items():
        configs = ", ".join(f"{name}=iterations={count}" for name, count in mechanisms.items())
        print(f"SCRAM credential configs for user-principal '{user}' are {configs}")
    return EXIT_OK
