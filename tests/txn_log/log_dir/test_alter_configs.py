"""Changing a topic's config after creation in the engine (``LogManager.alter_topic_config``,
``log_dir.alter_configs``): Kafka's AlterConfigs (replace) and IncrementalAlterConfigs (SET,
DELETE, APPEND, SUBTRACT), validate-only, the overrides DescribeConfigs reports, the internal
topics' pinned keys (C-02, CFG-18), hostile input refused with a typed error naming the key,
and nothing written by a refusal (STYLE 3). The other processes' side is
``tests/txn_log/processes/test_config_alter_processes.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import directory_bytes
from txn_log.errors import (
    ConfigError,
    InvalidConfigError,
    InvalidTopicError,
    UnknownTopicOrPartitionError,
)
from txn_log.log import TOPICS_DIR, Log
from txn_log.log_dir.alter_configs import INTERNAL_ALTERABLE, AlterConfigOp, OpType
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicConfig

SET, DELETE, APPEND, SUBTRACT = OpType.SET, OpType.DELETE, OpType.APPEND, OpType.SUBTRACT
DEFAULTS = TopicConfig()


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log", housekeeping_interval_ms=None)
    log.create_topic("t", 2, {"retention.ms": "60000", "segment.bytes": "100000"})
    return log


def file_of(log: Log, topic: str) -> dict[str, object]:
    document: dict[str, object] = json.loads((log.path / TOPICS_DIR / f"{topic}.json").read_text())
    return document


def test_creation_records_the_keys_given_as_overrides(log: Log) -> None:
    assert log.topic_config_overrides("t") == {"retention.ms", "segment.bytes"}
    assert file_of(log, "t")["config_overrides"] == ["retention.ms", "segment.bytes"]


def test_replace_sets_the_keys_given_and_returns_every_other_to_its_default(log: Log) -> None:
    new = log.alter_topic_config("t", {"max.message.bytes": "5000", "cleanup.policy": "compact"})
    assert (new.max_message_bytes, new.cleanup_policy) == (5000, "compact")
    assert (new.retention_ms, new.segment_bytes) == (DEFAULTS.retention_ms, DEFAULTS.segment_bytes)
    assert log.topic_config("t") == new
    assert log.topic_config_overrides("t") == {"max.message.bytes", "cleanup.policy"}
    assert file_of(log, "t")["partitions"] == 2  # the rest of the file is kept


def test_incremental_set_and_delete_change_only_the_keys_named(log: Log) -> None:
    new = log.incremental_alter_topic_config(
        "t",
        [AlterConfigOp("compression.type", SET, "lz4"), AlterConfigOp("retention.ms", DELETE)],
    )
    assert new.compression_type == "lz4"
    assert new.retention_ms == DEFAULTS.retention_ms  # back to the default
    assert new.segment_bytes == 100000  # untouched
    assert log.topic_config_overrides("t") == {"segment.bytes", "compression.type"}
    # deleting a key that is no override changes nothing
    assert log.incremental_alter_topic_config("t", [AlterConfigOp("segment.ms", DELETE)]) == new


def test_append_and_subtract_work_on_cleanup_policy_as_kafka_lists_do(log: Log) -> None:
    appended = log.incremental_alter_topic_config(
        "t", [AlterConfigOp("cleanup.policy", APPEND, "compact")]
    )
    assert appended.cleanup_policy == "compact,delete" and appended.compact and appended.delete
    again = log.incremental_alter_topic_config(
        "t", [AlterConfigOp("cleanup.policy", APPEND, "compact")]
    )
    assert again.cleanup_policy == "compact,delete"  # an item already there is not added twice
    subtracted = log.incremental_alter_topic_config(
        "t", [AlterConfigOp("cleanup.policy", SUBTRACT, "delete")]
    )
    assert subtracted.cleanup_policy == "compact"
    with pytest.raises(InvalidConfigError, match=r"cleanup\.policy"):  # an empty list
        log.incremental_alter_topic_config(
            "t", [AlterConfigOp("cleanup.policy", SUBTRACT, "compact")]
        )


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([AlterConfigOp("retention.ms", APPEND, "5")], "Can't APPEND to key retention.ms"),
        ([AlterConfigOp("segment.bytes", SUBTRACT, "5")], "Can't SUBTRACT to key segment.bytes"),
        ([AlterConfigOp("no.such.key", SET, "1")], "unknown topic config 'no.such.key'"),
        ([AlterConfigOp("retention.ms", SET, None)], "Null value not supported"),
        ([AlterConfigOp("retention.ms", 7, "1")], "unknown operation 7"),  # an int, not an OpType
        ([AlterConfigOp("cleanup.policy", APPEND, None)], "Null value not supported"),
        (
            [AlterConfigOp("retention.ms", SET, "1"), AlterConfigOp("retention.ms", DELETE)],
            "duplicate config keys",
        ),
        (
            [AlterConfigOp("compression.type", SET, "brotli")],
            "'compression.type'; valid values are uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ([AlterConfigOp("compression.type", SET, "none")], "compression.type"),
        ([AlterConfigOp("segment.bytes", SET, "13")], "'segment.bytes'; the minimum is 14"),
        ([AlterConfigOp("segment.bytes", SET, str(2**31))], "the maximum is 2147483647"),
        ([AlterConfigOp("retention.ms", SET, str(2**63))], "the maximum is 9223372036854775807"),
        ([AlterConfigOp("retention.ms", SET, "9" * 5000)], "'retention.ms'; expected an integer"),
        ([AlterConfigOp("min.cleanable.dirty.ratio", SET, "2")], "valid values are 0 to 1"),
        ([AlterConfigOp("message.timestamp.type", SET, "Now")], "CreateTime, LogAppendTime"),
    ],
)
def test_invalid_alterations_name_the_key_and_write_nothing(
    log: Log, ops: list[AlterConfigOp], message: str
) -> None:
    before = directory_bytes(log.path, content_only=True)
    config = log.topic_config("t")
    for validate_only in (True, False):
        with pytest.raises(InvalidConfigError, match=message.replace(".", r"\.")):
            log.incremental_alter_topic_config("t", ops, validate_only=validate_only)
    assert directory_bytes(log.path, content_only=True) == before
    assert log.topic_config("t") == config


def test_a_huge_key_or_value_is_refused_with_a_short_message(log: Log) -> None:
    huge = "x" * 1_000_000
    for ops in (
        [AlterConfigOp(huge, SET, "1")],
        [AlterConfigOp("compression.type", SET, huge)],
        [AlterConfigOp("cleanup.policy", APPEND, huge)],
    ):
        with pytest.raises(InvalidConfigError) as refused:
            log.incremental_alter_topic_config("t", ops)
        assert len(str(refused.value)) < 1000 and "characters)" in str(refused.value)


def test_validate_only_checks_and_returns_the_result_but_writes_nothing(log: Log) -> None:
    before = directory_bytes(log.path, content_only=True)
    would = log.alter_topic_config("t", {"retention.bytes": "1234"}, validate_only=True)
    assert would.retention_bytes == 1234
    assert directory_bytes(log.path, content_only=True) == before
    assert log.topic_config("t").retention_bytes == -1


def test_unknown_topics_bad_names_and_read_only_logs_are_refused(log: Log) -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match="'nope' does not exist"):
        log.alter_topic_config("nope", {"retention.ms": "1"})
    with pytest.raises(InvalidTopicError):
        log.alter_topic_config("../t", {"retention.ms": "1"})
    with Log.open(log.path, read_only=True) as reader, pytest.raises(ConfigError, match="read"):
        reader.alter_topic_config("t", {"retention.ms": "1"})


def test_a_peers_alteration_is_never_undone_by_one_made_from_a_stale_view(log: Log) -> None:
    """Each alteration re-reads the file under the log lock: a log that cached the topic
    before a peer altered it keeps the peer's change when it alters another key."""
    with Log.open(log.path, housekeeping_interval_ms=None) as peer:
        assert peer.topic_config("t").retention_ms == 60000  # cached here now
        log.incremental_alter_topic_config("t", [AlterConfigOp("retention.bytes", SET, "9")])
        peer.incremental_alter_topic_config("t", [AlterConfigOp("segment.ms", SET, "99")])
        assert peer.topic_config("t").retention_bytes == 9  # and it sees the peer's change
    config = log.topic_config("t")
    assert (config.retention_bytes, config.segment_ms, config.retention_ms) == (9, 99, 60000)
    log.create_partitions("t", 3)  # a growth keeps the altered config too
    assert log.topic_config("t") == config


def test_a_topic_file_from_before_overrides_were_recorded_counts_what_differs(log: Log) -> None:
    path = log.path / TOPICS_DIR / "t.json"
    document = json.loads(path.read_text())
    del document["config_overrides"]
    path.write_text(json.dumps(document))
    assert log.topic_config_overrides("t") == {"retention.ms", "segment.bytes"}
    log.incremental_alter_topic_config("t", [AlterConfigOp("retention.ms", DELETE)])
    assert log.topic_config_overrides("t") == {"segment.bytes"}


@pytest.mark.parametrize("topic", [TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC])
def test_internal_topics_take_only_segment_and_compaction_settings(log: Log, topic: str) -> None:
    """Decision (C-02, CFG-18): Kafka lets an operator alter its internal topics; the engine
    keeps what it depends on (compaction, its own codec and limits) and lets the rest change."""
    altered = log.incremental_alter_topic_config(
        topic,
        [
            AlterConfigOp("segment.bytes", SET, "2000000"),
            AlterConfigOp("min.cleanable.dirty.ratio", SET, "0.25"),
        ],
    )
    assert (altered.segment_bytes, altered.min_cleanable_dirty_ratio) == (2000000, 0.25)
    for key, value in (
        ("cleanup.policy", "delete"),
        ("compression.type", "gzip"),
        ("max.message.bytes", "100"),
        ("retention.ms", "1"),
    ):
        with pytest.raises(InvalidConfigError, match=f"internal to txnlog: its {key} stays"):
            log.incremental_alter_topic_config(topic, [AlterConfigOp(key, SET, value)])
    # DELETE and replace go back to the engine's internal defaults, still compacted
    reset = log.alter_topic_config(topic, {"segment.ms": "60000"})
    assert reset.compact and reset.segment_bytes == 8 * 1024 * 1024 and reset.segment_ms == 60000
    assert reset.max_compaction_lag_ms == 24 * 3600 * 1000
    assert "segment.ms" in log.topic_config_overrides(topic)
    assert {"segment.bytes", "max.compaction.lag.ms"} <= INTERNAL_ALTERABLE


def test_a_deleted_and_recreated_topic_gets_the_new_files_config(log: Log) -> None:
    with Log.open(log.path, housekeeping_interval_ms=None) as peer:
        assert peer.topic_config("t").retention_ms == 60000
        log.delete_topic("t")
        assert peer.topic_config("t").retention_ms == 60000  # the last one it knew
        log.create_topic("t", 1, {"retention.ms": "5"})
        assert peer.topic_config("t").retention_ms == 5


def test_flush_keys_are_kafkas_longs_validated_and_kept(log: Log) -> None:
    """``flush.ms`` (LONG, at least 0) and ``flush.messages`` (LONG, at least 1), Kafka's
    defaults Long.MAX_VALUE: taken, stored and reported as set; a value out of range is refused
    naming the key, nothing written. Every append is fsynced before it is acknowledged, which
    meets any such bound (``topic_config``)."""
    assert DEFAULTS.flush_ms == DEFAULTS.flush_messages == 2**63 - 1
    new = log.incremental_alter_topic_config(
        "t", [AlterConfigOp("flush.ms", SET, "12345678"), AlterConfigOp("flush.messages", SET, "1")]
    )
    assert (new.flush_ms, new.flush_messages) == (12345678, 1)
    assert {"flush.ms", "flush.messages"} <= log.topic_config_overrides("t")
    assert Log.open(log.path, read_only=True).topic_config("t").flush_ms == 12345678
    before = directory_bytes(log.path, content_only=True)
    for key, value, message in [
        ("flush.ms", "-1", "invalid value -1 for topic config 'flush.ms'; the minimum is 0"),
        ("flush.messages", "0", "invalid value 0 for topic config 'flush.messages'; the minimum"),
        ("flush.ms", "soon", "'flush.ms'; expected an integer"),
        ("flush.messages", str(2**63), "'flush.messages'; the maximum is 9223372036854775807"),
    ]:
        with pytest.raises(InvalidConfigError) as refused:
            log.incremental_alter_topic_config("t", [AlterConfigOp(key, SET, value)])
        assert message in str(refused.value)
    assert directory_bytes(log.path, content_only=True) == before
    log.create_topic("made", 1, {"flush.ms": "0", "flush.messages": "1"})
    assert log.topic_config("made").flush_ms == 0


def test_asking_configs_of_topics_that_do_not_exist_keeps_nothing(tmp_path: Path) -> None:
    """DescribeConfigs (and ``topic_config``) of names that are no topic: each is
    UnknownTopicOrPartitionError, and none stays in the log's cache of config watches (any
    client may ask for any name; before, every name asked stayed in memory for good). A topic
    created after its name was asked is then seen."""
    with Log.open(tmp_path / "log") as log:
        log.create_topic("t", 1)
        log.topic_config("t")
        cached = len(log.log_manager._config_watches)
        for i in range(500):
            with pytest.raises(UnknownTopicOrPartitionError):
                log.topic_config(f"nowhere-{i}")
        assert len(log.log_manager._config_watches) == cached
        log.create_topic("nowhere-7", 1)
        assert log.topic_config("nowhere-7") == log.topic_config("t")
