"""The sink in Kafka mode (issue 16 item 1): ``kafka.bootstrap.servers`` instead of a path
picks the Kafka backend; the ``kafka.*`` options the sink decides itself are refused naming the
option to use instead; every sink option keeps its meaning; ``createTopic`` creates the topic
through the AdminClient of a real ``txnlog serve``."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from commit_protocol.kafka_backend import KafkaBackend
from datasource_options.location import KafkaCluster
from tests.txn_wire.serve_process import ServeProcess, start_serve
from txn_log.errors import ConfigError, UnknownTopicOrPartitionError
from txn_log.log import Log
from txn_sink.options import REFUSED_KAFKA, SinkOptions
from txn_sink.topics import ensure_topic, open_backend


def kafka(**extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out", **extra}


def test_bootstrap_servers_selects_a_cluster_with_the_users_client_settings() -> None:
    options = SinkOptions.parse(kafka(**{"kafka.client.id": "etl", "batch.size": "5000"}))
    assert options.cluster == KafkaCluster(
        "127.0.0.1:9092", (("bootstrap.servers", "127.0.0.1:9092"), ("client.id", "etl"))
    )
    assert options.batch_size == 5000
    assert options.describe_location() == "Kafka cluster 127.0.0.1:9092"
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(ConfigError, match="not a directory"):
        _ = options.path


def test_a_path_still_selects_a_directory(tmp_path: Path) -> None:
    options = SinkOptions.parse({"path": str(tmp_path), "topic": "out"})
    assert options.cluster is None
    assert options.path == str(tmp_path.resolve())


@pytest.mark.parametrize("name", sorted(REFUSED_KAFKA))
def test_options_the_sink_decides_are_refused_naming_what_to_use(name: str) -> None:
    with pytest.raises(ConfigError, match=f"option '{name}' is not supported: .+") as raised:
        SinkOptions.parse(kafka(**{name: "x"}))
    assert REFUSED_KAFKA[name] in str(raised.value)


def test_the_refusal_table_covers_spark_kafka_sinks_refusals() -> None:
    """Spark's Kafka sink refuses the serializers; the transactional settings are the sink's."""
    for name in (
        "kafka.key.serializer",
        "kafka.value.serializer",
        "kafka.transactional.id",
        "kafka.enable.idempotence",
        "kafka.acks",
        "kafka.transaction.timeout.ms",
    ):
        assert name in REFUSED_KAFKA
    assert "transactional.id.prefix" in REFUSED_KAFKA["kafka.transactional.id"]
    assert "transaction.timeout.ms" in REFUSED_KAFKA["kafka.transaction.timeout.ms"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    path = tmp_path_factory.mktemp("sinkopts") / "log"
    with Log.open(path) as log:
        log.create_topic("existing", 2)
    server = start_serve(path)
    try:
        yield server
    finally:
        server.stop()


def test_open_backend_picks_the_kafka_backend_and_finds_topics(served: ServeProcess) -> None:
    options = SinkOptions.parse({"kafka.bootstrap.servers": served.bootstrap, "topic": "x"})
    backend = open_backend(options)
    assert isinstance(backend, KafkaBackend)
    assert backend is open_backend(options)  # one per cluster per process
    assert backend.partition_count("existing") == 2
    assert backend.max_batch_bytes("existing") == 1_048_588
    with pytest.raises(UnknownTopicOrPartitionError, match="'nowhere' does not exist"):
        backend.partition_count("nowhere")


def test_create_topic_works_in_kafka_mode(served: ServeProcess) -> None:
    base = {"kafka.bootstrap.servers": served.bootstrap, "topic": "made"}
    refusing = SinkOptions.parse(base)
    backend = open_backend(refusing)
    with pytest.raises(
        UnknownTopicOrPartitionError, match=r"'made' does not exist in Kafka cluster.*createTopic"
    ):
        ensure_topic(backend, refusing, "made")
    creating = SinkOptions.parse({**base, "createTopic": "true", "createTopic.partitions": "4"})
    ensure_topic(backend, creating, "made")
    ensure_topic(backend, creating, "made")  # existing now: not an error
    assert backend.partition_count("made") == 4
    with Log.open(served.path) as log:
        assert len(log.partitions("made")) == 4


def test_looking_a_topic_up_never_creates_it_on_an_auto_creating_cluster(
    tmp_path: Path,
) -> None:
    """Without createTopic a missing topic is an error even where the cluster would create
    topics on Metadata requests (auto.create.topics.enable): the lookups ask it not to."""
    path = tmp_path / "log"
    Log.open(path).close()
    server = start_serve(path, "--auto-create-topics")
    try:
        options = SinkOptions.parse({"kafka.bootstrap.servers": server.bootstrap, "topic": "t"})
        backend = KafkaBackend(options.cluster)  # type: ignore[arg-type]
        with pytest.raises(UnknownTopicOrPartitionError, match="'ghost' does not exist"):
            ensure_topic(backend, options, "ghost")
        assert not backend.topic_exists("ghost")
    finally:
        server.stop()
    with Log.open(path) as log:
        assert log.topics() == []
