"""Source options: Spark's Kafka names and defaults; every bad value fails naming the option and
what is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from datasource_options.location import KafkaCluster
from offsets.offset_spec import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    NoMatchStrategy,
    SpecificOffsets,
)
from txn_log.consumer.read_committed import IsolationLevel
from txn_log.errors import ConfigError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_source.options import (
    Assign,
    Subscribe,
    SubscribePattern,
    check_location,
    check_log_path,
    parse_source_options,
)
from txn_source.schema import kafka_schema, source_schema

BASE = {"path": "/data/log", "subscribe": "orders"}


def parse(streaming: bool | None = None, **extra: str) -> object:
    return parse_source_options({**BASE, **extra}, streaming=streaming)


def test_defaults_are_sparks() -> None:
    stream = parse_source_options(BASE, streaming=True)
    assert stream.subscription == Subscribe(("orders",))
    assert stream.starting == LatestOffsets() and stream.ending == LatestOffsets()
    assert stream.isolation_level is IsolationLevel.READ_COMMITTED
    assert stream.fail_on_data_loss is True and stream.include_headers is False
    assert stream.admission.max_rows is None and stream.admission.min_rows is None
    assert stream.admission.max_trigger_delay_ms == 15 * 60 * 1000
    assert stream.min_partitions is None and stream.max_records_per_partition is None
    assert stream.no_match is NoMatchStrategy.ERROR
    assert parse_source_options(BASE, streaming=False).starting == EarliestOffsets()


def test_names_are_case_insensitive_and_values_parsed() -> None:
    options = parse_source_options(
        {
            "PATH": "/l",
            "SubscribePattern": "ord.*",
            "STARTINGOFFSETS": '{"a": {"0": -2}}',
            "maxoffsetspertrigger": "100",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "5s",
            "minPartitions": "4",
            "maxRecordsPerPartition": "1000",
            "failOnDataLoss": "FALSE",
            "isolation.level": "read_uncommitted",
            "includeHeaders": "true",
            "startingOffsetsByTimestampStrategy": "latest",
        },
        streaming=True,
    )
    assert options.path == "/l"
    assert isinstance(options.subscription, SubscribePattern)
    assert options.subscription.matches("orders") and not options.subscription.matches("xorders")
    assert isinstance(options.starting, SpecificOffsets)
    assert (options.admission.max_rows, options.admission.min_rows) == (100, 10)
    assert options.admission.max_trigger_delay_ms == 5000
    assert (options.min_partitions, options.max_records_per_partition) == (4, 1000)
    assert options.fail_on_data_loss is False and options.include_headers is True
    assert options.isolation_level is IsolationLevel.READ_UNCOMMITTED
    assert options.no_match is NoMatchStrategy.LATEST


def test_subscribe_list_and_assign() -> None:
    assert parse(subscribe=" a, b ,,a").subscription == Subscribe(("a", "b"))  # type: ignore[attr-defined]
    options = parse_source_options({"path": "/l", "assign": '{"t": [1, 0]}'})
    assert options.subscription == Assign((TopicPartition("t", 0), TopicPartition("t", 1)))


def test_kafka_isolation_level_alias() -> None:
    options = parse_source_options({**BASE, "kafka.isolation.level": "read_uncommitted"})
    assert options.isolation_level is IsolationLevel.READ_UNCOMMITTED
    with pytest.raises(ConfigError, match="disagree"):
        parse(**{"kafka.isolation.level": "read_uncommitted", "isolation.level": "read_committed"})


def test_starting_timestamp_takes_precedence() -> None:
    options = parse(startingTimestamp="1700000000000", startingOffsets="earliest")
    assert options.starting == GlobalTimestamp(1_700_000_000_000)  # type: ignore[attr-defined]


ONE_OF = "one of the options subscribe, subscribePattern, assign must be given"
POSITIVE = "expected a positive integer"
BAD_OPTIONS = [
    ({"path": "/l"}, ONE_OF),
    ({"path": "/l", "subscribe": "a", "assign": '{"a":[0]}'}, "only one.*got subscribe, assign"),
    ({"path": "/l", "subscribe": "a", "subscribePattern": "a.*"}, "only one of the options"),
    ({"path": "/l", "subscribe": " , "}, "option 'subscribe': no topics"),
    ({"path": "/l", "subscribe": "a/b"}, "option 'subscribe': topic name 'a/b' contains"),
    ({"path": "/l", "subscribePattern": "("}, "option 'subscribePattern'.*not a valid regular"),
    ({"path": "/l", "assign": "t:0"}, r"option 'assign' must be JSON like \{\"topicA\":\[0,1\]\}"),
    ({"path": "/l", "assign": '{"t": [0'}, "option 'assign': malformed JSON"),
    ({"subscribe": "a"}, "option 'path' is required"),
    (
        {**BASE, "isolation.level": "serializable"},
        "option 'isolation.level'; valid values are read_committed, read_uncommitted",
    ),
    (
        {**BASE, "startingOffsets": '{"a": {"0": 1}'},
        "option 'startingOffsets': malformed JSON.*expected e.g.",
    ),
    (
        {**BASE, "startingOffsets": "beginning"},
        "option 'startingOffsets'; valid values are earliest, latest",
    ),
    ({**BASE, "startingOffsetsByTimestamp": '{"a": 5}'}, "startingOffsetsByTimestamp.*e.g."),
    ({**BASE, "startingTimestamp": "today"}, "startingTimestamp"),
    ({**BASE, "maxOffsetsPerTrigger": "0"}, f"'maxOffsetsPerTrigger'; {POSITIVE}"),
    ({**BASE, "maxOffsetsPerTrigger": "lots"}, f"'maxOffsetsPerTrigger'; {POSITIVE}"),
    ({**BASE, "minPartitions": "-1"}, f"'minPartitions'; {POSITIVE}"),
    ({**BASE, "maxRecordsPerPartition": "1.5"}, "'maxRecordsPerPartition'"),
    ({**BASE, "failOnDataLoss": "yes"}, "'failOnDataLoss'; valid values are true, false"),
    ({**BASE, "includeHeaders": "1"}, "'includeHeaders'; valid values are true, false"),
    ({**BASE, "maxTriggerDelay": "soon"}, "'maxTriggerDelay'"),
    ({**BASE, "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "higher than"),
    ({**BASE, "startingOffsetsByTimestampStrategy": "skip"}, "valid values are error, latest"),
    (
        {**BASE, "maxOffsetPerTrigger": "5"},
        "unknown option 'maxOffsetPerTrigger'.*valid options are path, subscribe",
    ),
]


@pytest.mark.parametrize(("options", "pattern"), BAD_OPTIONS)
def test_bad_options_fail_naming_the_option(options: dict[str, str], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        parse_source_options(options)


def test_stream_only_and_batch_only_rules() -> None:
    with pytest.raises(ConfigError, match="'endingOffsets' is not valid in streaming queries"):
        parse(streaming=True, endingOffsets="latest")
    parse(streaming=None, endingOffsets="latest")  # the schema step does not know yet
    with pytest.raises(ConfigError, match="'startingOffsets' can't be latest for batch"):
        parse(streaming=False, startingOffsets="latest")
    with pytest.raises(ConfigError, match="'endingOffsets' can't be earliest for batch"):
        parse(streaming=False, endingOffsets="earliest")
    with pytest.raises(ConfigError, match="orders-0 can't be latest"):
        parse(streaming=False, startingOffsets='{"orders": {"0": -1}}')
    with pytest.raises(ConfigError, match="orders-1 can't be earliest"):
        parse(streaming=False, endingOffsets='{"orders": {"1": -2}}')


def test_path_must_be_an_existing_log(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"option 'path'.*does not exist"):
        check_log_path(str(tmp_path / "missing"))
    assert not (tmp_path / "missing").exists()
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hi")
    with pytest.raises(ConfigError, match=r"option 'path'.*is not a txnlog directory"):
        check_log_path(str(tmp_path / "plain"))
    with pytest.raises(ConfigError, match="is not a txnlog directory"):
        check_log_path(str(tmp_path / "plain" / "notes.txt"))
    Log.open(tmp_path / "log").close()
    check_log_path(str(tmp_path / "log"))


def test_schema_validates_and_follows_include_headers(tmp_path: Path) -> None:
    Log.open(tmp_path / "log").close()
    options = {"path": str(tmp_path / "log"), "subscribe": "t"}
    assert source_schema(options) == kafka_schema(False)
    assert source_schema({**options, "includeHeaders": "true"}).fieldNames()[-1] == "headers"
    assert kafka_schema(False).simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    with pytest.raises(ConfigError, match="does not exist"):
        source_schema({**options, "path": str(tmp_path / "nope")})


# --- Kafka mode (issue 16 item 1) ----------------------------------------------------------------

KAFKA = {"kafka.bootstrap.servers": "b1:9092,b2:9093", "subscribe": "orders"}


def test_kafka_mode_reads_a_cluster_with_the_users_client_settings() -> None:
    options = parse_source_options(
        {
            **KAFKA,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "KAFKA.Isolation.Level": "read_uncommitted",
            "kafkaConsumer.pollTimeoutMs": "5000",
            "maxOffsetsPerTrigger": "10",
        },
        streaming=True,
    )
    assert options.kafka == KafkaCluster(
        "b1:9092,b2:9093",
        (
            ("bootstrap.servers", "b1:9092,b2:9093"),
            ("isolation.level", "read_uncommitted"),
            ("security.protocol", "SASL_PLAINTEXT"),
        ),
    )
    assert options.isolation_level is IsolationLevel.READ_UNCOMMITTED
    assert options.poll_timeout_ms == 5000 and options.admission.max_rows == 10
    with pytest.raises(ConfigError, match="reads Kafka cluster b1:9092,b2:9093, not a log"):
        _ = options.path
    assert parse_source_options(KAFKA).poll_timeout_ms == 120_000  # Spark's default
    with pytest.raises(ConfigError, match=r"options for Kafka cluster b1:9092,b2:9093 are not"):
        check_location(options)  # load() builds a client and asks the cluster (issue 26 item 6)


@pytest.mark.parametrize(
    ("name", "instead"),
    [
        ("kafka.group.id", "assigned consumers that join no group"),
        ("kafka.auto.offset.reset", "set the source option 'startingOffsets' instead"),
        ("kafka.enable.auto.commit", "never commits offsets to Kafka"),
        ("kafka.key.deserializer", r"CAST\(key AS STRING\)"),
        ("kafka.value.deserializer", r"CAST\(value AS STRING\)"),
        ("kafka.interceptor.classes", "Java classes"),
        ("kafka.enable.partition.eof", "stop on their position"),
    ],
)
def test_kafka_options_the_source_decides_itself_are_refused(name: str, instead: str) -> None:
    with pytest.raises(ConfigError, match=rf"option '{name}' is not supported: .*{instead}"):
        parse_source_options({**KAFKA, name.upper(): "x"})


def test_options_of_one_mode_are_refused_in_the_other(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"'kafkaConsumer.pollTimeoutMs' configures the consumers"
    ):
        parse(**{"kafkaConsumer.pollTimeoutMs": "1000"})
    with pytest.raises(ConfigError, match=r"'kafka.client.id' configure a Kafka client"):
        parse(**{"kafka.client.id": "etl"})
    with pytest.raises(ConfigError, match=r"'path'.*and 'kafka.bootstrap.servers'.*are both set"):
        parse_source_options({**KAFKA, "path": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"'kafkaConsumer.pollTimeoutMs'; expected a positive"):
        parse_source_options({**KAFKA, "kafkaConsumer.pollTimeoutMs": "0"})
    with pytest.raises(ConfigError, match=r"host:port"):
        parse_source_options({**KAFKA, "kafka.bootstrap.servers": "nohost"})
    with pytest.raises(ConfigError, match=r"does not exist"):
        check_location(parse_source_options({**BASE, "path": str(tmp_path / "nope")}))
