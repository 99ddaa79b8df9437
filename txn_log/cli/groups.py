"""``txnlog groups list|describe`` (kafka-consumer-groups): committed offsets, lag, ledgers;
``reset-offsets`` and ``delete`` are in ``group_admin``.

Lag is measured against the last stable offset, as a read_committed consumer sees it (B-06,
MET-05). ``describe`` also shows the ledgers of atomic commits (DESIGN §4), which commit group
offsets with many transactions: the last committed sequence per ledger key. The engine gives
keys and sequences no meaning; whoever commits chooses them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from txn_log.cli import group_admin
from txn_log.cli.common import EXIT_OK, add_action, emit_json, emit_table, open_log
from txn_log.coordinator.transaction_state import state_name
from txn_log.errors import UnknownTopicOrPartitionError
from txn_log.log import Log


def add_parser(subparsers: Any) -> None:
    groups = subparsers.add_parser("groups", help="committed offsets, lag and ledgers")
    actions = groups.add_subparsers(dest="action", required=True, metavar="ACTION")
    add_action(actions, "list", "every group with committed offsets", run_list, json=True)
    add_action(
        actions,
        "describe",
        "offsets and lag per partition, ledgers",
        run_describe,
        "group?",
        json=True,
    )
    group_admin.add_actions(actions)


def run_list(args: argparse.Namespace) -> int:
    names = sorted(open_log(args.path).group_offsets.groups())
    if args.json:
        emit_json(names)
    elif not names:
        # on stderr, so that a script reading the names sees none
        print(f"No consumer groups with committed offsets in {args.path}.", file=sys.stderr)
    else:
        for name in names:
            print(name)
    return EXIT_OK


def group_rows(log: Log, group: str, offsets: dict[Any, Any]) -> list[dict[str, Any]]:
    rows = []
    for tp, committed in sorted(offsets.items()):
        try:
            lso = log.partition_reader(tp).last_stable_offset
        except UnknownTopicOrPartitionError:
            lso = None  # the topic was deleted since
        rows.append(
            {
                "group": group,
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": committed.offset,
                "last_stable_offset": lso,
                "lag": None if lso is None else max(lso - committed.offset, 0),
                "metadata": committed.metadata,
            }
        )
    return rows


def ledger_rows(log: Log) -> list[dict[str, Any]]:
    return [
        {
            "ledger_key": entry.ledger_key,
            "last_sequence": entry.sequence,
            "status": state_name(entry.status),
            "group_id": entry.group_id,
            "transactions": len(entry.transactions),
            "timestamp_ms": entry.timestamp_ms,
        }
        for entry in log.coordinator.ledgers()
    ]


def run_describe(args: argparse.Namespace) -> int:
    log = open_log(args.path)
    all_groups = log.group_offsets.groups()
    if args.group is not None and args.group not in all_groups:
        raise UnknownTopicOrPartitionError(
            f"group {args.group!r} has no committed offsets; groups: "
            f"{', '.join(sorted(all_groups)) or '(none)'}"
        )
    selected = [args.group] if args.group else sorted(all_groups)
    rows = [row for g in selected for row in group_rows(log, g, all_groups[g])]
    ledgers = ledger_rows(log)
    if args.json:
        emit_json({"offsets": rows, "ledgers": ledgers})
        return EXIT_OK
    emit_table(
        rows,
        [
            "group",
            "topic",
            "partition",
            "committed_offset",
            "last_stable_offset",
            "lag",
            "metadata",
        ],
    )
    print("Ledgers (atomic commits):")
    emit_table(
        ledgers,
        ["ledger_key", "last_sequence", "status", "group_id", "transactions", "timestamp_ms"],
    )
    return EXIT_OK
