"""Fixtures for every test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from commit_protocol.kafka_backend import KafkaBackend
from txn_source import kafka_clients


@pytest.fixture(autouse=True, scope="module")
def _close_cached_kafka_backends() -> Iterator[None]:
    """A module's ``txnlog serve`` stops with it: drop the Kafka backends its tests opened
    and the source's idle clients (cached per process), whose clients would otherwise keep
    reconnecting to a dead port."""
    yield
    KafkaBackend.close_all()
    kafka_clients.close_idle()
