"""A topic's config altered by one process applies in another that has the partition open,
at its next operation, without reopening (DESIGN §3; ``LogManager.alter_topic_config``,
``log_dir.topic_config_watch``; CFG-18 for cleanup.policy, F-09 for max.message.bytes).

The worker (``config_workers``) opens ``t-0`` for writing and appends once, so the partition
and the topic's config are cached there; then this process alters the config and the worker's
next append, roll, housekeeping pass or cleaning must follow the new value. A config that is
written but applied nowhere is the defect these tests catch: without the watch, the worker
keeps the config it opened the partition with. No test waits on time: each step is a command
and its answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.txn_log.processes.config_workers import Worker
from txn_log.log import Log
from txn_log.log_dir.alter_configs import AlterConfigOp, OpType
from txn_log.record.batch_header import Compression
from txn_log.record.codec import decode_batch
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
SET, DELETE, APPEND = OpType.SET, OpType.DELETE, OpType.APPEND


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "log"


@pytest.fixture
def worker(log_dir: Path) -> Iterator[Worker]:
    with Log.open(log_dir, housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1, {"segment.bytes": "1000000"})
    started = Worker(log_dir, "serve")
    try:
        assert started.line() == {"step": "ready"}
        yield started
    finally:
        started.stop()


def alter(log_dir: Path, *ops: AlterConfigOp) -> None:
    """Another process's alteration: this test process, with a log of its own."""
    with Log.open(log_dir, housekeeping_interval_ms=None) as log:
        log.incremental_alter_topic_config("t", list(ops))


def test_max_message_bytes_altered_elsewhere_limits_the_next_append(
    log_dir: Path, worker: Worker
) -> None:
    assert worker.append(2000)["ok"]
    alter(log_dir, AlterConfigOp("max.message.bytes", SET, "1000"))
    refused = worker.append(2000)
    assert not refused["ok"] and refused["error"].startswith("RecordTooLargeError")
    assert "max.message.bytes of 1000" in refused["error"]
    alter(log_dir, AlterConfigOp("max.message.bytes", DELETE))  # back to the default
    assert worker.append(2000)["ok"]


def test_segment_bytes_altered_elsewhere_rolls_the_open_segment(
    log_dir: Path, worker: Worker
) -> None:
    for _ in range(3):
        assert worker.append(2000)["segments"] == 1
    alter(log_dir, AlterConfigOp("segment.bytes", SET, "3000"))
    first = worker.append(2000)
    second = worker.append(2000)
    assert (first["segments"], second["segments"]) == (2, 3)


def test_timestamp_type_and_compression_altered_elsewhere_apply_to_the_next_batch(
    log_dir: Path, worker: Worker
) -> None:
    assert worker.append(500)["log_append_time_ms"] == -1
    alter(
        log_dir,
        AlterConfigOp("message.timestamp.type", SET, "LogAppendTime"),
        AlterConfigOp("compression.type", SET, "zstd"),
    )
    stamped = worker.append(500, codec=Compression.NONE)
    assert stamped["ok"] and stamped["log_append_time_ms"] > 0
    with Log.open(log_dir, read_only=True) as log:
        batches = list(log.partition_reader(TP).read(stamped["offset"], stamped["offset"] + 1))
    [(header, data)] = batches
    assert header.compression is Compression.ZSTD  # stored in the topic's codec
    [record] = decode_batch(data).records.to_pylist()
    assert record["value"] == b"v" * 500 and record["timestamp"] == stamped["log_append_time_ms"]


def test_cleanup_policy_altered_elsewhere_reaches_the_cleaner_and_the_key_rule(
    log_dir: Path, worker: Worker
) -> None:
    alter(log_dir, AlterConfigOp("segment.bytes", SET, "1000"))  # every append rolls
    for _ in range(4):
        assert worker.append(2000, key="a")["ok"]
    assert worker.ask(op="housekeeping")["cleaned_records"] == 0  # delete: nothing compacted
    alter(log_dir, AlterConfigOp("cleanup.policy", APPEND, "compact"))
    keyless = worker.append(100, key=None)
    assert (
        not keyless["ok"]
        and "compacted topic cannot accept a record without a key" in (keyless["error"])
    )
    assert worker.ask(op="housekeeping")["cleaned_records"] >= 2  # older "a" records go
    with Log.open(log_dir, read_only=True) as log:
        assert log.topic_config("t").cleanup_policy == "compact,delete"


def test_a_cleanup_policy_default_set_elsewhere_compacts_a_topic_without_its_own(
    log_dir: Path, worker: Worker
) -> None:
    """The dynamic broker config ``log.cleanup.policy`` (``broker_config``), set by another
    process, is the cleanup.policy of ``t``, which sets none: the worker's next append
    follows the compacted topic's key rule and its next pass compacts; once deleted, the
    topic is back to Kafka's default, delete."""
    alter(log_dir, AlterConfigOp("segment.bytes", SET, "1000"))  # every append rolls
    for _ in range(4):
        assert worker.append(2000, key="a")["ok"]
    assert worker.ask(op="housekeeping")["cleaned_records"] == 0
    with Log.open(log_dir, housekeeping_interval_ms=None) as log:
        log.broker_configs.alter("", [AlterConfigOp("log.cleanup.policy", SET, "compact")])
    keyless = worker.append(100, key=None)
    assert not keyless["ok"] and "without a key" in keyless["error"]
    assert worker.ask(op="housekeeping")["cleaned_records"] >= 2
    with Log.open(log_dir, housekeeping_interval_ms=None) as log:
        log.broker_configs.alter("", [AlterConfigOp("log.cleanup.policy", DELETE)])
    assert worker.append(100, key=None)["ok"]


def test_retention_altered_elsewhere_deletes_in_the_next_pass(
    log_dir: Path, worker: Worker
) -> None:
    alter(log_dir, AlterConfigOp("segment.bytes", SET, "1000"))
    offsets = [worker.append(2000)["offset"] for _ in range(4)]
    assert worker.ask(op="housekeeping")["deleted_segments"] == []
    alter(log_dir, AlterConfigOp("retention.bytes", SET, "2500"))
    done = worker.ask(op="housekeeping")
    assert done["deleted_segments"] and done["log_start_offset"] > offsets[0]


def test_an_appender_running_while_another_process_alters_is_refused_at_its_next_append(
    log_dir: Path,
) -> None:
    """The worker appends in a loop; the alteration lands at some point of it. Every append
    acknowledged is in the log, in order; once one append is refused by the new limit, every
    later one is, and so is the first append after the alteration returned."""
    with Log.open(log_dir, housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1)
    marker = log_dir.parent / "altered"
    loop = Worker(log_dir, "loop", str(marker))
    try:
        assert loop.line() == {"step": "ready"}
        acked = [loop.line()["acked"]]  # appending now
        alter(log_dir, AlterConfigOp("max.message.bytes", SET, "1000"))
        marker.touch()
        refused: list[str] = []
        while "after_marker" not in (answer := loop.line()):
            if "acked" in answer:
                assert not refused, f"acknowledged after a refusal: {answer}"
                acked.append(answer["acked"])
            else:
                refused.append(answer["refused"])
    finally:
        loop.stop()
    after = answer["after_marker"]
    assert not after["ok"] and after["error"].startswith("RecordTooLargeError"), answer
    assert all(error.startswith("RecordTooLargeError") for error in refused)
    assert acked == list(range(len(acked)))
    with Log.open(log_dir, read_only=True) as log:
        stored = [r.offset for r in log.consumer("read_uncommitted").read(TP, 0)]
    assert stored == acked  # every acknowledged record, nothing else
