"""A wrong ``kafka.bootstrap.servers`` fails when the options are parsed, on the driver, in one
line naming the address (issue 26 item 6: it used to hang for the clients' 60 s timeouts and
print 2,301 lines of librdkafka's connection errors before the query failed)."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

import commit_protocol.kafka_cluster as kafka_cluster
import txn_sink.writer as sink_writer
from commit_protocol.kafka_cluster import REACHABLE_TIMEOUT_S, check_reachable
from datasource_options.location import KafkaCluster
from tests.txn_source.kafka_served import served  # noqa: F401  (a module-scoped fixture)
from tests.txn_wire.serve_process import ServeProcess
from txn_log.errors import ConfigError
from txn_sink.writer import TxnLogStreamWriter
from txn_source.schema import source_schema


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_wrong_address_fails_within_seconds_in_one_line_naming_it(
    capfd: pytest.CaptureFixture[str],
) -> None:
    address = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(ConfigError) as raised:
        check_reachable(KafkaCluster.at(address))
    elapsed = time.monotonic() - started
    message = str(raised.value)
    assert "\n" not in message and f"cannot reach Kafka cluster {address}" in message
    assert "Connection refused" in message  # librdkafka's reason, kept
    assert "(every address is down)" in message  # refused at once, not at the timeout
    assert elapsed < REACHABLE_TIMEOUT_S + 20  # generous: the timing is the benchmark's
    captured = capfd.readouterr()
    # no connection-error flood about this address (clients other tests of this process left
    # behind may still log about theirs)
    flood = [line for line in (captured.err + captured.out).splitlines() if address in line]
    assert flood == [], flood[:3]


def test_a_reachable_cluster_passes(served: ServeProcess) -> None:  # noqa: F811
    check_reachable(KafkaCluster.at(served.bootstrap))


def test_a_cluster_that_answered_is_not_asked_again_by_this_process(
    served: ServeProcess,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sink's writer is built twice per micro-batch; one new client per process and
    cluster is enough. A cluster that did not answer is asked each time."""
    asked: list[str] = []
    ask = kafka_cluster._ask

    def counted(cluster: Any, timeout_s: float) -> None:
        asked.append(cluster.bootstrap_servers)
        ask(cluster, timeout_s)

    monkeypatch.setattr(kafka_cluster, "_ask", counted)
    monkeypatch.setattr(kafka_cluster, "_REACHED", set())
    for _ in range(3):
        check_reachable(KafkaCluster.at(served.bootstrap))
    assert asked == [served.bootstrap]
    nowhere = f"127.0.0.1:{closed_port()}"
    for _ in range(2):
        with pytest.raises(ConfigError, match="cannot reach"):
            check_reachable(KafkaCluster.at(nowhere))
    assert asked == [served.bootstrap, nowhere, nowhere]


def test_the_source_and_the_sink_check_the_cluster_when_they_parse_their_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``load()`` (the source's ``schema()``) and the sink's writer, both on the driver, ask
    before any other client of the cluster is built."""
    asked: list[str] = []

    def refuse(cluster: Any) -> None:
        asked.append(cluster.bootstrap_servers)
        raise ConfigError(f"cannot reach {cluster.describe()}")

    monkeypatch.setattr(kafka_cluster, "check_reachable", refuse)
    monkeypatch.setattr(sink_writer, "check_reachable", refuse)
    kafka = {"kafka.bootstrap.servers": "nowhere:9092"}
    with pytest.raises(ConfigError, match="cannot reach Kafka cluster nowhere:9092"):
        source_schema({**kafka, "subscribe": "orders"})
    with pytest.raises(ConfigError, match="cannot reach Kafka cluster nowhere:9092"):
        TxnLogStreamWriter({**kafka, "topic": "out"}, source_schema_free(), False)
    assert asked == ["nowhere:9092", "nowhere:9092"]


def source_schema_free() -> Any:
    from pyspark.sql.types import BinaryType, StructField, StructType

    return StructType([StructField("value", BinaryType())])
