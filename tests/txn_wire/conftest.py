from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.txn_wire.serve_process import ServeProcess, serving
from txn_log.log import Log


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
    return path


@pytest.fixture
def server(log_dir: Path) -> Iterator[ServeProcess]:
    yield from serving(log_dir)


@pytest.fixture
def quick_server(log_dir: Path) -> Iterator[ServeProcess]:
    """A server whose first join round closes at once (no initial rebalance delay)."""
    yield from serving(log_dir, "--group-initial-rebalance-delay-ms", "0")
