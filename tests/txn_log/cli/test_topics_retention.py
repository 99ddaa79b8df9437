"""``txnlog topics describe`` shows what retention did and the settings in force (issue 12
item 10): each partition's log start offset, segment count and size, the topic's retention.ms
and retention.bytes, and when a housekeeping pass last ran in this log directory."""

from __future__ import annotations

import json
from pathlib import Path

from tests.txn_log.cli.test_cli import snapshot, txnlog
from txn_log.clock import ManualClock
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("events", 0)


def test_describe_shows_the_moved_log_start_and_the_retention_in_force(tmp_path: Path) -> None:
    path = tmp_path / "log"
    clock = ManualClock()
    log = Log.open(path, clock=clock, housekeeping_interval_ms=None)
    log.create_topic(TP.topic, config={"segment.bytes": "700", "retention.bytes": "1"})
    log.create_topic("kept")
    producer = log.producer()
    for i in range(12):
        producer.send(TP.topic, b"%03d" % i * 100, partition=0)
        producer.flush()
    before = json.loads(txnlog("topics", "describe", path, TP.topic, "--json").stdout)
    assert before[0]["partitions"][0]["log_start_offset"] == 0
    assert before[0]["housekeeping"]["last_pass_ms"] is None
    result = log.run_housekeeping()
    start = result.partitions[TP].log_start_offset
    log.close()
    assert start > 0

    unchanged = snapshot(path)
    described = json.loads(txnlog("topics", "describe", path, "--json").stdout)
    by_topic = {entry["topic"]: entry for entry in described}
    (partition,) = by_topic[TP.topic]["partitions"]
    assert partition["log_start_offset"] == start and partition["log_end_offset"] == 12
    assert partition["segments"] == 1
    active = path / TP.directory_name / f"{start:020d}.log"
    assert partition["size_bytes"] == active.stat().st_size
    assert by_topic[TP.topic]["retention"] == {"retention.ms": 604_800_000, "retention.bytes": 1}
    assert by_topic["kept"]["retention"] == {"retention.ms": 604_800_000, "retention.bytes": -1}
    assert by_topic[TP.topic]["housekeeping"]["last_pass_ms"] == clock.time_ms()
    internal = json.loads(txnlog("topics", "describe", path, "__consumer_offsets", "--json").stdout)
    assert internal[0]["retention"] == {"retention.ms": -1, "retention.bytes": -1}  # CFG-18
    text = txnlog("topics", "describe", path, TP.topic).stdout
    assert "retention.bytes=1" in text and "retention.ms=604800000" in text
    assert "Last housekeeping pass (retention, log cleaner): " in text and "never" not in text
    assert snapshot(path) == unchanged  # describing changes nothing
