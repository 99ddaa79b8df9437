"""``txnlog serve`` answering Metadata as a Kafka broker before 2.8 does: without topic ids
(KIP-516; the zero UUID in Metadata v10+ ``topic_id``), for the Kafka source's test of a
cluster that reports none (issue 29 item 3):

    python -m tests.txn_source.old_broker_serve PATH --port 0

``txnlog serve`` itself reports every topic's id. This process runs the same server with the
ids blanked from its Metadata answers. ``start_old_broker_serve`` starts it like
``start_serve`` (127.0.0.1, port 0, stopped by its pid)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from demo.served import ServeProcess

ROOT = Path(__file__).resolve().parents[2]


def _without_topic_ids(broker: Any, request: Any, address: Any) -> Any:
    from txn_wire.metadata import handle_metadata

    body = handle_metadata(broker, request, address)
    for topic in body["topics"]:
        topic["topic_id"] = uuid.UUID(int=0)
    return body


def main(argv: list[str]) -> int:
    from txn_log.cli import main as txnlog
    from txn_wire import server

    server.HANDLERS[3] = server._blocking(_without_topic_ids, with_address=True)
    return txnlog(["serve", *argv])


def start_old_broker_serve(path: Path) -> ServeProcess:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.txn_source.old_broker_serve", str(path), "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if process.stdout is None:
        raise RuntimeError("no stdout pipe")
    banner = [process.stdout.readline().strip() for _ in range(2)]
    if not banner[0]:
        raise RuntimeError(f"the server exited: {process.stderr.read() if process.stderr else ''}")
    port = int(banner[0].split("listening on ")[1].split()[0].rsplit(":", 1)[1])
    return ServeProcess(path, process, port, banner)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
