"""The metrics endpoint of ``txnlog serve --metrics-port``: ``GET /metrics`` answers the seeds'
metrics (``txn_log.log_metrics``: live producer ids, LSO per partition, transactional ids by
state, read_committed lag per group) in the Prometheus text format, as Kafka exporters do.

A deliberately small HTTP/1.0-style server: one request per connection, request head at most
``MAX_HEAD_BYTES``, read within ``READ_TIMEOUT_S``; anything but ``GET /metrics`` gets 404 (or
400 for a malformed head). The figures are collected off the event loop, without a lock.
"""

from __future__ import annotations

import asyncio
import logging

from txn_log.log import Log
from txn_log.log_metrics import collect, render_prometheus

logger = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
READ_TIMEOUT_S = 10.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _response(status: str, body: bytes, content_type: str = "text/plain") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


class MetricsServer:
    """Serves ``GET /metrics`` for ``log``; ``start`` binds, ``stop`` closes."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._handle, host, port)
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            writer.write(await self._answer(head))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.write(_response("400 Bad Request", b"bad request\n"))
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _answer(self, head: bytes) -> bytes:
        if len(head) > MAX_HEAD_BYTES:
            return _response("400 Bad Request", b"request head too large\n")
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or parts[0] != b"GET":
            return _response("400 Bad Request", b"only GET /metrics\n")
        if parts[1].split(b"?", 1)[0] != b"/metrics":
            return _response("404 Not Found", b"not found: try /metrics\n")
        try:
            text = await asyncio.to_thread(lambda: render_prometheus(collect(self._log)))
        except Exception as error:  # a metrics failure must never take the server down
            logger.warning("metrics collection failed: %s", error)
            return _response("500 Internal Server Error", f"{error}\n".encode())
        return _response("200 OK", text.encode(), CONTENT_TYPE)
