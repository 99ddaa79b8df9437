"""``txnlog configs --entity-type brokers`` (kafka-configs --entity-type brokers): the log's
dynamic broker configs (``log_dir.broker_config``), the ones an AdminClient alters through
``txnlog serve``, through the same engine operation (``Log.broker_configs.alter``).

    txnlog configs LOG --describe --entity-type brokers [--entity-name 0 | --entity-default]
        [--all] [--json]
    txnlog configs LOG --alter --entity-type brokers [--entity-name 0 | --entity-default] \\
        [--add-config k=v] [--delete-config k] [--append-config log.cleanup.policy=compact] \\
        [--subtract-config ...] [--dry-run]

Broker 0 (every server of a log is broker 0) is the default entity; ``--entity-default`` is
the cluster-wide default. ``--describe`` shows the keys set on that entity, with ``--all``
every dynamic broker key with its value in force and where it comes from. A refusal (an
unknown key, a bad value, a per-broker key at the cluster default) is exit code 2 naming the
key, nothing written; ``--dry-run`` checks and shows, writing nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from txn_log.cli.common import EXIT_OK, UsageError, emit_json, open_log
from txn_log.log_dir.alter_configs import AlterConfigOp
from txn_log.log_dir.broker_config import CLUSTER_DEFAULT, THIS_BROKER, BrokerConfig
from txn_log.log_dir.broker_config_keys import KEYS

ParseAlterations = Callable[[argparse.Namespace], list[AlterConfigOp]]


def run(args: argparse.Namespace, parse_alterations: ParseAlterations) -> int:
    resource = _resource(args)
    if args.alter:
        ops = parse_alterations(args)
        log = open_log(args.path, writable=True)
        try:
            config = log.broker_configs.alter(resource, ops, validate_only=args.dry_run)
        finally:
            log.close()
        touched = {op.key for op in ops}
        return _show(args, resource, config, touched if args.dry_run else None, altered=True)
    log = open_log(args.path)
    try:
        config = log.broker_configs.current()
    finally:
        log.close()
    return _show(args, resource, config, set(KEYS) if args.all else None, altered=False)


def _resource(args: argparse.Namespace) -> str:
    if args.entity_default:
        if args.entity_name:
            raise UsageError("--entity-name and --entity-default do not go together")
        return CLUSTER_DEFAULT
    if args.entity_name not in (None, THIS_BROKER):
        raise UsageError(
            f"--entity-name {args.entity_name!r}: every txnlog serve of a log is broker "
            f"{THIS_BROKER}; name it, or --entity-default for the cluster-wide default"
        )
    return THIS_BROKER


def described(config: BrokerConfig, resource: str, only: set[str] | None) -> dict[str, Any]:
    """The entity's configs as ``--describe`` shows them: those set on it (``only`` None), or
    the keys in ``only`` with the value in force and its source."""
    own = config.configs.get(resource, {})
    if only is None:
        source = "DYNAMIC_DEFAULT_BROKER_CONFIG" if resource == CLUSTER_DEFAULT else None
        shown = {
            key: {"value": value, "source": source or "DYNAMIC_BROKER_CONFIG"}
            for key, value in sorted(own.items())
        }
    else:
        shown = {}
        for key in sorted(only):
            value, source = config.value(key)
            shown[key] = {"value": value, "source": source}
    return {"broker": resource or "<default>", "configs": shown}


def _show(
    args: argparse.Namespace,
    resource: str,
    config: BrokerConfig,
    only: set[str] | None,
    *,
    altered: bool,
) -> int:
    entry = described(config, resource, only)
    name = "the cluster-wide default" if resource == CLUSTER_DEFAULT else f"broker {resource}"
    if args.json:
        emit_json({**entry, "dry_run": args.dry_run} if altered else entry)
    elif altered and args.dry_run:
        print(f"Validated the config change for {name}; nothing was written.")
        own = config.configs.get(resource, {})
        for key in sorted(only or ()):
            print(f"  {key} would be {own.get(key, 'unset (the next source applies)')}")
    elif altered:
        print(f"Completed updating config for {name}.")
    else:
        print(f"{'All' if args.all else 'Dynamic'} configs for {name} are:")
        for key, shown in entry["configs"].items():
            print(f"  {key}={shown['value']} ({shown['source']})")
    return EXIT_OK
