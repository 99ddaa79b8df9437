"""What every handler works on: the open log, the server's settings, and Kafka error codes.

A ``Broker`` is the server's view of one log directory. It is one more peer of the directory
(DESIGN §3): Spark jobs, engine users and the CLI append to the same files at the same time;
every read here catches up on their appends, and every write takes the same partition and
coordinator locks they take. Thread-safe: handlers run on worker threads (the engine is).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from txn_log import Log, TopicPartition
from txn_log.consumer.consumer import Consumer
from txn_log.consumer.read_committed import IsolationLevel
from txn_log.errors import (
    InvalidProducerEpochError,
    ProducerFencedError,
    StorageError,
    TxnLogError,
    UnknownTopicOrPartitionError,
)
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.partition_reader import PartitionReader

logger = logging.getLogger(__name__)

NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
KAFKA_STORAGE_ERROR = 56
OPERATION_NOT_ATTEMPTED = 55
INVALID_TXN_STATE = 48
INVALID_PRODUCER_EPOCH = 47
PRODUCER_FENCED = 90
BROKER_ID = 0
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
DEFAULT_SASL_MAX_RECEIVE_SIZE = 512 * 1024  # Kafka's sasl.server.max.receive.size
DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS = 6_000  # Kafka's group.min.session.timeout.ms
DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS = 1_800_000  # Kafka's group.max.session.timeout.ms
DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS = 3_000  # Kafka's group.initial.rebalance.delay.ms

# KIP-588: PRODUCER_FENCED (90) only for these request versions and above; older clients
# get INVALID_PRODUCER_EPOCH (47), as Kafka answers them.
_PRODUCER_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 3}


@dataclass(frozen=True)
class ServeConfig:
    """Settings of ``txnlog serve``.

    ``auto_create_topics``: Metadata and Produce create an unknown topic with
    ``default_partitions`` partitions (Kafka's auto.create.topics.enable; off by default).
    ``max_request_bytes``: frames larger than this are refused unread
    (socket.request.max.bytes). ``fetch_poll_interval_ms``: how often a long-polling fetch
    looks at the partitions' ends again (other processes append without telling us).
    ``sasl_max_receive_size``: the same as ``max_request_bytes`` before a connection has
    authenticated (sasl.server.max.receive.size; with SASL users only: without them every
    connection is authenticated from the start). ``group_min_session_timeout_ms`` /
    ``group_max_session_timeout_ms``: the session timeouts a JoinGroup may ask for
    (group.min/max.session.timeout.ms; INVALID_SESSION_TIMEOUT outside them): a member that
    could name a 1 ms timeout would make the group rebalance at every heartbeat, one that
    names days would hold its partitions that long after it died.
    ``group_initial_rebalance_delay_ms``: how long an empty group's first join round waits for
    more members (group.initial.rebalance.delay.ms): without it the first member to arrive
    forms a generation alone and the next, a moment later, takes partitions from it.
    """

    auto_create_topics: bool = False
    default_partitions: int = 1
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    sasl_max_receive_size: int = DEFAULT_SASL_MAX_RECEIVE_SIZE
    group_min_session_timeout_ms: int = DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS
    group_max_session_timeout_ms: int = DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS
    group_initial_rebalance_delay_ms: int = DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS
    fetch_poll_interval_ms: int = 10


class Broker:
    """The log and settings a server answers from."""

    def __init__(self, log: Log, config: ServeConfig) -> None:
        self.log = log
        self.config = config
        self._consumers = {
            True: log.consumer(IsolationLevel.READ_COMMITTED),
            False: log.consumer(IsolationLevel.READ_UNCOMMITTED),
        }

    def ensure_topic(self, topic: str, may_create: Callable[[str], bool] | None = None) -> bool:
        """Whether ``topic`` exists, creating it when auto-creation is on and ``may_create``
        (the principal's Create permission; None: allowed) allows it."""
        if topic in self.log.topics(include_internal=True):
            return True
        if not self.config.auto_create_topics or (may_create is not None and not may_create(topic)):
            return False
        try:
            self.log.create_topic(topic, self.config.default_partitions)
        except TxnLogError as error:
            if topic not in self.log.topics(include_internal=True):  # not a racing creator
                logger.info("auto-creating topic %r failed: %s", topic, error)
                return False
        return True

    def partition_log(
        self, tp: TopicPartition, may_create: Callable[[str], bool] | None = None
    ) -> PartitionLog:
        """The partition to append to; UnknownTopicOrPartitionError unless it exists (or was
        auto-created, which ``may_create`` must allow: ``ensure_topic``)."""
        try:
            return self.log.partition_log(tp)
        except UnknownTopicOrPartitionError:
            if not self.config.auto_create_topics or not self.ensure_topic(tp.topic, may_create):
                raise
        return self.log.partition_log(tp)

    def partition_reader(self, tp: TopicPartition) -> PartitionReader:
        return self.log.partition_reader(tp)

    def consumer(self, read_committed: bool) -> Consumer:
        """The engine's reader at an isolation level: its ``read_plan`` decides where a read
        ends and which aborted transactions it carries (Fetch, ListOffsets)."""
        return self._consumers[read_committed]


def topic_partition(topic: str, partition: int) -> TopicPartition:
    """The partition a request names; UnknownTopicOrPartitionError for a negative index, as
    Kafka answers one (``TopicPartition`` itself refuses it with a ConfigError)."""
    if partition < 0:
        raise UnknownTopicOrPartitionError(
            f"partition {partition} of topic {topic!r} does not exist (partitions are >= 0)"
        )
    return TopicPartition(topic, partition)


def error_code(error: BaseException, api_key: int = -1, api_version: int = 0) -> int:
    """Kafka's error code for an engine error (the engine's errors carry Kafka's codes).

    Fencing follows KIP-588: PRODUCER_FENCED only for request versions that know it, else
    INVALID_PRODUCER_EPOCH. Anything without a Kafka code is UNKNOWN_SERVER_ERROR, logged.
    """
    if isinstance(error, (ProducerFencedError, InvalidProducerEpochError)):
        since = _PRODUCER_FENCED_SINCE.get(api_key)
        if isinstance(error, ProducerFencedError) and since is not None and api_version >= since:
            return PRODUCER_FENCED
        return INVALID_PRODUCER_EPOCH
    if isinstance(error, StorageError):
        return KAFKA_STORAGE_ERROR
    if isinstance(error, TxnLogError) and error.code is not None:
        return error.code
    logger.warning("answering UNKNOWN_SERVER_ERROR for %s: %s", type(error).__name__, error)
    return UNKNOWN_SERVER_ERROR
