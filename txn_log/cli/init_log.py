"""``txnlog init PATH``: create an empty log (its directory, format file and internal topics).

Idempotent: on an existing log it says so and changes nothing. Like ``Log.open``, it creates a
log only where ``PATH`` is missing or an empty directory, and refuses a file or a non-empty
directory that is not a log. ``txnlog topics create`` creates the log the same way.
"""

from __future__ import annotations

import argparse
from typing import Any

from txn_log.cli.common import EXIT_OK, create_log


def add_parser(subparsers: Any) -> None:
    init = subparsers.add_parser(
        "init",
        help="create an empty log at PATH (modifies the log)",
        description=(
            "Create an empty log at PATH (a missing path or an empty directory). On a log that "
            "already exists it changes nothing and says so; a file or a non-empty directory "
            "that is not a log is refused. Then add topics with `txnlog topics create PATH "
            "TOPIC`."
        ),
    )
    init.add_argument("path")
    init.set_defaults(run=run_init)


def run_init(args: argparse.Namespace) -> int:
    log, created = create_log(args.path)
    log.close()
    if created:
        print(f"Created a new log at {args.path}.")
    else:
        print(f"{args.path} is already a txnlog directory; nothing to do.")
    return EXIT_OK
