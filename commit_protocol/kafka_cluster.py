"""A Kafka cluster as the ``kafka`` backend's clients see it: the user's settings
(``ClusterSettings``), the transactional producer's configuration, a producer fenced in, and
librdkafka's errors as the project's typed errors (DESIGN §5).

Below the backend (``kafka_backend``), its task transactions (``kafka_task``) and its ledger
(``kafka_ledger``), which all build their clients here. Pure functions apart from
``fenced_producer``, which talks to the cluster; safe from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

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
    first (for ``known_topic`` only), twice: librdkafka (since 2.10) drops the bootstrap
    connection once the first answer names the cluster's brokers, and an
    ``init_transactions`` that looks the transaction coordinator up before the broker's own
    connection is up finds no broker to ask and asks again 500 ms later (a fixed timer). The
    first fetch is answered on the bootstrap connection (without it, about one producer in
    two waited those 500 ms against ``txnlog serve``); the second one only once a broker's own
    connection is up, and costs one round trip then (with one fetch, 9 producers in 100 still
    waited; with two, none in 100)."""
    producer = Producer(config)
    producer.list_topics(known_topic, timeout=timeout_s)
    producer.list_topics(known_topic, timeout=timeout_s)  # a broker's own connection is up
    producer.init_transactions(timeout_s)
    return producer


REACHABLE_TIMEOUT_S = 8.0
"""How long the driver waits for a first answer from ``kafka.bootstrap.servers`` before it
refuses the options (issue 26 item 6: without it a wrong address hung for the clients' 60 s
timeouts and librdkafka printed every failed connection attempt, 2,301 lines)."""


class _LastMessage(logging.Handler):
    """Keeps librdkafka's latest log message (the reason a connection failed) and prints
    nothing: the caller reports it in one line."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


def check_reachable(cluster: ClusterSettings, timeout_s: float = REACHABLE_TIMEOUT_S) -> None:
    """Raise ConfigError, in one line naming the address, unless the cluster answers a
    metadata request within ``timeout_s`` (with the user's own ``kafka.*`` settings, so a
    wrong security setting is reported here too). As soon as librdkafka finds every bootstrap
    address down (a refused connection, a name that does not resolve) it refuses at once
    rather than at the timeout. Called on the driver when the options are parsed, before any
    other client of the cluster is built. A cluster that answered once is not asked again in
    this process: Spark builds the sink's writer anew for every micro-batch, twice, and each
    check is a new client, whose first request costs a connection setup (about 15-55 ms);
    an outage after that fails the clients that meet it, as one mid-query would anyway."""
    with _REACHED_LOCK:
        if cluster in _REACHED:
            return
    _ask(cluster, timeout_s)
    with _REACHED_LOCK:
        _REACHED.add(cluster)


_REACHED: set[ClusterSettings] = set()
_REACHED_LOCK = threading.Lock()


def _ask(cluster: ClusterSettings, timeout_s: float) -> None:
    """``check_reachable``'s question, asked with a new AdminClient."""
    handler = _LastMessage()
    logger = logging.Logger(f"txnlog.kafka.reachable.{id(handler)}")  # not in the registry
    logger.addHandler(handler)
    down: list[KafkaError] = []
    config: dict[str, Any] = cluster.client_config(allow_auto_create_topics=False)
    config["logger"] = logger
    config["error_cb"] = lambda error: down.append(error) if error.code() in _DOWN else None
    try:
        admin = AdminClient(config)
    except KafkaException as error:
        raise ConfigError(
            f"the kafka.* options for {cluster.describe()} are not valid: {error.args[0].str()}"
        ) from None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=min(_STEP_S, max(deadline - time.monotonic(), 0.01)))
            return
        except KafkaException as error:
            admin.poll(0)  # hands librdkafka's queued log messages and errors to their callbacks
            if not down and time.monotonic() < deadline:
                continue
            # "FAIL [rdkafka#producer-1] [thrd:host:port/bootstrap]: host:port/bootstrap: why"
            reason = handler.last.split("]: ", 1)[-1] if handler.last else str(error.args[0])
            waited = f"within {timeout_s:g} s" if not down else "(every address is down)"
            raise ConfigError(
                f"cannot reach {cluster.describe()} (option kafka.bootstrap.servers) {waited}: "
                f"{reason}"
            ) from None


_DOWN = frozenset({KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE})
_STEP_S = 0.25


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
