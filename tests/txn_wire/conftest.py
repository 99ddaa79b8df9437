from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.txn_wire.serve_process import ServeProcess, start_serve
from txn_log.log import Log


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
    return path


@pytest.fixture
def server(log_dir: Path) -> Iterator[ServeProcess]:
    served = start_serve(log_dir)
    try:
        yield served
    finally:
        served.stop()
