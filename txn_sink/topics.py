"""Making sure the topics the sink writes exist (or creating them with ``createTopic``), and
picking the backend: a txnlog directory (``EmbeddedBackend``) or a Kafka cluster
(``KafkaBackend``, imported only in Kafka mode)."""

from __future__ import annotations

from commit_protocol.backend import LogBackend
from commit_protocol.embedded import EmbeddedBackend
from txn_log.errors import UnknownTopicOrPartitionError
from txn_log.topic_config import validate_topic_name
from txn_sink.options import SinkOptions


def open_backend(options: SinkOptions) -> LogBackend:
    """The log at ``options.path`` (created only with ``createTopic=true``), or the Kafka
    cluster of ``kafka.bootstrap.servers``."""
    cluster = options.cluster
    if cluster is not None:
        from commit_protocol.kafka_backend import KafkaBackend

        return KafkaBackend.open(cluster)
    return EmbeddedBackend.open(options.path, create=options.create_topic)


def ensure_topic(backend: LogBackend, options: SinkOptions, topic: str) -> None:
    """Raise UnknownTopicOrPartitionError (saying how to create it) if ``topic`` is missing,
    unless ``createTopic`` is set: then create it with ``createTopic.partitions``."""
    validate_topic_name(topic)
    if backend.topic_exists(topic):
        return
    if options.create_topic:
        backend.create_topic(topic, options.create_topic_partitions)
        return
    if options.cluster is not None:
        how = "create it on the cluster (e.g. with kafka-topics.sh or an AdminClient)"
    else:
        how = f"create it with `txnlog topics create {options.path} {topic} --partitions <n>`"
    raise UnknownTopicOrPartitionError(
        f"topic {topic!r} does not exist in {options.describe_location()}; {how}, or set the "
        "options createTopic=true and createTopic.partitions=<n>"
    )
