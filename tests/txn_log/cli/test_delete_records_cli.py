"""``txnlog delete-records`` (Kafka's ``kafka-delete-records --offset-json-file``) and what
``txnlog verify`` says of the log start checkpoint it writes (issue 25 item 7)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.txn_log.cli.test_cli import txnlog
from txn_log.log import Log
from txn_log.storage.log_start_checkpoint import CHECKPOINT_FILE, encode_log_start, read_log_start
from txn_log.topic_partition import TopicPartition

O0, O1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def make_log(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic("orders", 2)
        producer = log.producer()
        for i in range(6):
            producer.send("orders", b"v%d" % i, partition=i % 2)
        producer.close()
    return path


def offsets_file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "offsets.json"
    path.write_text(json.dumps(document))
    return path


def test_it_moves_each_partition_start_and_prints_the_low_watermarks(tmp_path: Path) -> None:
    log_dir = make_log(tmp_path)
    asked = offsets_file(tmp_path, {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "offset": 2},
        {"topic": "orders", "partition": 1, "offset": -1},
    ]})  # fmt: skip
    done = txnlog("delete-records", log_dir, "--offset-json-file", asked)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "TOPIC   PARTITION  LOW_WATERMARK  ERROR",
        "orders  0          2              None",
        "orders  1          3              None",
    ]
    with Log.open(log_dir, read_only=True) as log:
        assert log.partition_reader(O0).log_start_offset == 2
        assert log.partition_reader(O1).log_start_offset == 3
    assert txnlog("verify", log_dir).stdout.startswith("OK:")


def test_refused_partitions_are_reported_each_and_fail_the_command(tmp_path: Path) -> None:
    log_dir = make_log(tmp_path)
    asked = offsets_file(tmp_path, {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "offset": 99},
        {"topic": "orders", "partition": 7, "offset": 1},
        {"topic": "__consumer_offsets", "partition": 0, "offset": 0},
        {"topic": "orders", "partition": 1, "offset": 1},
    ]})  # fmt: skip
    done = txnlog("delete-records", log_dir, "--offset-json-file", asked, "--json")
    assert done.returncode == 1
    rows = {(r["topic"], r["partition"]): r for r in json.loads(done.stdout)["partitions"]}
    assert rows["orders", 0]["error"].startswith("OffsetOutOfRangeError: orders-0: cannot "
                                                 "delete records before offset 99")  # fmt: skip
    assert rows["orders", 7]["error"].startswith("UnknownTopicOrPartitionError")
    assert rows["__consumer_offsets", 0]["error"].startswith("InvalidTopicError")
    assert [rows[k]["low_watermark"] for k in sorted(rows)] == [-1, -1, 1, -1]


def test_a_malformed_file_is_a_usage_error_that_changes_nothing(tmp_path: Path) -> None:
    log_dir = make_log(tmp_path)
    twice = {"topic": "orders", "partition": 0, "offset": 1}
    for document, problem in [
        ({"partitions": []}, "no version field"),
        ({"version": 2, "partitions": []}, "unsupported version 2"),
        ({"version": 1, "partitions": [twice, twice]}, "listed more than once: orders-0"),
        ({"version": 1, "partitions": [{"topic": "orders", "offset": 1}]}, "bad entry"),
    ]:
        done = txnlog("delete-records", log_dir, "--offset-json-file",
                      offsets_file(tmp_path, document))  # fmt: skip
        assert done.returncode == 2
        assert problem in done.stderr and '"version": 1' in done.stderr, done.stderr
    assert not (log_dir / "orders-0" / CHECKPOINT_FILE).exists()


def test_verify_reports_a_checkpoint_past_the_log_end_and_repair_lowers_it(
    tmp_path: Path,
) -> None:
    log_dir = make_log(tmp_path)
    checkpoint = log_dir / "orders-0" / CHECKPOINT_FILE
    checkpoint.write_bytes(encode_log_start(50))
    found = txnlog("verify", log_dir, "--json")
    assert found.returncode == 1
    [problem] = json.loads(found.stdout)["problems"]
    assert problem["file"] == str(checkpoint) and problem["repairable"]
    assert "log start offset 50 (DeleteRecords) lies past the log end 3" in problem["problem"]
    repaired = txnlog("verify", log_dir, "--json", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert any("lowered it to the log end" in line
               for line in json.loads(repaired.stdout)["repaired"])  # fmt: skip
    assert read_log_start(checkpoint.parent) == 3


def test_verify_reports_an_unreadable_checkpoint_and_repair_leaves_it_to_the_operator(
    tmp_path: Path,
) -> None:
    log_dir = make_log(tmp_path)
    checkpoint = log_dir / "orders-1" / CHECKPOINT_FILE
    checkpoint.write_bytes(encode_log_start(2)[:-1] + b"\x00")
    for extra in ((), ("--repair",)):
        found = txnlog("verify", log_dir, "--json", *extra)
        assert found.returncode == 1
        [problem] = json.loads(found.stdout)["problems"]
        assert problem["file"] == str(checkpoint) and not problem["repairable"]
        assert "where DeleteRecords moved the log start is unknown" in problem["problem"]
    assert checkpoint.read_bytes()[-1:] == b"\x00"
