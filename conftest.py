"""Fixtures for every test directory (tests/ and integration/)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from commit_protocol.kafka_backend import KafkaBackend
from txn_source import kafka_clients


@pytest.fixture(autouse=True, scope="module")
def _close_cached_kafka_backends() -> Iterator[None]:
    """A module's ``txnlog serve`` stops with it: drop the Kafka backends its tests opened
    and the source's idle clients (cached per process), whose clients would otherwise keep
    reconnecting to a dead port (the Spark workers' caches end by their own timeout:
    integration/conftest.py). Then the garbage collector: a client a test left in a reference
    cycle (an exception's traceback, a callback pointing back at its owner) would otherwise
    live, and reconnect, until Python's next full collection, minutes later (measured: five
    transactional producers of test_backend_contract.py, four attempts a second for six
    minutes)."""
    yield
    KafkaBackend.close_all()
    kafka_clients.close_idle()
    gc.collect()
