"""Making sure the topics the sink writes exist (or creating them with ``createTopic``)."""

from __future__ import annotations

from commit_protocol.backend import LogBackend
from commit_protocol.embedded import EmbeddedBackend
from txn_log.errors import UnknownTopicOrPartitionError
from txn_log.topic_config import validate_topic_name
from txn_sink.options import SinkOptions


def open_backend(options: SinkOptions) -> LogBackend:
    """The log at ``options.path``; created only with ``createTopic=true``."""
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
    raise UnknownTopicOrPartitionError(
        f"topic {topic!r} does not exist in {options.path}; create it with "
        f"`txnlog topics create {options.path} {topic} --partitions <n>`, or set the options "
        "createTopic=true and createTopic.partitions=<n>"
    )
