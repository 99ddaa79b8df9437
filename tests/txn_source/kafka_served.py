"""Fixtures for the source's Kafka-mode tests: one ``txnlog serve`` process per test module over
a log directory the tests write with the engine's producers (real files, a real server
process, confluent-kafka clients). Each test works on its own topic."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from datasource_options.location import KafkaCluster
from tests.txn_wire.serve_process import ServeProcess, start_serve
from txn_log.log import Log


@contextmanager
def serving_a_new_log(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    start: Callable[[Path], ServeProcess] = start_serve,
) -> Iterator[ServeProcess]:
    """A server (``start``: ``txnlog serve`` by default) over a new empty log, stopped by its
    pid when the block ends."""
    path = tmp_path_factory.mktemp(name) / "log"
    Log.open(path).close()
    server = start(path)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serving_a_new_log(tmp_path_factory, "served") as server:
        yield server


@pytest.fixture
def log(served: ServeProcess) -> Iterator[Log]:
    with Log.open(served.path) as log:
        yield log


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def cluster_of(served: ServeProcess) -> KafkaCluster:
    return KafkaCluster.at(served.bootstrap)


def send(log: Log, topic: str, values: list[bytes], *, txn_id: str = "w", end: str = "commit"):  # type: ignore[no-untyped-def]
    """One transaction of ``values`` to partition 0 of ``topic``; ``end`` is commit, abort or
    open (left open: its producer is returned)."""
    producer = log.producer(txn_id)
    producer.init_transactions()
    producer.begin_transaction()
    for value in values:
        producer.send(topic, value, partition=0)
    producer.flush()
    if end == "commit":
        producer.commit_transaction()
    elif end == "abort":
        producer.abort_transaction()
    return producer
