"""The ``txnlog`` command: create, inspect and repair a log (Kafka's dump-log, topics,
transactions and consumer-groups tools, for an embedded log; ``init`` creates an empty log).

Every listing takes ``--json``. Subcommands that modify the log say so in their help; all others
open the log read-only and never change a byte. Exit codes: 0 done, 1 failed or problems found,
2 bad usage (a mistyped path, topic, partition or transactional id gets one line naming what was
not found and what exists).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from txn_log.cli import (
    acls,
    clean,
    clients,
    configs,
    delete_records,
    dump,
    get_offsets,
    groups,
    init_log,
    metrics,
    serve,
    topics,
    transactions,
    users,
    verify,
)
from txn_log.cli.common import EXIT_FAILED, EXIT_USAGE, UsageError
from txn_log.errors import (
    ConfigError,
    InvalidTopicError,
    TxnLogError,
    UnknownTopicOrPartitionError,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="txnlog",
        description=(
            "Create, inspect and repair a txnlog directory. Start with `txnlog init PATH` or "
            "`txnlog topics create PATH TOPIC` (either creates the log)."
        ),
        epilog="Exit codes: 0 done, 1 failed or problems found, 2 bad usage.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        init_log,
        topics,
        configs,
        dump,
        get_offsets,
        transactions,
        groups,
        verify,
        clean,
        delete_records,
        metrics,
        clients,
        serve,
        users,
        acls,
    ):
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except (UsageError, UnknownTopicOrPartitionError, InvalidTopicError) as error:
        print(f"txnlog: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as error:
        print(f"txnlog: {error}", file=sys.stderr)
        return EXIT_USAGE
    except TxnLogError as error:
        print(f"txnlog: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # e.g. piped into head
        return 0


if __name__ == "__main__":
    sys.exit(main())
