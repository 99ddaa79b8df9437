"""The sink's options, parsed and validated on the driver into one frozen ``SinkOptions``.

    path                        the log directory (``.save(path)`` / ``.start(path)`` set it):
                                a local path or a file: URI, made absolute
                                (``datasource_options``, shared with the source)
    kafka.bootstrap.servers     instead of ``path``: write to a Kafka cluster (the Kafka
                                backend, ``commit_protocol.kafka_backend``); every other
                                ``kafka.<name>`` goes to librdkafka as ``<name>``, except those
                                the sink decides itself (``REFUSED_KAFKA``), each refused
                                naming the option to use instead
    topic                       the topic to write; overrides a ``topic`` column (as Spark's
                                Kafka sink); required unless the input has a ``topic`` column
    transactional.id.prefix     tasks use ``<prefix>-<task partition id>``; default
                                ``txnlog-<query id>`` (stable across restarts from the same
                                checkpoint), ``txnlog-<write id>`` for a ``df.write``
    transaction.timeout.ms      1 .. 900000 (the coordinator's maximum; the default): a task's
                                transaction lives from its first write to the driver's commit
                                (Kafka mode: to the end of its task, which commits it)
    group.id                    group under which the consumed source offsets are committed
                                (default ``txnlog-<query id>``)
    compression.type            none (default), gzip, snappy, lz4, zstd
    batch.size                  target bytes of one record batch (default 1000000; capped by
                                the topic's max.message.bytes)
    buffer.memory               bytes a task may buffer over all partitions (default 33554432);
                                with batch.size it bounds a task's memory whatever the size of
                                the micro-batch (there is no linger: batches leave when full)
    createTopic                 true: create a missing log directory and topic (default false);
                                in Kafka mode the topic, by CreateTopics through the AdminClient
    createTopic.partitions      partitions of a topic created that way (default 1)

Every option keeps its meaning in Kafka mode: the transactional id, timeout, compression and
``batch.size`` go to each task's producer (``buffer.memory`` as queue.buffering.max.kbytes,
rounded down to KiB); ``group.id`` receives the consumed source offsets after each batch.

Keys are case-insensitive (Spark lowercases them); unknown keys are refused, naming the valid
ones. Every error is a ``ConfigError`` naming the option, the value and what would be valid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from commit_protocol.batch_commit import SinkIdentity, TaskSettings
from commit_protocol.naming import default_group_id, default_prefix, validate_prefix
from datasource_options.location import KafkaCluster, Location, parse_location
from datasource_options.parsing import normalize_options
from txn_log.coordinator.transaction_metadata import DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
from txn_log.errors import ConfigError, UnsupportedCompressionTypeError
from txn_log.group.group_offsets_format import validate_group_id
from txn_log.record.batch_header import Compression
from txn_log.topic_config import validate_topic_name

DEFAULT_BATCH_SIZE = 1_000_000
DEFAULT_BUFFER_MEMORY = 32 * 1024 * 1024
MAX_BYTES = 1 << 31
KNOWN_OPTIONS = (
    "path",
    "checkpointLocation",  # set by Spark for a stream
    "batch.size",
    "buffer.memory",
    "compression.type",
    "createTopic",
    "createTopic.partitions",
    "group.id",
    "topic",
    "transaction.timeout.ms",
    "transactional.id.prefix",
)
PATH_USAGE = (
    '.save("/data/log"), .start("/data/log") or .option("path", "/data/log"), or '
    '.option("kafka.bootstrap.servers", "host:port") for a Kafka cluster'
)
REFUSED_KAFKA = {
    "kafka.key.serializer": "the sink writes the 'key' column's bytes as they are",
    "kafka.value.serializer": "the sink writes the 'value' column's bytes as they are",
    "kafka.transactional.id": (
        "each task uses <prefix>-<task partition id>; set transactional.id.prefix"
    ),
    "kafka.enable.idempotence": "the sink's producers are always idempotent",
    "kafka.acks": "the sink's producers always use acks=all",
    "kafka.transaction.timeout.ms": "use the sink option transaction.timeout.ms",
    "kafka.compression.type": "use the sink option compression.type",
    "kafka.compression.codec": "use the sink option compression.type",
    "kafka.batch.size": "use the sink option batch.size",
    "kafka.queue.buffering.max.kbytes": "use the sink option buffer.memory",
    "kafka.buffer.memory": "use the sink option buffer.memory",
    "kafka.group.id": "use the sink option group.id",
    "kafka.isolation.level": "the sink reads its ledger read_committed",
    "kafka.enable.auto.commit": "the sink commits the consumed offsets itself",
}
"""``kafka.*`` options the sink decides itself, refused with what to use instead (as Spark's
Kafka sink refuses its serializers)."""


@dataclass(frozen=True)
class SinkOptions:
    """Validated sink options (see the module doc); picklable, shipped to every task.

    ``location`` is the log directory (absolute) or the Kafka cluster."""

    location: Location
    topic: str | None = None
    transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
    group_id: str | None = None
    compression_type: str = "none"
    batch_size: int = DEFAULT_BATCH_SIZE
    buffer_memory: int = DEFAULT_BUFFER_MEMORY
    create_topic: bool = False
    create_topic_partitions: int = 1
    checkpoint_location: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Validate Spark's options dict (raises ConfigError before anything is written)."""
        given = normalize_options(options, KNOWN_OPTIONS, role="sink", prefix="kafka.")
        return cls(
            location=parse_location(given, usage=PATH_USAGE, refused=REFUSED_KAFKA),
            topic=_optional(given, "topic", validate_topic_name),
            transactional_id_prefix=_optional(given, "transactional.id.prefix", validate_prefix),
            transaction_timeout_ms=_int(
                given,
                "transaction.timeout.ms",
                DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
                1,
                DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
            ),
            group_id=_optional(given, "group.id", validate_group_id),
            compression_type=_compression(given.get("compression.type", "none")),
            batch_size=_int(given, "batch.size", DEFAULT_BATCH_SIZE, 1, MAX_BYTES),
            buffer_memory=_int(given, "buffer.memory", DEFAULT_BUFFER_MEMORY, 1, MAX_BYTES),
            create_topic=_bool(given, "createTopic"),
            create_topic_partitions=_int(given, "createTopic.partitions", 1, 1, 10_000),
            checkpoint_location=given.get("checkpointLocation") or None,
        )

    @property
    def cluster(self) -> KafkaCluster | None:
        """The Kafka cluster written to, or None for a log directory."""
        return self.location if isinstance(self.location, KafkaCluster) else None

    @property
    def path(self) -> str:
        """The log directory; ConfigError in Kafka mode, where there is none."""
        if isinstance(self.location, KafkaCluster):
            raise ConfigError(f"the sink writes to {self.location.describe()}, not a directory")
        return self.location

    def describe_location(self) -> str:
        """Where the sink writes, for messages: the directory or the cluster."""
        return self.location.describe() if isinstance(self.location, KafkaCluster) else self.path

    def identity(self, sink_id: str, run_id: str, ledger_since: int = 0) -> SinkIdentity:
        """Who commits for run ``run_id`` (a query id or a batch write's id)."""
        return SinkIdentity(
            sink_id,
            self.transactional_id_prefix or default_prefix(run_id),
            self.group_id or default_group_id(run_id),
            ledger_since,
        )

    @property
    def task_settings(self) -> TaskSettings:
        return TaskSettings(
            self.transaction_timeout_ms, self.compression_type, self.batch_size, self.buffer_memory
        )


def _optional(given: Mapping[str, str], key: str, validate: Callable[[object], str]) -> str | None:
    value = given.get(key)
    if value is None:
        return None
    try:
        return validate(value)
    except ConfigError as error:
        raise ConfigError(f"option {key!r}: {error}") from None


def _int(given: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    raw = given.get(key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"option {key!r} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"option {key!r} must be from {low} to {high}, got {value}")
    return value


def _bool(given: Mapping[str, str], key: str) -> bool:
    raw = str(given.get(key, "false")).strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"option {key!r} must be true or false, got {given.get(key)!r}")
    return raw == "true"


def _compression(raw: str) -> str:
    try:
        return Compression.parse(raw).name.lower()
    except UnsupportedCompressionTypeError:
        names = ", ".join(c.name.lower() for c in Compression)
        raise ConfigError(
            f"option 'compression.type' must be one of {names}, got {raw!r}"
        ) from None
