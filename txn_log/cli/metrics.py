"""``txnlog metrics PATH [--json]``: the seeds' metrics (MET-01..03, MET-05) now, in the
Prometheus text format (or JSON): live producer ids and the last stable offset per partition,
transactional ids by state, each group's read_committed lag against the LSO. The same figures
``txnlog serve --metrics-port`` exposes over HTTP (``txn_log.log_metrics``). Read only."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from txn_log.cli.common import EXIT_OK, emit_json, open_log
from txn_log.log_metrics import collect, render_prometheus


def add_parser(subparsers: Any) -> None:
    metrics = subparsers.add_parser(
        "metrics",
        help="live producer ids, LSO, transactional ids, read_committed lag (Prometheus text)",
    )
    metrics.add_argument("path")
    metrics.add_argument("--json", action="store_true")
    metrics.set_defaults(run=run_metrics)


def run_metrics(args: argparse.Namespace) -> int:
    metrics = collect(open_log(args.path))
    if args.json:
        emit_json(dataclasses.asdict(metrics))
    else:
        sys.stdout.write(render_prometheus(metrics))
    return EXIT_OK
