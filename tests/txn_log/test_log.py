"""Log directories, topic names and topic configs (DESIGN §2; bad input changes nothing)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import directory_bytes, open_transaction
from txn_log.errors import (
    ConcurrentTransactionsError,
    ConfigError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from txn_log.log import Log
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

tree = directory_bytes


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("../x", "'/'"),
        ("", "empty"),
        ("a" * 250, "250 characters"),
        (".", "reserved"),
        ("..", "reserved"),
        ("a/b", "'/'"),
        ("ok name", "' '"),
        ("__consumer_offsets", "reserved"),
    ],
)
def test_invalid_topic_names_are_refused_and_change_nothing(
    tmp_path: Path, name: str, fragment: str
) -> None:
    log = Log.open(tmp_path / "log")
    log.create_topic("existing", partitions=2)
    before = tree(tmp_path)
    with pytest.raises(InvalidTopicError, match=fragment):
        log.create_topic(name)
    assert tree(tmp_path) == before
    assert log.topics() == ["existing"]


def test_longest_legal_name_is_accepted(tmp_path: Path) -> None:
    log = Log.open(tmp_path)
    log.create_topic("a" * 249)
    assert log.topics() == ["a" * 249]


def test_topics_and_partitions_are_shared_between_log_objects(tmp_path: Path) -> None:
    first = Log.open(tmp_path)
    first.create_topic("orders", partitions=3, config={"segment.bytes": "1024"})
    second = Log.open(tmp_path)
    assert second.topics() == ["orders"]
    assert second.partitions("orders") == [TopicPartition("orders", p) for p in range(3)]
    assert second.topic_config("orders").segment_bytes == 1024
    first.create_partitions("orders", 5)
    assert len(second.partitions("orders")) == 5
    assert second.partition_log(TopicPartition("orders", 4)).log_end_offset == 0


def test_duplicate_topic_and_bad_partition_counts(tmp_path: Path) -> None:
    log = Log.open(tmp_path)
    log.create_topic("t")
    with pytest.raises(TopicAlreadyExistsError, match="'t' already exists"):
        log.create_topic("t")
    for bad in (0, -1, True, 10_001):
        with pytest.raises(InvalidPartitionsError, match="1 to 10000"):
            log.create_topic("u", partitions=bad)
    with pytest.raises(InvalidPartitionsError, match="'t' already has 1 partition"):
        log.create_partitions("t", 1)
    assert log.topics() == ["t"]


def test_create_partitions_refuses_in_kafkas_words_and_validate_only_writes_nothing(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path)
    log.create_topic("t", 3)
    with pytest.raises(InvalidPartitionsError, match=r"3 partition\(s\); 2 would not be an"):
        log.create_partitions("t", 2)
    with pytest.raises(InvalidPartitionsError, match="1 to 10000"):
        log.create_partitions("t", 10_001)
    for internal in ("__consumer_offsets", "__transaction_state"):
        with pytest.raises(InvalidTopicError, match="internal to txnlog and cannot grow"):
            log.create_partitions(internal, 2)
        assert len(log.partitions(internal)) == 1
    with pytest.raises(UnknownTopicOrPartitionError):
        log.create_partitions("nowhere", 2, validate_only=True)
    with pytest.raises(InvalidPartitionsError, match="already has 3"):
        log.create_partitions("t", 3, validate_only=True)
    log.create_partitions("t", 5, validate_only=True)
    assert len(log.partitions("t")) == 3
    assert not (tmp_path / "t-3").exists()
    log.create_partitions("t", 5)
    assert len(log.partitions("t")) == 5
    log.close()


def test_unknown_topic_and_partition_name_what_exists(tmp_path: Path) -> None:
    log = Log.open(tmp_path)
    log.create_topic("orders", partitions=2)
    with pytest.raises(UnknownTopicOrPartitionError, match="existing topics: orders"):
        log.partitions("ordrs")
    with pytest.raises(UnknownTopicOrPartitionError, match=r"valid partitions are 0\.\.1"):
        log.partition_log(TopicPartition("orders", 2))


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"segment.byte": 10}, "valid keys are"),
        ({"segment.bytes": "x"}, "expected an integer"),
        ({"segment.bytes": 1}, "minimum is 14"),
        ({"message.timestamp.type": "Now"}, "CreateTime, LogAppendTime"),
        ({"check.expected.offsets": "yes"}, "true, false"),
    ],
)
def test_bad_topic_configs_are_refused(
    tmp_path: Path, config: dict[str, object], fragment: str
) -> None:
    log = Log.open(tmp_path)
    with pytest.raises(InvalidConfigError, match=fragment):
        log.create_topic("t", config=config)
    assert log.topics() == []


def test_config_round_trips_through_kafka_names() -> None:
    config = TopicConfig.from_mapping(
        {"message.timestamp.type": "LogAppendTime", "check.expected.offsets": "true"}
    )
    assert TopicConfig.from_mapping(config.to_mapping()) == config


def test_a_path_that_is_not_a_log_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConfigError, match="not a txnlog directory"):
        Log.open(tmp_path)
    with pytest.raises(ConfigError, match="is a file"):
        Log.open(tmp_path / "notes.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_topic_an_open_transaction_writes_to_cannot_be_deleted(tmp_path: Path) -> None:
    """Deleting a topic under an open transaction would leave markers nowhere to go (C-19):
    refused, naming the transaction and how to end it; nothing changes; once the transaction
    ended, the topic can go and transactions elsewhere carry on."""
    log = Log.open(tmp_path)
    log.create_topic("t", partitions=2)
    log.create_topic("other", partitions=1)
    producer = open_transaction(log, "writer", [("t", 1, b"x")])
    before = tree(tmp_path)
    with pytest.raises(ConcurrentTransactionsError, match=r"'writer'.*transactions abort"):
        log.delete_topic("t")
    assert tree(tmp_path) == before
    producer.abort_transaction()
    assert log.delete_topic("t") == 2
    other = Log.open(tmp_path).producer("unrelated")
    other.init_transactions()
    assert "t" not in Log.open(tmp_path).topics()


def test_markers_for_a_topic_gone_behind_the_coordinators_back_are_skipped(
    tmp_path: Path,
) -> None:
    """A topic removed by hand (or by an older txnlog) while a transaction had written to it:
    completing that transaction skips the vanished partition, as Kafka drops markers for
    deleted partitions, instead of failing every coordinator call of every process for good."""
    log = Log.open(tmp_path)
    log.create_topic("t", partitions=1)
    log.create_topic("other", partitions=1)
    open_transaction(log, "writer", [("t", 0, b"x"), ("other", 0, b"y")])
    log.close()
    (tmp_path / "topics" / "t.json").unlink()
    shutil.rmtree(tmp_path / "t-0")
    fresh = Log.open(tmp_path)
    assert fresh.coordinator.abort_transaction("writer")
    unrelated = fresh.producer("unrelated")
    unrelated.init_transactions()
    consumer = fresh.consumer()
    other = TopicPartition("other", 0)
    assert consumer.end_offset(other) == 2 and list(consumer.read(other, 0)) == []


def test_a_read_only_log_hands_out_partition_readers_that_never_write(tmp_path: Path) -> None:
    """DESIGN §3: inspection reads a partition lock-free, with producer state for the LSO; a
    writer of it is refused (ConfigError) and nothing is created or changed."""
    log = Log.open(tmp_path, housekeeping_interval_ms=None)
    log.create_topic("orders")
    tp = TopicPartition("orders", 0)
    open_transaction(log, "t", [("orders", 0, b"open")])  # pins the LSO at 0
    writer = log.partition_log(tp)
    end = writer.log_end_offset
    before = tree(tmp_path)
    with Log.open(tmp_path, read_only=True) as inspector:
        reader = inspector.partition_reader(tp)
        assert not hasattr(reader, "append")
        assert (reader.log_end_offset, reader.last_stable_offset) == (end, 0) != (end, end)
        assert inspector.partition_reader(tp) is reader  # cached, as writers are
        with pytest.raises(ConfigError, match="read-only"):
            inspector.partition_log(tp)
    assert tree(tmp_path) == before
    assert log.partition_reader(tp) is writer  # a writable log's partitions read as well
    log.close()
