"""``txnlog transactions list|describe|abort|find-hanging`` (kafka-transactions).

``abort TXN_ID`` is a normal coordinator abort with an epoch bump (the timeout's path, C-25):
the instance that owned the transaction is fenced, ABORT markers are written, and readers stuck
at the LSO move on. ``abort --topic T --partition P --start-offset N`` (kafka-transactions
abort, KIP-664) ends a *hanging* transaction, one open in a partition that no coordinator
transaction will end (what ``find-hanging`` lists second): an ABORT marker for its producer in
that partition only, under the coordinator's and the partition's locks
(``coordinator/hanging_transactions``). Nothing here ever edits a file directly.

``find-hanging`` reports (1) open transactions older than ``--max-age-minutes`` and (2)
partitions whose LSO is held by a producer that has no open coordinator transaction on that
partition: a lost marker (C-42, X-09), which only a marker rewrite can release.
"""

from __future__ import annotations

import argparse
from typing import Any

from txn_log.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_action,
    all_partitions,
    emit_json,
    emit_table,
    open_log,
    parse_topic_partition,
)
from txn_log.coordinator.transaction_metadata import TransactionMetadata
from txn_log.coordinator.transaction_state import is_in_progress, state_name
from txn_log.errors import UnknownTopicOrPartitionError
from txn_log.log import Log

COLUMNS = [
    "transactional_id",
    "producer_id",
    "producer_epoch",
    "state",
    "timeout_ms",
    "start_time_ms",
    "last_update_ms",
    "partitions",
]


def add_parser(subparsers: Any) -> None:
    txns = subparsers.add_parser("transactions", help="list, describe, abort, find hanging")
    actions = txns.add_subparsers(dest="action", required=True, metavar="ACTION")
    add_action(actions, "list", "every transactional id and its state", run_list, json=True)
    add_action(
        actions, "describe", "one transactional id", run_describe, "transactional_id", json=True
    )
    abort = add_action(
        actions,
        "abort",
        "abort an open transaction, or a hanging one on a partition (modifies the log)",
        run_abort,
        "transactional_id?",
    )
    hanging_abort = abort.add_argument_group("a hanging transaction (instead of TRANSACTIONAL_ID)")
    hanging_abort.add_argument("--topic")
    hanging_abort.add_argument("--partition", type=int)
    hanging_abort.add_argument(
        "--start-offset", type=int, help="first offset of the open transaction (inclusive)"
    )
    hanging_abort.add_argument("--producer-id", type=int, help="default: the partition's")
    hanging_abort.add_argument("--producer-epoch", type=int, help="default: the partition's")
    hanging = add_action(
        actions,
        "find-hanging",
        "open transactions older than N minutes",
        run_find_hanging,
        json=True,
    )
    hanging.add_argument(
        "--max-age-minutes",
        type=float,
        default=15.0,
        help="report transactions open longer than this (default 15)",
    )


def describe(metadata: TransactionMetadata) -> dict[str, Any]:
    return {
        "transactional_id": metadata.transactional_id,
        "producer_id": metadata.producer_id,
        "producer_epoch": metadata.producer_epoch,
        "state": state_name(metadata.state),
        "timeout_ms": metadata.txn_timeout_ms,
        "start_time_ms": metadata.txn_start_timestamp_ms,
        "last_update_ms": metadata.txn_last_update_timestamp_ms,
        "partitions": ",".join(f"{t}-{p}" for t, p in sorted(metadata.topic_partitions)),
    }


def find(log: Log, transactional_id: str) -> TransactionMetadata:
    known = log.coordinator.transactions()
    for metadata in known:
        if metadata.transactional_id == transactional_id:
            return metadata
    names = [m.transactional_id for m in known]
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    raise UnknownTopicOrPartitionError(
        f"transactional id {transactional_id!r} not found; known ids: {shown or '(none)'}"
    )


def run_list(args: argparse.Namespace) -> int:
    rows = [describe(m) for m in open_log(args.path).coordinator.transactions()]
    if args.json:
        emit_json(rows)
    else:
        emit_table(rows, COLUMNS)
    return EXIT_OK


def run_describe(args: argparse.Namespace) -> int:
    row = describe(find(open_log(args.path), args.transactional_id))
    if args.json:
        emit_json(row)
    else:
        for key in COLUMNS:
            print(f"{key}: {row[key]}")
    return EXIT_OK


def run_abort(args: argparse.Namespace) -> int:
    by_partition = (args.topic, args.partition, args.start_offset)
    if args.transactional_id is None:
        return run_abort_hanging(args)
    if any(value is not None for value in by_partition):
        raise UsageError(
            "give a TRANSACTIONAL_ID, or --topic, --partition and --start-offset, not both"
        )
    log = open_log(args.path, writable=True)
    metadata = find(log, args.transactional_id)
    if not log.coordinator.abort_transaction(args.transactional_id):
        print(
            f"txnlog: transactional id {args.transactional_id!r} has no open transaction "
            f"(state {state_name(metadata.state)}); nothing aborted"
        )
        return EXIT_FAILED
    print(
        f"Aborted the transaction of {args.transactional_id!r} (producer "
        f"{metadata.producer_id}); epoch bumped to fence its owner."
    )
    return EXIT_OK


def run_abort_hanging(args: argparse.Namespace) -> int:
    if args.topic is None or args.partition is None or args.start_offset is None:
        raise UsageError(
            "abort needs a TRANSACTIONAL_ID, or --topic, --partition and --start-offset (a "
            "hanging transaction: `txnlog transactions find-hanging PATH` lists them)"
        )
    log = open_log(args.path, writable=True)
    tp = parse_topic_partition(log, f"{args.topic}-{args.partition}")
    done = log.coordinator.abort_hanging_transaction(
        tp, args.start_offset, args.producer_id, args.producer_epoch
    )
    print(
        f"Wrote an ABORT marker at offset {done.marker_offset} of {tp} for producer "
        f"{done.producer_id} (epoch {done.producer_epoch}), ending its transaction from offset "
        f"{done.start_offset}."
    )
    return EXIT_OK


def orphan_transactions(log: Log) -> list[dict[str, Any]]:
    """Partition-side open transactions with no matching open coordinator transaction."""
    owners = {
        (m.producer_id, tp)
        for m in log.coordinator.transactions()
        if is_in_progress(m.state)
        for tp in m.topic_partitions
    }
    rows = []
    for tp in all_partitions(log, log.topics(include_internal=True)):
        for txn in log.partition_reader(tp).producer_state.ongoing_transactions():
            if (txn.producer_id, (tp.topic, tp.partition)) not in owners:
                rows.append(
                    {
                        "topic_partition": str(tp),
                        "producer_id": txn.producer_id,
                        "first_offset": txn.first_offset,
                    }
                )
    return rows


def run_find_hanging(args: argparse.Namespace) -> int:
    log = open_log(args.path)
    now = log.clock.time_ms()
    limit_ms = args.max_age_minutes * 60_000
    old = [
        dict(describe(m), age_ms=now - m.txn_start_timestamp_ms)
        for m in log.coordinator.transactions()
        if is_in_progress(m.state) and now - m.txn_start_timestamp_ms > limit_ms
    ]
    orphans = orphan_transactions(log)
    if args.json:
        emit_json({"open_longer_than_limit": old, "without_coordinator_transaction": orphans})
    else:
        print(f"Open transactions older than {args.max_age_minutes:g} minutes:")
        emit_table(old, ["transactional_id", "producer_id", "state", "age_ms", "partitions"])
        print("Partitions held by a producer with no open coordinator transaction:")
        emit_table(orphans, ["topic_partition", "producer_id", "first_offset"])
    return EXIT_OK
