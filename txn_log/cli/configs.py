"""``txnlog configs PATH --describe|--alter`` (kafka-configs for an embedded log).

    txnlog configs LOG --describe [--entity-type topics] [--entity-name T] [--all] [--json]
    txnlog configs LOG --alter --entity-type topics --entity-name T \\
        [--add-config k=v,k2=[a,b]] [--delete-config k,k2] \\
        [--append-config cleanup.policy=compact] [--subtract-config ...] [--dry-run]
    txnlog configs LOG --describe|--alter --entity-type brokers [--entity-name 0 |
        --entity-default] ...

``--alter`` is Kafka's IncrementalAlterConfigs, as kafka-configs sends it: ``--add-config``
SETs keys, ``--delete-config`` returns them to their defaults, and (beyond kafka-configs)
``--append-config`` / ``--subtract-config`` add items to or remove them from a list key
(cleanup.policy). It runs the engine's one operation, the one ``txnlog serve`` runs for an
AdminClient (``Log.incremental_alter_topic_config``): everything is checked before anything is
written, and every process with the log open applies the change at its next operation on the
topic. ``--dry-run`` checks and shows the result, writing nothing (Kafka's validate_only).
``--describe`` shows the keys set on a topic (Kafka's dynamic topic configs), or with ``--all``
every key and where its value comes from.

``--entity-type brokers`` reaches the log's dynamic broker configs (``broker_config``, the
ones an AdminClient alters through ``txnlog serve``): ``--entity-name 0`` (every server of the
log is broker 0; the default) or ``--entity-default`` (the cluster-wide default), through the
engine's one operation (``Log.broker_configs.alter``, the one the server runs). Other entity
types are refused (``txnlog serve``'s other settings are its command line).
"""

from __future__ import annotations

import argparse
from typing import Any

from txn_log.cli import broker_configs as broker_configs_cli
from txn_log.cli.common import EXIT_OK, UsageError, emit_json, open_log
from txn_log.log import Log
from txn_log.log_dir.alter_configs import AlterConfigOp, OpType
from txn_log.log_dir.broker_config import topic_key_sources
from txn_log.topic_config import KEYS, TopicConfig, config_value_text


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "configs",
        help="describe or alter a topic's or the brokers' config (--alter modifies the log)",
        description=(
            "kafka-configs for a txnlog directory: --describe shows a topic's configs (or the "
            "log's dynamic broker configs), --alter changes them (Kafka's "
            "IncrementalAlterConfigs, as txnlog serve runs it); every process with the log "
            "open applies a change at its next operation on the topic."
        ),
    )
    parser.add_argument("path")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--describe", action="store_true", help="show configs")
    mode.add_argument("--alter", action="store_true", help="change configs")
    parser.add_argument(
        "--entity-type", default="topics", help="'topics' (the default) or 'brokers'"
    )
    parser.add_argument(
        "--entity-name", "--topic", dest="entity_name", metavar="NAME", help="a topic, or broker 0"
    )
    parser.add_argument(
        "--entity-default", action="store_true", help="brokers: the cluster-wide default"
    )
    for flag, what in (
        ("--add-config", "set keys: k=v,k2=v2 (a list value in brackets: k=[a,b])"),
        ("--delete-config", "return keys to their defaults: k,k2"),
        ("--append-config", "add items to a list key: cleanup.policy=compact"),
        ("--subtract-config", "remove items from a list key: cleanup.policy=delete"),
    ):
        parser.add_argument(flag, action="append", default=[], metavar="CONFIGS", help=what)
    parser.add_argument(
        "--dry-run", action="store_true", help="check and show the result; write nothing"
    )
    parser.add_argument("--all", action="store_true", help="describe: every key, with defaults")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.entity_type not in ("topics", "topic", "brokers", "broker"):
        raise UsageError(
            f"--entity-type {args.entity_type!r}: only topics and brokers have configs in a "
            "txnlog directory (txnlog serve takes its other settings from its command line)"
        )
    alterations = args.add_config + args.delete_config + args.append_config + args.subtract_config
    if alterations and not args.alter:
        raise UsageError("--add-config, --delete-config and the like go with --alter")
    if args.entity_type.startswith("broker"):
        return broker_configs_cli.run(args, parse_alterations)
    if args.entity_default:
        raise UsageError("--entity-default goes with --entity-type brokers")
    if args.alter:
        return run_alter(args)
    return run_describe(args)


def parse_alterations(args: argparse.Namespace) -> list[AlterConfigOp]:
    """The operations the flags ask for, in Kafka's incremental form; UsageError when none."""
    ops = [AlterConfigOp(k, OpType.SET, v) for arg in args.add_config for k, v in pairs(arg)]
    ops += [AlterConfigOp(k, OpType.DELETE) for arg in args.delete_config for k in keys(arg)]
    for flag, op_type in (
        (args.append_config, OpType.APPEND),
        (args.subtract_config, OpType.SUBTRACT),
    ):
        ops += [AlterConfigOp(k, op_type, v) for arg in flag for k, v in pairs(arg)]
    if not ops:
        raise UsageError(
            "--alter needs --add-config, --delete-config, --append-config or --subtract-config"
        )
    return ops


def pairs(text: str) -> list[tuple[str, str]]:
    """``k=v,k2=[a,b]`` as kafka-configs reads it: commas inside brackets belong to a list
    value, which is written without them (``a,b``)."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    found = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{item!r} is not KEY=VALUE (e.g. retention.ms=60000)")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        found.append((key.strip(), value))
    return found


def keys(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise UsageError(f"--delete-config {text!r} is not KEY[,KEY...]")
    return names


def run_alter(args: argparse.Namespace) -> int:
    if not args.entity_name:
        raise UsageError("--alter needs --entity-name TOPIC")
    ops = parse_alterations(args)
    log = open_log(args.path, writable=True)
    try:
        config = log.incremental_alter_topic_config(
            args.entity_name, ops, validate_only=args.dry_run
        )
        touched = {op.key for op in ops} if args.dry_run else None
        described = describe(log, args.entity_name, config, only=touched)
    finally:
        log.close()
    if args.json:
        emit_json({**described, "dry_run": args.dry_run})
    elif args.dry_run:
        print(f"Validated the config change for topic {args.entity_name}; nothing was written.")
        for key, shown in described["configs"].items():
            print(f"  {key} would be {shown['value']}")
    else:
        print(f"Completed updating config for topic {args.entity_name}.")
    return EXIT_OK


def describe(
    log: Log, topic: str, config: TopicConfig, *, only: set[str] | None = None
) -> dict[str, Any]:
    """One topic's ``config`` as ``--describe`` shows it: the keys in ``only`` (None: those the
    topic overrides; ``KEYS``: every one), each with its value and where it comes from (the
    topic, a dynamic broker default, or Kafka's default)."""
    overrides = log.topic_config_overrides(topic)
    source = topic_key_sources(topic, overrides, log.broker_configs.current())
    shown = overrides if only is None else only
    return {
        "topic": topic,
        "configs": {
            key: {"value": config_value_text(value), "source": source(key)}
            for key, value in sorted(config.to_mapping().items())
            if key in shown
        },
    }


def run_describe(args: argparse.Namespace) -> int:
    log = open_log(args.path)
    try:
        topics = [args.entity_name] if args.entity_name else log.topics()
        every = set(KEYS) if args.all else None
        found = [describe(log, t, log.topic_config(t), only=every) for t in topics]
    finally:
        log.close()
    if args.json:
        emit_json(found)
        return EXIT_OK
    for entry in found:
        print(f"{'All' if args.all else 'Dynamic'} configs for topic {entry['topic']} are:")
        for key, shown in entry["configs"].items():
            print(f"  {key}={shown['value']} ({shown['source']})")
    return EXIT_OK
