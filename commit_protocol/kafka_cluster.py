"""A Kafka cluster as the ``kafka`` backend's clients see it: the user's settings
(``ClusterSettings``), the transactional producer's configuration, a producer fenced in, and
librdkafka's errors as the project's typed errors (DESIGN §5).

Below the backend (``kafka_backend``), its task transactions (``kafka_task``) and its ledger
(``kafka_ledger``), which all build their clients here. Pure functions apart from
``fenced_producer``, which talks to the cluster; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer

from txn_log.errors import (
    ConfigError,
    InvalidTxnStateError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortableError,
    TxnLogError,
)


class ClusterSettings(Hashable, Protocol):
    """A Kafka cluster and the user's client settings: ``datasource_options.location``'s
    ``KafkaCluster`` (the commit protocol sits below the options and does not import them)."""

    def client_config(self, **overrides: str | int | bool) -> dict[str, str | int | bool]: ...

    def describe(self) -> str: ...


FENCED_CODES = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
    }
)
"""librdkafka's codes for "a newer instance of the transactional id took over"."""


def producer_config(
    cluster: ClusterSettings,
    transactional_id: str,
    timeout_ms: int,
    compression: str,
    batch_size: int,
    buffer_memory: int,
) -> dict[str, Any]:
    """The transactional producer's settings: the user's ``kafka.*`` ones, then the sink's."""
    return cluster.client_config(
        transactional_id=transactional_id,
        enable_idempotence=True,
        acks="all",
        transaction_timeout_ms=timeout_ms,
        compression_type=compression,
        batch_size=min(batch_size, 1_000_000_000 - 1024),
        message_max_bytes=min(max(batch_size + 1024, 1_048_588), 1_000_000_000),
        queue_buffering_max_kbytes=max(1, min(buffer_memory // 1024, 2_147_483_647)),
        allow_auto_create_topics=False,  # topics exist (or createTopic made them) first
    )


def fenced_producer(config: dict[str, Any], timeout_s: float, known_topic: str) -> Producer:
    """A transactional producer that owns its id: ``init_transactions()`` fenced every
    earlier instance (aborting its open transaction, C-24). The cluster's metadata is fetched
    first (for ``known_topic`` only): librdkafka otherwise may look the transaction
    coordinator up on the bootstrap connection just as it swaps it for the broker's own and
    lose the answer, retrying 500 ms later (measured against ``txnlog serve``: about one
    producer in two)."""
    producer = Producer(config)
    producer.list_topics(known_topic, timeout=timeout_s)
    producer.init_transactions(timeout_s)
    return producer


def client_error(error: KafkaException, doing: str) -> TxnLogError:
    """The project's typed error for a librdkafka error while ``doing`` something."""
    kafka_error = error.args[0]
    message = f"{doing}: {kafka_error}"
    if not isinstance(kafka_error, KafkaError):
        return InvalidTxnStateError(message)
    if kafka_error.code() in FENCED_CODES:
        return ProducerFencedError(f"{message}; a newer attempt took over the transactional id")
    if kafka_error.txn_requires_abort():
        return TransactionAbortableError(f"{message}; the transaction can only abort")
    if kafka_error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
        return RecordTooLargeError(message)
    return InvalidTxnStateError(message)


def admin_error(error: KafkaException, doing: str) -> ConfigError:
    """A failed admin or metadata request while ``doing`` something, with librdkafka's
    message (authorization, an invalid topic config, an unreachable cluster)."""
    return ConfigError(f"{doing} on the Kafka cluster failed: {error.args[0]}")
