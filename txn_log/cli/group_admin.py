"""``txnlog groups reset-offsets|delete|delete-offsets`` (kafka-consumer-groups --reset-offsets,
--delete and --delete-offsets).

All three act only on an inactive group, as Kafka's first two do: a group whose members are
connected to a ``txnlog serve`` process (the only place membership exists) is refused,
GroupNotEmptyError in Kafka's words (Kafka's ``--delete-offsets`` asks the broker, which knows
its members' subscriptions and refuses only their topics; a process beside the server cannot
see them, so it refuses the group: an AdminClient through the server gets Kafka's answer). The
engine holds the group inactive for the whole check-and-write (``GroupOffsetStore.
reset_offsets`` / ``delete_group`` / ``delete_offsets``, through ``group_activity``), so a
consumer joining meanwhile waits for the command, never the other way round, and writes go
through the group offset store's one append path, under the same partition lock as every
commit (DESIGN §3).

``reset-offsets`` prints the plan (GROUP TOPIC PARTITION NEW_OFFSET) and writes nothing unless
given ``--execute`` (``--dry-run`` is the default); targets outside the log are clamped to
``[log start, log end]`` with a warning on stderr (``reset_plan``). ``delete`` writes one
tombstone per committed offset of the group into ``__consumer_offsets``, as Kafka does;
``delete-offsets`` one per committed offset of the partitions named (``--topic T[:P,...]``),
the engine's OffsetDelete (``GroupOffsetStore.delete_offsets``), which ``txnlog serve``
answers too.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from txn_log.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    emit_json,
    emit_table,
    open_log,
)
from txn_log.cli.reset_plan import PlannedOffset, Scenario, plan_offsets, spec_from_args
from txn_log.errors import GroupIdNotFoundError, GroupNotEmptyError
from txn_log.group.group_metadata import OffsetAndMetadata
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def add_actions(actions: Any) -> None:
    """Add ``reset-offsets``, ``delete`` and ``delete-offsets`` to ``txnlog groups``."""
    reset = actions.add_parser(
        "reset-offsets",
        help="move a group's committed offsets (dry run unless --execute; modifies the log)",
    )
    reset.add_argument("path")
    reset.add_argument("--group", required=True)
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (topic:0,2); repeatable",
    )
    which.add_argument(
        "--all-topics", action="store_true", help="every partition the group has an offset for"
    )
    scenario = reset.add_mutually_exclusive_group(required=True)
    for kind in Scenario:
        takes = {
            Scenario.TO_OFFSET: "N",
            Scenario.SHIFT_BY: "N",
            Scenario.TO_DATETIME: "ISO",
            Scenario.BY_DURATION: "PnDTnHnMnS",
        }.get(kind)
        if takes is None:
            scenario.add_argument(
                f"--{kind.value}", dest="scenario", action="store_const", const=kind.value
            )
        else:
            scenario.add_argument(
                f"--{kind.value}",
                dest="scenario_value",
                metavar=takes,
                action=_ScenarioWithValue,
                scenario=kind.value,
            )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (default)")
    mode.add_argument("--execute", action="store_true", help="commit the planned offsets")
    reset.add_argument("--json", action="store_true")
    reset.set_defaults(run=run_reset_offsets, scenario=None, scenario_value=None)

    delete = actions.add_parser(
        "delete", help="delete an inactive group's committed offsets (modifies the log)"
    )
    delete.add_argument("path")
    delete.add_argument("--group", action="append", required=True, help="repeatable")
    delete.set_defaults(run=run_delete)

    offsets = actions.add_parser(
        "delete-offsets",
        help="delete an inactive group's committed offsets of some partitions (modifies the log)",
    )
    offsets.add_argument("path")
    offsets.add_argument("--group", required=True)
    offsets.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (topic:0,2); repeatable",
    )
    offsets.add_argument("--json", action="store_true")
    offsets.set_defaults(run=run_delete_offsets)


class _ScenarioWithValue(argparse.Action):
    """``--to-offset N`` and friends: records which scenario and its value."""

    def __init__(self, *args: Any, scenario: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scenario = scenario

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        namespace.scenario = self.scenario
        namespace.scenario_value = values


def selected_partitions(
    log: Log, topics: list[str] | None, committed: dict[TopicPartition, OffsetAndMetadata]
) -> list[TopicPartition]:
    """``--topic`` values (``topic`` or ``topic:p,p``), checked against what exists; without
    them (``--all-topics``), the partitions the group has offsets for that still exist."""
    if topics is None:
        existing = set(log.topics())
        return [tp for tp in committed if tp.topic in existing and _exists(log, tp)]
    chosen: list[TopicPartition] = []
    for text in topics:
        topic, _, listed = text.partition(":")
        partitions = log.partitions(topic)  # raises naming the existing topics
        if not listed:
            chosen += partitions
            continue
        for item in listed.split(","):
            if not item.strip().isdigit():
                raise UsageError(f"--topic {text!r}: {item!r} is not a partition number")
            number = int(item)
            if number >= len(partitions):
                raise UsageError(
                    f"--topic {text!r}: partition {number} of topic {topic!r} does not exist; "
                    f"valid partitions are 0..{len(partitions) - 1}"
                )
            chosen.append(TopicPartition(topic, number))
    return chosen


def _exists(log: Log, tp: TopicPartition) -> bool:
    return tp.partition < len(log.partitions(tp.topic))


def inactive_error(group: str) -> GroupNotEmptyError:
    """Kafka's words for a reset of a live group."""
    return GroupNotEmptyError(
        f"Assignments can only be reset if the group {group!r} is inactive, but it has active "
        "members (its state is not Empty: they are connected to a txnlog serve process); stop "
        "its consumers, or wait for their session timeout, then run this again"
    )


def run_reset_offsets(args: argparse.Namespace) -> int:
    execute = bool(args.execute)
    log = open_log(args.path, writable=execute)
    spec = spec_from_args(args.scenario, args.scenario_value, log.clock.time_ms())
    planned: list[PlannedOffset] = []

    def plan(current: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        partitions = selected_partitions(log, args.topic, current)
        planned[:] = plan_offsets(log, spec, partitions, current)
        return {line.topic_partition: line.new_offset for line in planned}

    try:
        if execute:
            log.group_offsets.reset_offsets(args.group, plan)
        elif log.group_offsets.activity.is_active(args.group):
            raise GroupNotEmptyError(f"group {args.group!r} has active members")
        else:
            plan(log.group_offsets.groups().get(args.group, {}))
    except GroupNotEmptyError:
        raise inactive_error(args.group) from None
    _report_plan(args, planned, execute)
    return EXIT_OK


def _report_plan(args: argparse.Namespace, planned: list[PlannedOffset], executed: bool) -> None:
    rows = [
        {
            "group": args.group,
            "topic": line.topic_partition.topic,
            "partition": line.topic_partition.partition,
            "current_offset": line.current,
            "new_offset": line.new_offset,
            "clamped": line.clamped or None,
        }
        for line in planned
    ]
    for line in planned:
        if line.clamped:
            print(
                f"txnlog: warning: {line.topic_partition}: target {line.clamped}", file=sys.stderr
            )
    if args.json:
        emit_json({"executed": executed, "offsets": rows})
        return
    emit_table(rows, ["group", "topic", "partition", "new_offset"])
    if not executed:
        print("Dry run: nothing was written; add --execute to commit these offsets.")


def run_delete(args: argparse.Namespace) -> int:
    log = open_log(args.path, writable=True)
    failed: list[str] = []
    for group in args.group:
        try:
            deleted = log.group_offsets.delete_group(group)
        except (GroupNotEmptyError, GroupIdNotFoundError) as error:
            failed.append(
                f"* Group {group!r} could not be deleted: {type(error).__name__}: {error}"
            )
            continue
        print(
            f"Deletion of consumer group {group!r} was successful: offsets of "
            f"{len(deleted)} partition(s) removed."
        )
    if failed:
        print("Deletion of some consumer groups failed:", file=sys.stderr)
        for line in failed:
            print(line, file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def run_delete_offsets(args: argparse.Namespace) -> int:
    """kafka-consumer-groups --delete-offsets: the engine's ``delete_offsets``, holding the group
    inactive (a group with members anywhere is refused: this process cannot see what they
    subscribe to; an AdminClient through ``txnlog serve`` can). Every partition named is
    answered Successful, as Kafka's tool prints it, whether it had an offset or not."""
    log = open_log(args.path, writable=True)
    try:
        partitions = selected_partitions(log, args.topic, {})
        deleted = set(log.group_offsets.delete_offsets(args.group, partitions))
    except (GroupNotEmptyError, GroupIdNotFoundError) as error:
        print(
            f"Error: deleting offsets of group {args.group!r} failed: "
            f"{type(error).__name__}: {error}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    finally:
        log.close()
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "status": "Successful",
            "had_offset": tp in deleted,
        }
        for tp in sorted(set(partitions))
    ]
    if args.json:
        emit_json({"group": args.group, "offsets": rows})
        return EXIT_OK
    print(f"Request succeeded for deleting offsets from group {args.group}.")
    emit_table(rows, ["topic", "partition", "status"])
    return EXIT_OK
