"""The cleaner on the compacted internal topics (C-02): ``__transaction_state`` and
``__consumer_offsets`` are cleaned like any compacted topic (keys are opaque bytes), and the
coordinator and the group offset store still read their state from the cleaned logs."""

from __future__ import annotations

from pathlib import Path

from tests.support import override_internal_config
from tests.txn_log.cli.test_cli import txnlog
from txn_log.clock import ManualClock
from txn_log.group.group_metadata import OffsetAndMetadata
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


def test_internal_topic_disk_follows_live_ids_not_history(tmp_path: Path) -> None:
    """C-02, C-10, B-18: with housekeeping passes along the way (a day apart, so markers pass
    delete.retention.ms), the internal topics' disk stays within a few segments while the
    history written grows to many times that, and the cleaned segments merge instead of piling
    up one file per roll. The state read back is the state written."""
    path = tmp_path / "log"
    clock = ManualClock()
    segment_bytes = 4096
    with Log.open(path, clock=clock, housekeeping_interval_ms=None) as log:
        log.create_topic(DATA.topic)
    override_internal_config(path, {"segment.bytes": str(segment_bytes)})
    with Log.open(path, clock=clock, housekeeping_interval_ms=None) as log:
        written = {tp: 0 for tp in _internal(log)}
        for _ in range(8):
            _run_transactions(log, 8)
            for tp in _internal(log):
                written[tp] = log.partition_log(tp).log_end_offset
            clock.advance(86_400_000 + 1)  # max.compaction.lag.ms and delete.retention.ms
            log.run_housekeeping()
        committed = log.committed(GROUP, [DATA])
        state = log.partition_log(TopicPartition(TRANSACTION_STATE_TOPIC, 0))
        history_bytes = state.log_end_offset * 60  # > 60 bytes a record, batch headers apart
        for tp in _internal(log):
            segments = log.partition_log(tp).segments
            size = sum(s.size for s in segments)
            assert size <= 3 * segment_bytes, (tp, size, [s.base_offset for s in segments])
            assert len(segments) <= 4, (tp, [s.base_offset for s in segments])
        assert history_bytes > 10 * segment_bytes  # what was written is far larger
    with Log.open(path, clock=clock, housekeeping_interval_ms=None) as log:
        # each call's round 7 is aborted: round 6's offset stays committed
        assert log.committed(GROUP, [DATA]) == committed == {DATA: OffsetAndMetadata(7)}
        _run_transactions(log, 1)  # the coordinator fences and bumps from the cleaned state
