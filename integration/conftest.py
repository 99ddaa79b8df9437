"""One session-scoped ``local[2]`` SparkSession per test run (a JVM start costs seconds).

The environment Spark needs is set here too, so ``pytest integration`` works without ``make``:
the Python workers run this interpreter and everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from commit_protocol.client_cache import ENV_TIMEOUT
from demo.spark_session import local_session

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
# The JVMs of a test run are short-lived (a killed driver lives for one micro-batch): C1 alone
# compiles in time, C2 would spend one of the 2 cores on code that never runs long. Measured on
# a fresh driver (another job on the second core): session 12 s -> 8 s, its first query of four
# micro-batches 40 s -> 34 s. Tests only; inherited by the drivers the tests spawn
# (spark-submit reads SPARK_SUBMIT_OPTS).
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")
# The session's Python workers outlive each test's `txnlog serve`: the Kafka clients they keep
# for later tasks must end soon after (commit_protocol.client_cache), or they reconnect to the
# dead port for the rest of the run, and once the JVM opened a new worker's socket on that very
# port ("Python worker failed to connect back": the stale client's ApiVersions request failed
# the worker's handshake). Unused for 2 s is gone 3 s later at most.
os.environ.setdefault(ENV_TIMEOUT, "2")


# local[2,3]: two cores like local[2], and up to 3 attempts per task so that task-retry tests
# (TESTING scenario 10b) run in the same session; plain local[2] never retries a task.
MASTER = "local[2,3]"


def build_session(master: str = MASTER):  # type: ignore[no-untyped-def]
    return local_session("txnlog-tests", master)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``: ``-n 2 --dist loadgroup``) every test of this
    directory runs on one worker, in order: the run still starts one SparkSession, and the
    suites that start Spark drivers of their own do not compete with each other for the
    two cores; the other worker takes the unit, process and wire tests."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("integration"))


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The run's only SparkSession, stopped when the run ends."""
    session = build_session()
    yield session
    session.stop()
