"""``txnlog serve PATH``: speak Kafka's wire protocol over the log (``txn_wire``, issue 15).

The server is one more peer of the directory: other processes keep reading and writing it
directly. It prints the address it listens on (``--port 0`` picks a free port), binds
127.0.0.1 unless told otherwise, and has no authentication yet, which it says at start.
SIGTERM or SIGINT stops it cleanly: no new connections, requests in flight answered, the log
closed. ``txn_wire`` (and its ``kio`` dependency) is imported only here, inside the command,
so the rest of the CLI and the engine never load it (DESIGN §1).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from txn_log.cli.common import EXIT_OK, create_log


def add_parser(subparsers: Any) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="serve the log to Kafka clients over Kafka's protocol (modifies the log)",
        description=(
            "Listen for Kafka clients (confluent-kafka, kafka-python, ...) and serve the log "
            "at PATH to them: produce, fetch, list offsets, transactions, group offsets. "
            "Creates the log if PATH is missing. Stops on SIGTERM or SIGINT."
        ),
    )
    serve.add_argument("path")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=9092, help="0 picks a free port (default 9092)")
    serve.add_argument(
        "--auto-create-topics",
        action="store_true",
        help="create unknown topics on Metadata and Produce (auto.create.topics.enable)",
    )
    serve.add_argument(
        "--default-partitions",
        type=int,
        default=1,
        help="partitions of an auto-created topic (default 1)",
    )
    serve.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="also serve GET /metrics (Prometheus text: live producer ids, LSO, transactional "
        "ids, read_committed lag) on this port of the same host; 0 picks a free port",
    )
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from txn_wire.broker import ServeConfig
    from txn_wire.server import serve

    config = ServeConfig(
        auto_create_topics=args.auto_create_topics, default_partitions=args.default_partitions
    )

    def on_listening(host: str, port: int) -> None:
        print(f"txnlog serve: listening on {host}:{port} for the log at {args.path}", flush=True)
        print(
            "txnlog serve: the server is open: no authentication, no ACLs; "
            + ("bound to loopback only" if host.startswith("127.") else "reachable from others"),
            flush=True,
        )

    def on_metrics(host: str, port: int) -> None:
        print(f"txnlog serve: metrics on http://{host}:{port}/metrics", flush=True)

    log, _ = create_log(args.path)
    try:
        asyncio.run(
            serve(
                log,
                args.host,
                args.port,
                config,
                on_listening=on_listening,
                metrics_port=args.metrics_port,
                on_metrics=on_metrics,
            )
        )
    finally:
        log.close()
    print("txnlog serve: stopped", file=sys.stderr, flush=True)
    return EXIT_OK
