"""``txnlog topics create|list|describe|delete`` (kafka-topics for an embedded log).

``create`` is a newcomer's first command: it creates the log too when the path is missing or an
empty directory (``Log.open``'s rule), after checking the topic, so a refused topic leaves no log.

``describe`` shows what retention left of each partition (log start offset, segments, bytes),
the retention settings in force and when a housekeeping pass last ran in the log directory
(``txn_log.log_dir.housekeeping``; retention runs in the processes that have the log open
for writing).
"""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from txn_log.cli.common import (
    EXIT_OK,
    UsageError,
    add_action,
    create_log,
    emit_json,
    emit_table,
    open_log,
)
from txn_log.errors import InvalidPartitionsError, InvalidTopicError
from txn_log.log import MAX_PARTITIONS, Log
from txn_log.log_dir.housekeeping import last_pass_ms
from txn_log.storage.retention import applies_to
from txn_log.topic_config import (
    INTERNAL_TOPICS,
    TopicConfig,
    config_value_text,
    validate_topic_name,
)
from txn_log.topic_partition import TopicPartition


def add_parser(subparsers: Any) -> None:
    topics = subparsers.add_parser("topics", help="create, list, describe, alter or delete topics")
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = add_action(
        actions,
        "create",
        "create a topic (modifies the log); creates the log when PATH is missing or empty",
        run_create,
        "topic",
    )
    create.description = (
        "Create a topic. When PATH is missing or an empty directory, this first creates the "
        "log there (as `txnlog init PATH` does) and says so; a non-empty directory that is not "
        "a log is refused. Everything is checked before anything is written."
    )
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config, Kafka names (e.g. retention.ms=60000); repeatable",
    )
    listing = add_action(actions, "list", "list topics", run_list, json=True)
    listing.add_argument("--internal", action="store_true", help="include internal topics")
    add_action(
        actions,
        "describe",
        "partitions, offsets, LSO, sizes, retention, configs",
        run_describe,
        "topic?",
        json=True,
    )
    add_action(
        actions, "delete", "delete a topic and its data (modifies the log)", run_delete, "topic"
    )
    alter = add_action(
        actions,
        "alter",
        "add partitions to a topic (kafka-topics --alter --partitions; modifies the log)",
        run_alter,
        "topic",
    )
    alter.add_argument(
        "--partitions", type=int, required=True, help="the new total; partitions never shrink"
    )
    alter.add_argument("--dry-run", action="store_true", help="check the change and write nothing")


def parse_configs(pairs: list[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--config {pair!r} is not KEY=VALUE (e.g. retention.ms=60000)")
        configs[key.strip()] = value.strip()
    return configs


def run_create(args: argparse.Namespace) -> int:
    configs = parse_configs(args.config)
    check_new_topic(args.topic, args.partitions, configs)  # before a new log is created
    log, created = create_log(args.path)
    if created:
        print(f"Created a new log at {args.path}.")
    log.create_topic(args.topic, partitions=args.partitions, config=configs)
    print(f"Created topic {args.topic} with {args.partitions} partition(s).")
    return EXIT_OK


def check_new_topic(topic: str, partitions: int, configs: dict[str, str]) -> None:
    """What ``Log.create_topic`` refuses without looking at the log (name, reserved name,
    partition count, configs), checked first so that a refused topic creates no log."""
    validate_topic_name(topic)
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"topic name {topic!r} is reserved for txnlog's internal use")
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise InvalidPartitionsError(
            f"topic {topic!r}: partitions must be an integer from 1 to {MAX_PARTITIONS}, "
            f"got {partitions}"
        )
    TopicConfig.from_mapping(configs)


def run_list(args: argparse.Namespace) -> int:
    names = open_log(args.path).topics(include_internal=args.internal)
    if args.json:
        emit_json(names)
    else:
        for name in names:
            print(name)
    return EXIT_OK


def describe_partition(log: Log, tp: TopicPartition) -> dict[str, Any]:
    plog = log.partition_reader(tp)
    directory = log.path / tp.directory_name
    size = sum(p.stat().st_size for p in directory.glob("*.log"))
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "log_start_offset": plog.log_start_offset,
        "log_end_offset": plog.log_end_offset,
        "high_watermark": plog.high_watermark,
        "last_stable_offset": plog.last_stable_offset,
        "open_transactions": len(plog.producer_state.ongoing_transactions()),
        "segments": len(list(directory.glob("*.log"))),
        "size_bytes": size,
    }


RETENTION_KEYS = ("retention.ms", "retention.bytes")
NEVER_DELETED = dict.fromkeys(RETENTION_KEYS, -1)  # internal topics: replayed from the start


def run_describe(args: argparse.Namespace) -> int:
    log = open_log(args.path)
    topics = [args.topic] if args.topic else log.topics()
    housekeeping = {"last_pass_ms": last_pass_ms(log.path)}
    described: list[dict[str, Any]] = []
    for topic in topics:
        partitions = [describe_partition(log, tp) for tp in log.partitions(topic)]
        configs = log.topic_config(topic).to_mapping()
        described.append(
            {
                "topic": topic,
                "config": configs,
                "retention": (
                    {key: configs[key] for key in RETENTION_KEYS}
                    if applies_to(topic) and log.topic_config(topic).delete
                    else NEVER_DELETED
                ),
                "housekeeping": housekeeping,
                "partitions": partitions,
            }
        )
    if args.json:
        emit_json(described)
        return EXIT_OK
    for index, entry in enumerate(described):
        overridden = log.topic_config_overrides(entry["topic"])
        overrides = ",".join(  # the values set on the topic, as kafka-topics shows them
            f"{key}={config_value_text(value)}"
            for key, value in sorted(entry["config"].items())
            if key in overridden
        )
        retention = ", ".join(f"{k}={v}" for k, v in entry["retention"].items())
        if index:
            print()
        print(
            f"Topic: {entry['topic']}  TopicId: {log.topic_id(entry['topic'])}  "
            f"PartitionCount: {len(entry['partitions'])}  ReplicationFactor: 1  "
            f"Configs: {overrides}"
        )
        print(f"  Retention: {retention}")
        emit_table(
            entry["partitions"],
            [
                "partition",
                "log_start_offset",
                "log_end_offset",
                "high_watermark",
                "last_stable_offset",
                "open_transactions",
                "segments",
                "size_bytes",
            ],
        )
    last_pass = format_time(housekeeping["last_pass_ms"])
    print(f"Last housekeeping pass (retention, log cleaner): {last_pass}")
    return EXIT_OK


def format_time(ms: int | None) -> str:
    """``ms`` since the epoch as UTC ISO 8601, or "never"."""
    if ms is None:
        return "never"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return f"{moment.isoformat(timespec='milliseconds')} ({ms} ms)"


def run_alter(args: argparse.Namespace) -> int:
    log = open_log(args.path, writable=True)
    before = len(log.partitions(args.topic))
    log.create_partitions(args.topic, args.partitions, validate_only=args.dry_run)
    verb = "Would grow" if args.dry_run else "Grew"
    print(f"{verb} topic {args.topic} from {before} to {args.partitions} partition(s).")
    return EXIT_OK


def run_delete(args: argparse.Namespace) -> int:
    log = open_log(args.path, writable=True)
    removed = log.delete_topic(args.topic)
    print(f"Deleted topic {args.topic}: {removed} partition(s) and their data.")
    return EXIT_OK
