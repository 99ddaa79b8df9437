"""The local SparkSession of the main job, the Spark tests and the benchmarks (one builder).

Everything listens on 127.0.0.1, the Python workers run this interpreter, and py4j's callback
server (which ``foreachBatch`` and streaming listeners call into) is started at once. That
server waits on ``select()``, which cannot watch a descriptor numbered 1024 or more: started
late in a process that holds many files open, its thread dies and the first ``foreachBatch``
hangs for ever. Starting it with the session gives it a low descriptor, and the check below
turns the hang into an error.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

SELECT_FD_LIMIT = 1024  # FD_SETSIZE


def local_session(app_name: str, master: str = "local[2]", **conf: str) -> Any:
    """A local SparkSession for ``app_name`` (``conf`` adds or overrides settings)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.python.worker.reuse": "true",
        **conf,
    }
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    gc.collect()  # descriptors of unreachable objects close now, before py4j takes one
    session = builder.getOrCreate()
    start_callback_server(session)
    return session


def start_callback_server(session: Any) -> None:
    """Start py4j's callback server now; refuse a descriptor ``select()`` cannot watch."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = session.sparkContext._gateway
    ensure_callback_server_started(gateway)
    fd = gateway._callback_server.server_socket.fileno()
    if fd >= SELECT_FD_LIMIT:
        raise RuntimeError(
            f"py4j's callback server got file descriptor {fd}; it waits on select(), which "
            f"only watches descriptors below {SELECT_FD_LIMIT}, so foreachBatch would hang. "
            "Close files this process no longer needs (it holds "
            f"{len(os.listdir('/proc/self/fd'))}) before starting Spark."
        )
