"""The source's options, parsed once on the driver into a frozen ``SourceOptions``.

Names, defaults and meanings are those of Spark's Kafka source (case-insensitive):

    path / load(path)             the log directory (must already be a txnlog): a local path
                                  or a file: URI, made absolute (``datasource_options``)
    kafka.bootstrap.servers       instead of a path: read a Kafka cluster (Kafka mode, issue
                                  16); every other kafka.<name> option goes to its consumers
                                  (``datasource_options.location``), but those the source
                                  decides itself (``kafka_options.REFUSED_KAFKA_OPTIONS``)
    kafkaConsumer.pollTimeoutMs   Kafka mode: how long an executor waits for its consumer's
                                  position to move before it fails (default 120000, Spark's)
    subscribe                     comma-separated topics           } exactly one of these three
    subscribePattern              a regex matched against topics   }
    assign                        JSON {"topicA":[0,1]}            }
    startingOffsets               earliest | latest | JSON (-2 earliest, -1 latest); default
                                  latest for streams, earliest for batch reads
    startingTimestamp             ms; every partition from its first record at or after it
    startingOffsetsByTimestamp    JSON {"topicA":{"0":1700000000000}}
    startingOffsetsByTimestampStrategy   error (default) | latest
    endingOffsets                 latest | JSON (-1 latest); batch reads only
    endingTimestamp / endingOffsetsByTimestamp   as the starting ones; batch reads only
    maxOffsetsPerTrigger          offsets per micro-batch, split across partitions by lag
    minOffsetsPerTrigger          hold a micro-batch until this many offsets are available...
    maxTriggerDelay               ...or this long has passed (default 15m)
    minPartitions                 split large ranges so a batch has at least this many tasks
    maxRecordsPerPartition        split ranges larger than this
    failOnDataLoss                true (default) | false: deleted offsets fail the query
    isolation.level               read_committed (default) | read_uncommitted
                                  (``kafka.isolation.level`` is accepted too, in both modes)
    includeHeaders                false (default) | true: add the ``headers`` column

Every other option means the same in both modes.

Every error names the option and what would be valid. Unknown options are refused, so a typo
never silently means "use the default" (the rule the sink follows too: ``datasource_options``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from datasource_options.location import KafkaCluster, Location, parse_location
from datasource_options.parsing import normalize_options
from offsets.admission import AdmissionLimit, parse_duration_ms
from offsets.offset_spec import (
    EARLIEST,
    LATEST,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    NoMatchStrategy,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    select_spec,
)
from offsets.partition_offsets import parse_topic_partitions
from txn_log.consumer.read_committed import IsolationLevel
from txn_log.errors import ConfigError, TxnLogError
from txn_log.log import FORMAT_FILE
from txn_log.topic_config import validate_topic_name
from txn_log.topic_partition import TopicPartition
from txn_source.kafka_options import DEFAULT_POLL_TIMEOUT_MS, REFUSED_KAFKA_OPTIONS

STRATEGY_OPTIONS = ("subscribe", "subscribePattern", "assign")
KNOWN_OPTIONS = (
    "path",
    *STRATEGY_OPTIONS,
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "failOnDataLoss",
    "isolation.level",
    "kafka.isolation.level",
    "includeHeaders",
    "kafkaConsumer.pollTimeoutMs",
)
ENDING_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")


@dataclass(frozen=True)
class Subscribe:
    """``subscribe``: these topics, with every partition they have now or get later."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    """``subscribePattern``: every topic whose whole name matches ``pattern``."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    """``assign``: exactly these partitions."""

    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True)
class SourceOptions:
    """Everything the reader needs from its options; built by ``parse_source_options``."""

    location: Location
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    no_match: NoMatchStrategy
    admission: AdmissionLimit
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    isolation_level: IsolationLevel
    include_headers: bool
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS

    @property
    def kafka(self) -> KafkaCluster | None:
        """The cluster read in Kafka mode; None for a log directory."""
        return self.location if isinstance(self.location, KafkaCluster) else None

    @property
    def path(self) -> str:
        """The log directory; ConfigError in Kafka mode, which has none."""
        if isinstance(self.location, KafkaCluster):
            raise ConfigError(f"the source reads {self.location.describe()}, not a log directory")
        return self.location


def parse_source_options(
    options: Mapping[str, str], *, streaming: bool | None = None
) -> SourceOptions:
    """Validate ``options``; ``streaming`` True / False adds the stream-only / batch-only rules
    (None: only the rules both share, as when Spark asks for the schema)."""
    given = normalize_options(options, KNOWN_OPTIONS, role="source", prefix="kafka.")
    location = parse_location(
        given,
        usage=".load(path) or .option('path', ...), or .option('kafka.bootstrap.servers', ...)",
        refused=REFUSED_KAFKA_OPTIONS,
        also_for_path=("kafka.isolation.level",),
    )
    starting = select_spec(
        timestamp=_named(given, "startingTimestamp"),
        by_timestamp=_named(given, "startingOffsetsByTimestamp"),
        offsets=_named(given, "startingOffsets"),
        default=LatestOffsets() if streaming else EarliestOffsets(),
    )
    ending = select_spec(
        timestamp=_named(given, "endingTimestamp"),
        by_timestamp=_named(given, "endingOffsetsByTimestamp"),
        offsets=_named(given, "endingOffsets"),
        default=LatestOffsets(),
    )
    if streaming:
        _check_stream_only(given)
    elif streaming is False:
        _check_batch_offsets(starting, ending)
    return SourceOptions(
        location=location,
        subscription=_subscription(given),
        starting=starting,
        ending=ending,
        no_match=NoMatchStrategy.parse(
            "startingOffsetsByTimestampStrategy",
            given.get("startingOffsetsByTimestampStrategy", "error"),
        ),
        admission=_admission(given),
        min_partitions=_positive_int(given, "minPartitions"),
        max_records_per_partition=_positive_int(given, "maxRecordsPerPartition"),
        fail_on_data_loss=_boolean(given, "failOnDataLoss", default=True),
        isolation_level=_isolation_level(given),
        include_headers=_boolean(given, "includeHeaders", default=False),
        poll_timeout_ms=_poll_timeout_ms(given, kafka_mode=isinstance(location, KafkaCluster)),
    )


def check_location(options: SourceOptions) -> None:
    """``check_log_path`` for a log directory; for a cluster, that it answers within a few
    seconds (``check_reachable``: a wrong address fails ``load()`` in one line, not a query
    after a minute of librdkafka's connection errors)."""
    if options.kafka is None:
        check_log_path(options.path)
        return
    from commit_protocol.kafka_cluster import check_reachable

    check_reachable(options.kafka)


def check_log_path(path: str) -> None:
    """Raise ConfigError unless ``path`` is an existing txnlog directory (a reader never
    creates a log)."""
    root = Path(path)
    if not root.exists():
        raise ConfigError(
            f"option 'path': {path!r} does not exist; the txnlog source reads an existing log "
            f"directory: create one with `txnlog topics create {shlex.quote(path)} <topic>` "
            "(or the txnlog sink, or Log.open in Python)"
        )
    if not (root / FORMAT_FILE).is_file():
        kind = "a file" if not root.is_dir() else f"a directory without {FORMAT_FILE}"
        empty = root.is_dir() and not any(root.iterdir())
        raise ConfigError(
            f"option 'path': {path!r} is not a txnlog directory ({kind}); point at a log directory"
            + (
                f", or create one there with `txnlog topics create {shlex.quote(path)} <topic>`"
                if empty
                else ""
            )
        )


def spec_option_name(spec: OffsetSpec, side: str) -> str:
    """The option that gave ``spec``; ``side`` is "starting" or "ending"."""
    if isinstance(spec, GlobalTimestamp):
        return f"{side}Timestamp"
    if isinstance(spec, SpecificTimestamps):
        return f"{side}OffsetsByTimestamp"
    return f"{side}Offsets"


# --- helpers -------------------------------------------------------------------------------------


def _named(given: Mapping[str, str], name: str) -> tuple[str, str | None]:
    return name, given.get(name)


def _subscription(given: Mapping[str, str]) -> Subscription:
    chosen = [name for name in STRATEGY_OPTIONS if name in given]
    if not chosen:
        raise ConfigError(
            "one of the options subscribe, subscribePattern, assign must be given for the "
            "txnlog source, e.g. .option('subscribe', 'orders')"
        )
    if len(chosen) > 1:
        raise ConfigError(
            "only one of the options subscribe, subscribePattern, assign can be given for the "
            f"txnlog source; got {', '.join(chosen)}"
        )
    name, value = chosen[0], given[chosen[0]]
    if name == "assign":
        if not value.strip().startswith("{"):
            raise ConfigError(
                f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, got {value!r}"
            )
        return Assign(parse_topic_partitions(value, what="option 'assign'"))
    if name == "subscribePattern":
        return SubscribePattern(_pattern(value))
    return Subscribe(_topics(value))


def _topics(value: str) -> tuple[str, ...]:
    topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
    if not topics:
        raise ConfigError(
            f"option 'subscribe': no topics to subscribe to in {value!r}; give a comma-separated "
            "list of topic names"
        )
    for topic in topics:
        try:
            validate_topic_name(topic)
        except TxnLogError as exc:
            raise ConfigError(f"option 'subscribe': {exc}") from None
    return topics


def _pattern(value: str) -> str:
    pattern = value.strip()
    if not pattern:
        raise ConfigError("option 'subscribePattern' is empty; give a regular expression")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"option 'subscribePattern': {pattern!r} is not a valid regular expression ({exc})"
        ) from None
    return pattern


def _check_stream_only(given: Mapping[str, str]) -> None:
    for name in ENDING_OPTIONS:
        if name in given:
            raise ConfigError(
                f"option {name!r} is not valid in streaming queries (a stream never ends); use "
                "it with spark.read, or stop the query with Trigger.AvailableNow"
            )


def _check_batch_offsets(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if isinstance(starting, LatestOffsets):
        raise ConfigError(
            "option 'startingOffsets' can't be latest for batch reads; valid values are "
            "earliest or JSON offsets (-2 = earliest)"
        )
    if isinstance(ending, EarliestOffsets):
        raise ConfigError(
            "option 'endingOffsets' can't be earliest for batch reads; valid values are "
            "latest or JSON offsets (-1 = latest)"
        )
    for name, spec, forbidden, word in (
        ("startingOffsets", starting, LATEST, "latest (-1)"),
        ("endingOffsets", ending, EARLIEST, "earliest (-2)"),
    ):
        if isinstance(spec, SpecificOffsets):
            for tp, offset in spec.offsets.entries:
                if offset == forbidden:
                    raise ConfigError(f"option {name!r}: {tp} can't be {word} for batch reads")


def _admission(given: Mapping[str, str]) -> AdmissionLimit:
    delay = given.get("maxTriggerDelay")
    limit = AdmissionLimit(
        max_rows=_positive_int(given, "maxOffsetsPerTrigger"),
        min_rows=_positive_int(given, "minOffsetsPerTrigger"),
    )
    if delay is None:
        return limit
    return AdmissionLimit(
        limit.max_rows, limit.min_rows, parse_duration_ms("maxTriggerDelay", delay)
    )


def _poll_timeout_ms(given: Mapping[str, str], *, kafka_mode: bool) -> int:
    name = "kafkaConsumer.pollTimeoutMs"
    if name in given and not kafka_mode:
        raise ConfigError(
            f"option {name!r} configures the consumers of Kafka mode (with "
            "'kafka.bootstrap.servers'); a txnlog directory is read from its files, without "
            "polling: remove the option"
        )
    return _positive_int(given, name) or DEFAULT_POLL_TIMEOUT_MS


def _positive_int(given: Mapping[str, str], name: str) -> int | None:
    value = given.get(name)
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(
            f"invalid value {value!r} for option {name!r}; expected a positive integer"
        )
    return number


def _boolean(given: Mapping[str, str], name: str, *, default: bool) -> bool:
    value = given.get(name)
    if value is None:
        return default
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(
            f"invalid value {value!r} for option {name!r}; valid values are true, false"
        )
    return text == "true"


def _isolation_level(given: Mapping[str, str]) -> IsolationLevel:
    values = {
        name: given[name] for name in ("isolation.level", "kafka.isolation.level") if name in given
    }
    if len(set(v.strip().lower() for v in values.values())) > 1:
        raise ConfigError(
            "options 'isolation.level' and 'kafka.isolation.level' disagree; give one of them"
        )
    name, value = next(iter(values.items()), ("isolation.level", "read_committed"))
    try:
        return IsolationLevel.parse(value)
    except TxnLogError:
        raise ConfigError(
            f"invalid value {value!r} for option {name!r}; valid values are read_committed, "
            "read_uncommitted"
        ) from None
