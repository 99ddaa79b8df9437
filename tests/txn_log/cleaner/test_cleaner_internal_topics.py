"""The cleaner on the compacted internal topics (C-02): ``__transaction_state`` and
``__consumer_offsets`` are cleaned like any compacted topic (keys are opaque bytes), and the
coordinator and the group offset store still read their state from the cleaned logs."""

from __future__ import annotations

from pathlib import Path

from tests.txn_log.cli.test_cli import txnlog
from txn_log.clock import ManualClock
from txn_log.log import Log
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from txn_log.topic_partition import TopicPartition

DATA = TopicPartition("data", 0)
GROUP = "group"
IDS = ["t0", "t1", "t2"]


def _internal(log: Log) -> list[TopicPartition]:
    return [tp for topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC)
            for tp in log.partitions(topic)]  # fmt: skip


def _run_transactions(log: Log, rounds: int) -> None:
    producers = {tid: log.producer(tid) for tid in IDS}
    for producer in producers.values():
        producer.init_transactions()
    for round_ in range(rounds):
        for tid, producer in producers.items():
            producer.begin_transaction()
            producer.send(DATA.topic, b"%s:%d" % (tid.encode(), round_), partition=0)
            producer.send_offsets_to_transaction({DATA: round_ + 1}, GROUP)
            if round_ % 4 == 3:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    for producer in producers.values():
        producer.close()


def test_c02_internal_topics_are_cleaned_and_state_survives(tmp_path: Path) -> None:
    path = tmp_path / "log"
    clock = ManualClock()
    with Log.open(path, clock=clock, housekeeping_interval_ms=None) as log:
        log.create_topic(DATA.topic)
        _run_transactions(log, 12)
        committed_before = log.committed(GROUP, [DATA])
        for tp in _internal(log):
            log.partition_log(tp).roll()  # the active segment is never cleaned
        sizes_before = {tp: sum(s.size for s in log.partition_log(tp).segments)
                        for tp in _internal(log)}  # fmt: skip
        stats = log.log_manager.clean()
        cleaned = {s.topic_partition for s in stats if s.segments_cleaned}
        assert str(TopicPartition(TRANSACTION_STATE_TOPIC, 0)) in cleaned
        sizes_after = {tp: sum(s.size for s in log.partition_log(tp).segments)
                       for tp in _internal(log)}  # fmt: skip
        assert sum(sizes_after.values()) < sum(sizes_before.values()) / 2
    verified = txnlog("verify", path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    with Log.open(path, clock=clock, housekeeping_interval_ms=None) as log:
        assert log.committed(GROUP, [DATA]) == committed_before
        _run_transactions(log, 1)  # the coordinator fences and bumps from the cleaned state
        values = [r.value for r in log.consumer().read(DATA, 0)]
    expected = [b"%s:%d" % (t.encode(), r) for r in range(12) for t in IDS if r % 4 != 3]
    assert values == [*expected, *(b"%s:0" % t.encode() for t in IDS)]
