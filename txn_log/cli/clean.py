"""``txnlog clean PATH [TOPIC]``: run the log cleaner now (modifies the log).

Cleans every partition of ``TOPIC``, or of every compacted topic (internal ones included) when
no topic is given, whatever its dirty ratio (``storage.log_cleaner``: the newest record per key,
aborted data and expired tombstones and markers removed, offsets kept). Safe on a live log: it
waits for writers only for each segment's short swap, and a partition another process is
cleaning is reported as skipped. Prints, per partition, the segments rewritten, the bytes
before and after, and the records removed.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from txn_log.cli.common import EXIT_OK, UsageError, emit_json, emit_table, open_log


def add_parser(subparsers: Any) -> None:
    clean = subparsers.add_parser(
        "clean", help="compact topics with cleanup.policy=compact now (modifies the log)"
    )
    clean.add_argument("path")
    clean.add_argument("topic", nargs="?", help="one topic (default: every compacted topic)")
    clean.add_argument("--json", action="store_true")
    clean.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with open_log(args.path, writable=True) as log:
        if args.topic is not None:
            known = log.topics(include_internal=True)
            if args.topic not in known:
                raise UsageError(
                    f"topic {args.topic!r} does not exist in {args.path}; existing topics: "
                    f"{', '.join(known) if known else '(none)'}"
                )
            config = log.topic_config(args.topic)
            if not config.compact:
                raise UsageError(
                    f"topic {args.topic!r} has cleanup.policy={config.cleanup_policy}; only "
                    "topics with cleanup.policy=compact (or compact,delete) are cleaned"
                )
        stats = log.log_manager.clean(args.topic)
    rows = [
        {
            "partition": s.topic_partition,
            "segments": len(s.segments_cleaned),
            "written": s.segments_written,
            "bytes_before": s.bytes_before,
            "bytes_after": s.bytes_after,
            "records_removed": s.records_removed,
            "note": s.skipped or "",
        }
        for s in stats
    ]
    if args.json:
        emit_json([asdict(s) for s in stats])
        return EXIT_OK
    emit_table(rows, ["partition", "segments", "written", "bytes_before", "bytes_after",
                      "records_removed", "note"])  # fmt: skip
    segments = sum(len(s.segments_cleaned) for s in stats)
    written = sum(s.segments_written for s in stats)
    removed = sum(s.records_removed for s in stats)
    print(f"Cleaned {segments} segment(s) into {written} in {len(stats)} partition(s); "
          f"{removed} record(s) removed.")  # fmt: skip
    return EXIT_OK
