"""``txnlog acls list|add|remove`` (kafka-acls --list / --add / --remove) on the ACL file of
``txnlog serve --acl-file`` (its format: ``txn_wire.acl``; the editing rules:
``txn_wire.acl_file``, imported when a command runs, as ``serve`` imports the server).

``add`` and ``remove`` take Kafka's options: ``--allow-principal`` / ``--deny-principal``
(repeatable), ``--operation`` (repeatable), and resources ``--topic``, ``--group``,
``--transactional-id`` (repeatable) or ``--cluster``, with ``--resource-pattern-type
literal`` (the default) or ``prefixed``; one rule per principal × operation × resource. The
file is replaced atomically under the editor lock, which a running ``txnlog serve`` takes too
when AdminClients create or delete ACLs through it; the server applies each change to its next
request.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from txn_log.cli.common import EXIT_FAILED, EXIT_OK, UsageError, emit_json, emit_table


def add_parser(subparsers: Any) -> None:
    acls = subparsers.add_parser("acls", help="list, add or remove rules of a serve ACL file")
    actions = acls.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the file's rules (optionally one resource's)")
    _resource_options(listing)
    listing.add_argument("--principal", help="only this principal's rules")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=run_list)
    for name, help_text in (
        ("add", "add rules (created if missing; written atomically)"),
        ("remove", "remove rules (written atomically)"),
    ):
        parser = actions.add_parser(name, help=help_text)
        _resource_options(parser)
        parser.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
        parser.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
        parser.add_argument("--operation", action="append", default=[], metavar="OPERATION")
        parser.set_defaults(run=run_add if name == "add" else run_remove)


def _resource_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("acl_file", metavar="ACL_FILE")
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--transactional-id", action="append", default=[])
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument(
        "--resource-pattern-type", choices=["literal", "prefixed"], default="literal"
    )


def resources(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(resource type, name as the file writes it) of each resource named."""
    named = [
        *(("topic", n) for n in args.topic),
        *(("group", n) for n in args.group),
        *(("transactional_id", n) for n in args.transactional_id),
    ]
    prefixed = args.resource_pattern_type == "prefixed"
    out = []
    for kind, name in named:
        if not name or (name.endswith("*") and name != "*"):
            raise UsageError(
                f"--{kind.replace('_', '-')} {name!r}: give a literal name, '*' for every name, "
                "or a prefix with --resource-pattern-type prefixed (the file writes it 'prefix*')"
            )
        out.append((kind, f"{name}*" if prefixed and name != "*" else name))
    if args.cluster:
        out.append(("cluster", "kafka-cluster"))
    return out


def requested_rules(args: argparse.Namespace) -> list[Any]:
    from txn_wire.acl import AclFileError, parse_rules

    targets = resources(args)
    principals = [(p, "allow") for p in args.allow_principal]
    principals += [(p, "deny") for p in args.deny_principal]
    if not targets or not principals or not args.operation:
        raise UsageError(
            f"{args.action} needs a resource (--topic, --group, --transactional-id or "
            "--cluster), an --allow-principal or --deny-principal User:NAME, and an --operation "
            "(Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
            "AlterConfigs, IdempotentWrite or All)"
        )
    rules = []
    for principal, permission in principals:
        for operation in args.operation:
            for kind, name in targets:
                try:
                    rules += parse_rules(f"{principal} {kind} {name} {operation} {permission}", "")
                except AclFileError as error:
                    raise UsageError(str(error).split(": ", 1)[1]) from None
    return rules


def _row(rule: Any) -> dict[str, Any]:
    prefixed = rule.name.endswith("*") and rule.name != "*"
    return {
        "principal": rule.principal,
        "resource_type": rule.resource_type.value,
        "name": rule.name[:-1] if prefixed else rule.name,
        "pattern_type": "prefixed" if prefixed else "literal",
        "operation": rule.operation.value,
        "permission": "allow" if rule.allow else "deny",
    }


def run_list(args: argparse.Namespace) -> int:
    from txn_wire.acl import AclFileError
    from txn_wire.acl_file import read_rules

    try:
        rules = read_rules(Path(args.acl_file))
    except AclFileError as error:
        raise UsageError(str(error)) from None
    wanted = set(resources(args))
    rows = [
        _row(rule)
        for rule in rules
        if (not wanted or (rule.resource_type.value, rule.name) in wanted)
        and (args.principal is None or rule.principal == args.principal)
    ]
    if args.json:
        emit_json(rows)
    else:
        emit_table(
            rows, ["principal", "resource_type", "name", "pattern_type", "operation", "permission"]
        )
    return EXIT_OK


def run_add(args: argparse.Namespace) -> int:
    from txn_wire.acl import AclFileError
    from txn_wire.acl_file import add_rules, format_rule

    rules = requested_rules(args)
    try:
        added = add_rules(Path(args.acl_file), rules)
    except AclFileError as error:
        raise UsageError(str(error)) from None
    print(
        f"Added {len(added)} rule(s) to {args.acl_file} ({len(rules) - len(added)} already there)"
    )
    for rule in added:
        print(f"  {format_rule(rule)}")
    return EXIT_OK


def run_remove(args: argparse.Namespace) -> int:
    from txn_wire.acl import AclFileError
    from txn_wire.acl_file import format_rule, remove_rules

    rules = requested_rules(args)
    try:
        removed = remove_rules(Path(args.acl_file), rules)
    except AclFileError as error:
        raise UsageError(str(error)) from None
    if not removed:
        print(
            f"txnlog: no rule of {args.acl_file} matches; `txnlog acls list {args.acl_file}` "
            "shows the rules there are",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"Removed {len(removed)} rule(s) from {args.acl_file}")
    for rule in removed:
        print(f"  {format_rule(rule)}")
    return EXIT_OK
