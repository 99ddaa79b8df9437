"""Compaction configs, compacted internal topics, the ``txnlog clean`` command and the cleaner in
housekeeping (C-02, CFG-18)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.txn_log.cli.test_cli import txnlog
from txn_log.clock import ManualClock
from txn_log.errors import InvalidConfigError
from txn_log.log import Log
from txn_log.log_dir.log_manager import LogManager
from txn_log.record.codec import iter_records
from txn_log.storage.retention import deletable_segments
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("table", 0)


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("cleanup.policy", "compress", "delete, compact, compact,delete"),
        ("min.cleanable.dirty.ratio", "1.5", "0 to 1"),
        ("min.cleanable.dirty.ratio", "half", "a number from 0 to 1"),
        ("delete.retention.ms", "-1", "the minimum is 0"),
        ("min.compaction.lag.ms", "soon", "expected an integer"),
    ],
)
def test_bad_compaction_configs_are_refused_naming_option_and_valid_values(
    key: str, value: str, named: str
) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        TopicConfig.from_mapping({key: value})
    assert key in str(caught.value) and named in str(caught.value)


def test_cfg18_cleanup_policy_defaults_and_spellings() -> None:
    """Kafka's names and defaults; "delete,compact" and "compact,delete" are one policy."""
    default = TopicConfig()
    assert (default.cleanup_policy, default.delete, default.compact) == ("delete", True, False)
    assert default.delete_retention_ms == 86_400_000
    assert default.min_cleanable_dirty_ratio == 0.5 and default.min_compaction_lag_ms == 0
    both = TopicConfig.from_mapping({"cleanup.policy": "delete, compact"})
    assert both.cleanup_policy == "compact,delete" and both.compact and both.delete
    assert TopicConfig.from_mapping(both.to_mapping()) == both


def test_cfg18_retention_skips_pure_compact_and_honours_compact_delete(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "log", clock=clock, housekeeping_interval_ms=None)
    for name, policy in (("c", "compact"), ("cd", "compact,delete")):
        log.create_topic(name, config={"cleanup.policy": policy, "retention.bytes": "1"})
        partition = log.partition_log(TopicPartition(name, 0))
        producer = log.producer()
        producer.send(name, b"v", key=b"k", partition=0)
        producer.flush()
        partition.roll()
        producer.send(name, b"w", key=b"k", partition=0)
        producer.flush()
        count = deletable_segments(name, list(partition.segments), partition.config,
                                   clock.time_ms(), None)  # fmt: skip
        assert count == (0 if policy == "compact" else 1)
    log.close()


def test_c02_internal_topics_are_created_compacted(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "log", housekeeping_interval_ms=None)
    for topic in ("__transaction_state", "__consumer_offsets"):
        assert log.topic_config(topic).cleanup_policy == "compact"
    log.close()


def test_c02_an_older_logs_internal_topics_are_upgraded_durably_on_open(tmp_path: Path) -> None:
    path = tmp_path / "log"
    Log.open(path, housekeeping_interval_ms=None).close()
    meta_path = path / "topics" / "__transaction_state.json"
    meta = json.loads(meta_path.read_text())
    meta["config"]["cleanup.policy"] = "delete"  # as a log written before C-02
    meta_path.write_text(json.dumps(meta))
    read_only = LogManager.open(path, read_only=True)
    assert not read_only.topic_config("__transaction_state").compact  # inspecting changes nothing
    Log.open(path, housekeeping_interval_ms=None).close()
    assert json.loads(meta_path.read_text())["config"]["cleanup.policy"] == "compact"


def test_topics_create_config_and_describe_show_the_compaction_settings(tmp_path: Path) -> None:
    path = tmp_path / "log"
    created = txnlog("topics", "create", path, "t", "--config", "cleanup.policy=compact",
                     "--config", "delete.retention.ms=5000")  # fmt: skip
    assert created.returncode == 0, created.stderr
    described = json.loads(txnlog("topics", "describe", path, "t", "--json").stdout)
    config = described[0]["config"]
    assert config["cleanup.policy"] == "compact" and config["delete.retention.ms"] == 5000
    assert config["min.cleanable.dirty.ratio"] == 0.5
    assert described[0]["retention"] == {"retention.ms": -1, "retention.bytes": -1}
    refused = txnlog("topics", "create", path, "u", "--config", "cleanup.policy=never")
    assert refused.returncode == 2 and "cleanup.policy" in refused.stderr


def _fill(path: Path, clock: ManualClock) -> None:
    log = Log.open(path, clock=clock, housekeeping_interval_ms=None)
    log.create_topic(TP.topic, config={"cleanup.policy": "compact"})
    partition = log.partition_log(TP)
    producer = log.producer()
    for round_ in range(6):
        for key in (b"a", b"b"):
            producer.send(TP.topic, b"%d" % round_, key=key, partition=0)
        producer.flush()
        if round_ >= 4:
            partition.roll()  # segments 0 (rounds 0-4) and 10 (round 5), then the active one
    producer.send(TP.topic, b"tail", key=b"c", partition=0)
    producer.flush()
    log.close()


def test_txnlog_clean_prints_what_it_did_and_verify_passes(tmp_path: Path) -> None:
    """The cleaned log passes ``txnlog verify``; ``clean`` prints segments, bytes, records."""
    path = tmp_path / "log"
    _fill(path, ManualClock())
    result = txnlog("clean", path, TP.topic, "--json")
    assert result.returncode == 0, result.stderr
    (stats,) = json.loads(result.stdout)
    assert stats["segments_cleaned"] == [0, 10] and stats["records_removed"] == 10
    assert stats["segments_written"] == 1  # both closed segments merged into one
    assert stats["bytes_after"] < stats["bytes_before"]
    text = txnlog("clean", path)
    assert text.returncode == 0 and "Cleaned 0 segment(s)" in text.stdout
    verified = txnlog("verify", path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    with Log.open(path, read_only=True) as log:
        reader = log.partition_reader(TP)
        values = [(r.key, r.value) for _, b in reader.read(0) for r in iter_records(b)]
    assert values == [(b"a", b"5"), (b"b", b"5"), (b"c", b"tail")]
    with Log.open(path, read_only=True) as log:
        bases = [s.base_offset for s in log.partition_reader(TP).segments]
        ends = [s.next_offset for s in log.partition_reader(TP).segments]
    assert bases[1:] == ends[:-1]  # the emptied segment still ends where the next begins
    refused = txnlog("clean", path, "nope")
    assert refused.returncode == 2 and "does not exist" in refused.stderr


def test_c02_housekeeping_runs_the_cleaner_when_the_dirty_ratio_is_reached(tmp_path: Path) -> None:
    """A configured feature must run: the housekeeping pass cleans a dirty compacted partition
    once, and not again until new data makes it dirty."""
    path = tmp_path / "log"
    clock = ManualClock()
    _fill(path, clock)
    log = Log.open(path, clock=clock, housekeeping_interval_ms=None)
    log.partition_log(TP)
    first = log.run_housekeeping()
    assert [s.topic_partition for s in first.cleaned] == [str(TP)]
    assert first.cleaned[0].records_removed == 10
    assert log.run_housekeeping().cleaned == ()  # nothing dirty since
    log.close()


def test_c02_the_background_housekeeping_thread_cleans_on_its_own(tmp_path: Path) -> None:
    """A configured feature must run: with a housekeeping interval, the process's housekeeping
    thread cleans a dirty compacted partition without being asked (polled with a bound)."""
    path = tmp_path / "log"
    _fill(path, ManualClock())
    directory = path / TP.directory_name
    before = (directory / "00000000000000000000.log").stat().st_size
    with Log.open(path, housekeeping_interval_ms=50) as log:
        log.partition_log(TP)  # housekeeping visits the partitions a log has open
        deadline = time.monotonic() + 60
        while (directory / "cleaner-offset-checkpoint").exists() is False:
            assert time.monotonic() < deadline, "the housekeeping thread never cleaned"
            time.sleep(0.05)
    assert (directory / "00000000000000000000.log").stat().st_size < before
