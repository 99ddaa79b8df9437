"""``txnlog serve --metrics-port``: ``GET /metrics`` answers the seeds' metrics (MET-01..03,
MET-05) in the Prometheus text format while Kafka clients and other processes use the log,
and a bad request gets an error, never a crashed server."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.txn_log.test_log_metrics import build
from tests.txn_wire.serve_process import start_serve
from txn_log.clock import SYSTEM_CLOCK


def test_metrics_endpoint_follows_the_log_and_refuses_other_paths(tmp_path: Path) -> None:
    build(tmp_path, SYSTEM_CLOCK).close()
    server = start_serve(tmp_path, "--metrics-port", "0")
    try:
        assert server.process.stdout is not None
        line = server.process.stdout.readline().strip()
        assert line.startswith("txnlog serve: metrics on http://127.0.0.1:"), line
        url = line.split(" on ", 1)[1]
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = response.read().decode()
        assert 'txnlog_partition_last_stable_offset{topic="t",partition="1"} 2' in text
        assert 'txnlog_transactional_ids{state="Ongoing"} 1' in text
        # another process commits the open transaction: the next scrape sees the LSO move
        from txn_log.log import Log

        log = Log.open(tmp_path)
        log.coordinator.abort_transaction("open")
        log.close()
        with urllib.request.urlopen(url, timeout=30) as response:
            text = response.read().decode()
        assert 'txnlog_partition_last_stable_offset{topic="t",partition="1"} 5' in text
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url.replace("/metrics", "/nope"), timeout=30)
        assert missing.value.code == 404
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(b"garbage\r\n\r\n")
            assert raw.recv(100).startswith(b"HTTP/1.1 400")
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200  # still serving
    finally:
        assert server.stop() == 0
