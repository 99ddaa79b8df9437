"""``txnlog serve`` answering Metadata with each topic's id, as every Kafka broker since 2.8
does (KIP-516; Metadata v10+ ``topic_id``), for the Kafka source's topic-id tests (issue 29
item 3):

    python -m tests.txn_source.topic_id_serve PATH --port 0

``txnlog serve`` itself leaves ``topic_id`` at the zero UUID (its Metadata handler does not
fill the field; the engine has the ids, ``topics/<topic>.json``). This process runs the same
server with its Metadata answer completed from those files, so that the source is tested
against a server that reports ids as a Kafka cluster would. ``start_topic_id_serve`` starts it
like ``start_serve`` (127.0.0.1, port 0, stopped by its pid)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from demo.served import ServeProcess

ROOT = Path(__file__).resolve().parents[2]


def _with_topic_ids(log_dir: Path) -> Any:
    from txn_wire.metadata import handle_metadata

    def handle(broker: Any, request: Any, address: Any) -> Any:
        body = handle_metadata(broker, request, address)
        for topic in body["topics"]:
            meta = log_dir / "topics" / f"{topic['name']}.json"
            if topic["error_code"] == 0 and meta.exists():
                printed = json.loads(meta.read_text())["topic_id"]
                topic["topic_id"] = uuid.UUID(bytes=base64.urlsafe_b64decode(printed + "=="))
        return body

    return handle


def main(argv: list[str]) -> int:
    from txn_log.cli import main as txnlog
    from txn_wire import server

    server.HANDLERS[3] = server._blocking(_with_topic_ids(Path(argv[0])), with_address=True)
    return txnlog(["serve", *argv])


def start_topic_id_serve(path: Path) -> ServeProcess:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.txn_source.topic_id_serve", str(path), "--port", "0"],
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
