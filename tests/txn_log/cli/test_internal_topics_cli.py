"""``txnlog produce`` refuses internal topics; ``txnlog verify`` decodes their records
(C-03, C-05/C-06, O-01; issue 12 item 5).

One undecodable record in ``__transaction_state`` breaks init_transactions() and every
read_committed read in every process; one in ``__consumer_offsets`` breaks committed(). So the
console producer must never write one, and verify must find one however it got there (it
cannot be repaired: verify never deletes records).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import directory_bytes
from tests.txn_log.cli.test_cli import txnlog
from txn_log.log import Log
from txn_log.record.codec import encode_records
from txn_log.record.control import ControlType
from txn_log.storage.file_names import LOG_SUFFIX, offset_file_name
from txn_log.storage.producer_append_info import AppendOrigin
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, INTERNAL_TOPICS, TRANSACTION_STATE_TOPIC
from txn_log.topic_partition import TopicPartition


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """A log with a committed transaction and group offsets in both internal topics."""
    path = tmp_path / "log"
    log = Log.open(path)
    log.create_topic("orders")
    producer = log.producer("committer")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("orders", b"v", partition=0)
    producer.send_offsets_to_transaction({TopicPartition("orders", 0): 1}, "billing")
    producer.commit_transaction()
    log.group_offsets.commit("plain", {TopicPartition("orders", 0): 1})
    log.close()
    return path


@pytest.mark.parametrize("topic", sorted(INTERNAL_TOPICS))
@pytest.mark.parametrize("transactional", [False, True], ids=["idempotent", "transactional"])
def test_produce_to_an_internal_topic_fails_and_writes_nothing(
    log_dir: Path, topic: str, transactional: bool
) -> None:
    before = directory_bytes(log_dir)
    options = ["--transactional-id", "console"] if transactional else []
    result = txnlog("produce", log_dir, topic, *options, stdin="oops\n")
    assert result.returncode != 0
    assert f"Cannot append to internal topic '{topic}'" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert directory_bytes(log_dir) == before
    assert txnlog("verify", log_dir).returncode == 0


def plant_junk(log_dir: Path, topic: str) -> tuple[Path, int, int]:
    """Append one batch holding an undecodable record as the coordinator would (the only
    writer left that can): returns the segment, the batch's file position and its offset."""
    log = Log.open(log_dir)
    plog = log.partition_log(TopicPartition(topic, 0))
    segment = plog.segments[-1]
    position = segment.size
    junk = encode_records([(None, b"oops", None, ())], now_ms=1_700_000_000_000)
    offset = plog.append(junk, sync=True, origin=AppendOrigin.COORDINATOR).base_offset
    log.close()
    return (
        log_dir / f"{topic}-0" / offset_file_name(segment.base_offset, LOG_SUFFIX),
        position,
        offset,
    )


@pytest.mark.parametrize("topic", [TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC])
def test_verify_reports_an_undecodable_internal_record_and_never_deletes_it(
    log_dir: Path, topic: str
) -> None:
    assert txnlog("verify", log_dir).returncode == 0
    segment, position, offset = plant_junk(log_dir, topic)
    for options in ([], ["--repair"]):
        before = segment.read_bytes()
        result = txnlog("verify", log_dir, "--json", *options)
        assert result.returncode == 1, result.stdout + result.stderr
        problems = json.loads(result.stdout)["problems"]
        assert len(problems) == 1, problems
        (problem,) = problems
        assert problem["file"] == str(segment) and problem["position"] == position
        assert f"record at offset {offset}" in problem["problem"]
        assert "without a key" in problem["problem"] or "key" in problem["problem"]
        assert not problem["repairable"]
        assert segment.read_bytes() == before
    text = txnlog("verify", log_dir)
    assert text.returncode == 1 and f"record at offset {offset}" in text.stdout


def test_verify_reports_a_transaction_marker_in_the_state_log(log_dir: Path) -> None:
    """The coordinator decodes every batch of ``__transaction_state``, markers included, so a
    marker there (a transaction that registered the partition and then aborted) breaks it."""
    log = Log.open(log_dir)
    plog = log.partition_log(TopicPartition(TRANSACTION_STATE_TOPIC, 0))
    position = plog.segments[-1].size
    marker = plog.append_marker(
        ControlType.ABORT, producer_id=4242, producer_epoch=0, coordinator_epoch=0
    )
    log.close()
    result = txnlog("verify", log_dir, "--json")
    assert result.returncode == 1
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["position"] == position and not problem["repairable"]
    assert f"transaction marker (control batch) at offset {marker.offset}" in problem["problem"]
