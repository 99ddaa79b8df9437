"""One session-scoped ``local[2]`` SparkSession per test run (a JVM start costs seconds).

The environment Spark needs is set here too, so ``pytest integration`` works without ``make``:
the Python workers run this interpreter and everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from demo.spark_session import local_session

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


# local[2,3]: two cores like local[2], and up to 3 attempts per task so that task-retry tests
# (TESTING scenario 10b) run in the same session; plain local[2] never retries a task.
MASTER = "local[2,3]"


def build_session(master: str = MASTER):  # type: ignore[no-untyped-def]
    return local_session("txnlog-tests", master)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The run's only SparkSession, stopped when the run ends."""
    session = build_session()
    yield session
    session.stop()
