"""The Kafka clients a process keeps for later tasks end once unused
(``commit_protocol.client_cache``): a Spark Python worker outlives the queries and clusters it
served, and a kept client of a cluster that went away reconnects to its address for ever (in
the CI run that failed, such a reconnect landed on the port the JVM had opened for a new Python
worker: "Python worker failed to connect back", Authentication failed).

Each test runs the caching in a process of its own, as a reused Python worker would, against
a real ``txnlog serve``, and counts librdkafka's threads (named ``rdk:...``) in that process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from commit_protocol.client_cache import ENV_TIMEOUT
from tests.txn_source.kafka_served import serving_a_new_log
from tests.txn_wire.serve_process import ServeProcess

ROOT = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path

    from commit_protocol.kafka_backend import KafkaBackend
    from datasource_options.location import KafkaCluster
    from txn_log.consumer.read_committed import IsolationLevel
    from txn_source import kafka_clients

    def rdkafka_threads():
        tasks = Path("/proc/self/task").iterdir()
        return sum(1 for t in tasks if (t / "comm").read_text().startswith("rdk:"))

    cluster = KafkaCluster.at(sys.argv[1])
    level = IsolationLevel.READ_COMMITTED
    # what one read task and one write task leave behind: an idle consumer, the source's
    # AdminClient, and a backend with its AdminClient, ledger reader and driver producer
    consumer = kafka_clients.take_consumer(cluster, level)
    consumer.list_topics(timeout=10)
    kafka_clients.give_back(cluster, level, consumer)
    kafka_clients.admin_for(cluster).list_topics(timeout=10)
    backend = KafkaBackend.open(cluster)
    backend.record_batch("s", 0, [], None, [], driver_transactional_id="s-driver")
    del consumer, backend
    print("kept", rdkafka_threads(), flush=True)
    time.sleep(float(sys.argv[2]))
    print("after", rdkafka_threads(), flush=True)
    # a later task still gets working clients
    backend = KafkaBackend.open(cluster)
    print("batch", backend.last_committed_batch("s"), flush=True)
    """
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serving_a_new_log(tmp_path_factory, "client-cache") as server:
        yield server


def run_worker(served: ServeProcess, timeout: str | None, sleep_s: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_TIMEOUT}
    if timeout is not None:
        env[ENV_TIMEOUT] = timeout
    done = subprocess.run(
        [sys.executable, "-c", WORKER, served.bootstrap, str(sleep_s)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return dict(line.split(" ", 1) for line in done.stdout.splitlines())


def test_clients_unused_for_the_timeout_are_closed_and_a_later_task_opens_new_ones(
    served: ServeProcess,
) -> None:
    said = run_worker(served, "1", 4.0)
    assert int(said["kept"]) > 0
    assert int(said["after"]) == 0
    assert said["batch"] == "0"


def test_clients_used_within_the_timeout_are_kept(served: ServeProcess) -> None:
    """The default (Spark's ``spark.kafka.consumer.cache.timeout``, 5 min) keeps them."""
    said = run_worker(served, None, 2.0)
    assert int(said["after"]) == int(said["kept"]) > 0


@pytest.mark.parametrize("value", ["0", "-5", "soon", "inf", "nan"])
def test_a_bad_timeout_is_refused_naming_the_variable(served: ServeProcess, value: str) -> None:
    env = {**os.environ, ENV_TIMEOUT: value}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, served.bootstrap, "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "ConfigError" in done.stderr
    assert f"{ENV_TIMEOUT}={value!r}" in done.stderr
    assert "positive number of seconds" in done.stderr
