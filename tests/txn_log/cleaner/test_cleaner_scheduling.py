"""The background cleaner keeps up (issue 14 follow-up, C-02): a housekeeping pass cleans every
due compacted partition, dirtiest first (Kafka's LogCleanerManager), throttled by bytes (Kafka's
``log.cleaner.io.max.bytes.per.second``), the internal topics included even when the process never
opened them; and ``max.compaction.lag.ms`` rolls and cleans a quiet compacted partition."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.txn_log.cleaner.test_cleaner_internal_topics import DATA, _run_transactions
from txn_log.clock import ManualClock
from txn_log.errors import ConfigError, InvalidConfigError
from txn_log.file_lock import FileLock
from txn_log.log import Log
from txn_log.log_dir.housekeeping import HousekeepingPass
from txn_log.record.codec import iter_records
from txn_log.storage.cleaner_swap import CLEANER_LOCK_FILE
from txn_log.storage.throttler import Throttler, ThrottleStopped
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicConfig
from txn_log.topic_partition import TopicPartition

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


def _open(path: Path, clock: ManualClock) -> Log:
    return Log.open(path, clock=clock, housekeeping_interval_ms=None)


def _write_keyed(log: Log, topic: str, rounds: int, keys: int = 4) -> None:
    """``rounds`` batches, each a new value for every key; then roll, so they are cleanable."""
    producer = log.producer()
    for round_ in range(rounds):
        for key in range(keys):
            producer.send(topic, b"%d" % round_, key=b"k%d" % key, partition=0)
        producer.flush()
    log.partition_log(TopicPartition(topic, 0)).roll()


def _values(log: Log, topic: str) -> dict[bytes, bytes]:
    reader = log.partition_reader(TopicPartition(topic, 0))
    out: dict[bytes, bytes] = {}
    for _, batch in reader.read(reader.log_start_offset):
        for record in iter_records(batch):
            if record.key is not None and record.value is not None:
                out[record.key] = record.value
    return out


def test_c02_one_pass_cleans_every_due_partition_dirtiest_first(tmp_path: Path) -> None:
    """Three compacted topics: "fresh" never cleaned (dirty ratio 1.0), "half" cleaned once and
    then as much again written (ratio ~0.5..0.7), "calm" cleaned and barely touched since (below
    min.cleanable.dirty.ratio). One pass cleans fresh then half, and leaves calm."""
    clock = ManualClock()
    with _open(tmp_path / "log", clock) as log:
        for name in ("calm", "half", "fresh"):
            log.create_topic(name, config={"cleanup.policy": "compact"})
        for name in ("calm", "half"):
            _write_keyed(log, name, 30)
        log.log_manager.clean()  # both cleaned once: ratio 0 now
        _write_keyed(log, "half", 30)
        _write_keyed(log, "calm", 1)
        _write_keyed(log, "fresh", 30)
        before = {name: _values(log, name) for name in ("calm", "half", "fresh")}
        done = log.run_housekeeping()
        assert done.ran
        cleaned = [s.topic_partition for s in done.cleaned]
        assert cleaned[:2] == ["fresh-0", "half-0"], cleaned
        assert "calm-0" not in cleaned
        ratios = [s.dirty_ratio for s in done.cleaned]
        assert ratios == sorted(ratios, reverse=True)
        assert all(s.records_removed > 0 for s in done.cleaned[:2])
        assert {name: _values(log, name) for name in before} == before  # newest per key kept
        assert not [s for s in log.run_housekeeping().cleaned if s.segments_cleaned]


def test_c02_internal_topics_are_cleaned_by_a_process_that_never_opened_them(
    tmp_path: Path,
) -> None:
    """Housekeeping visits the internal topics of any writable log, not only the partitions this
    process happened to open: a process that only opens the log still cleans them."""
    path = tmp_path / "log"
    clock = ManualClock()
    with _open(path, clock) as log:
        log.create_topic(DATA.topic)
        _run_transactions(log, 12)
        for topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            log.partition_log(TopicPartition(topic, 0)).roll()
    with _open(path, clock) as log:
        done = log.run_housekeeping()
        cleaned = {s.topic_partition for s in done.cleaned if s.segments_cleaned}
    assert f"{TRANSACTION_STATE_TOPIC}-0" in cleaned, done


def test_throttler_keeps_the_byte_rate_at_its_limit() -> None:
    """Kafka's Throttler: after N bytes at a limit of R bytes/s, at least N/R seconds passed
    (measured on an injected clock: the throttler sleeps the difference)."""
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> bool:
        slept.append(seconds)
        now[0] += seconds
        return False

    throttler = Throttler(1_000_000, monotonic=lambda: now[0], sleep=sleep)
    for _ in range(100):
        throttler.maybe_throttle(100_000)  # 10 MB at 1 MB/s with no time spent working
    assert 9.5 <= now[0] <= 10.0, now[0]
    assert slept and all(s > 0 for s in slept)
    now[0] += 100.0  # a long idle stretch is not credited as a burst allowance
    throttler.maybe_throttle(2_000_000)
    assert now[0] >= 110.0 + 1.5


def test_a_throttled_pass_cleans_at_the_configured_byte_rate(tmp_path: Path) -> None:
    """The cleaner reports what it reads and writes to the throttler: a cleaning of S bytes of
    segments is charged at least S bytes, so a rate of R bytes/s stretches it to >= S/R s."""
    clock = ManualClock()
    with _open(tmp_path / "log", clock) as log:
        log.create_topic("t", config={"cleanup.policy": "compact"})
        _write_keyed(log, "t", 40)
        size = sum(s.size for s in log.partition_log(TopicPartition("t", 0)).segments[:-1])
        now = [0.0]

        def sleep(seconds: float) -> bool:
            now[0] += seconds
            return False

        throttler = Throttler(1000, monotonic=lambda: now[0], sleep=sleep)
        stats = log.log_manager.clean("t", throttler=throttler)
    assert stats[0].segments_cleaned == (0,)
    assert now[0] >= size / 1000 * 0.9, (now[0], size)


def test_closing_the_log_interrupts_a_throttled_cleaning_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """``Log.close`` never waits for a throttled cleaning: closing wakes the throttler, the
    cleaning gives up before its swap, and every record is still there; it cleans later."""
    clock = ManualClock()
    path = tmp_path / "log"
    with _open(path, clock) as log:
        log.create_topic("t", config={"cleanup.policy": "compact"})
        _write_keyed(log, "t", 40)
        before = _values(log, "t")
    log = Log.open(
        path, clock=clock, housekeeping_interval_ms=None, cleaner_io_max_bytes_per_second=1
    )  # fmt: skip  (would take hours)
    log.partition_log(TopicPartition("t", 0))
    outcome: list[HousekeepingPass] = []
    runner = threading.Thread(target=lambda: outcome.append(log.run_housekeeping()))
    runner.start()
    probe = FileLock(path / "t-0" / CLEANER_LOCK_FILE)
    while probe.try_acquire():  # free until the pass's cleaner takes it
        probe.release()
        runner.join(0.01)
        assert runner.is_alive(), "the pass ended without cleaning"
    probe.close()
    log.close()
    runner.join()
    (done,) = outcome
    assert done.ran and not [s for s in done.cleaned if s.segments_cleaned]
    with _open(path, clock) as log:
        assert _values(log, "t") == before
        assert log.log_manager.clean("t")[0].segments_cleaned == (0,)  # it cleans later
        assert _values(log, "t") == before


def test_throttle_stopped_is_raised_when_the_stop_event_is_set() -> None:
    stop = threading.Event()
    stop.set()
    throttler = Throttler(1.0, stop=stop)
    try:
        throttler.maybe_throttle(10)
    except ThrottleStopped:
        return
    raise AssertionError("a stopped throttler let the cleaner go on")


# --- max.compaction.lag.ms: a quiet compacted partition rolls and gets cleaned ------------------


def test_max_compaction_lag_ms_parses_and_bounds_the_roll_time() -> None:
    """Kafka's LogConfig.maxSegmentMs: a compacted topic rolls by min(segment.ms,
    max.compaction.lag.ms); a topic without compact ignores the lag."""
    default = TopicConfig()
    assert default.max_compaction_lag_ms == 2**63 - 1
    assert default.max_segment_ms == default.segment_ms
    lagged = TopicConfig.from_mapping(
        {"cleanup.policy": "compact", "max.compaction.lag.ms": str(HOUR_MS)}
    )
    assert lagged.max_segment_ms == HOUR_MS
    not_compact = TopicConfig.from_mapping({"max.compaction.lag.ms": str(HOUR_MS)})
    assert not_compact.max_segment_ms == not_compact.segment_ms
    assert TopicConfig.from_mapping(lagged.to_mapping()) == lagged


def test_internal_topics_default_to_a_one_day_compaction_lag(tmp_path: Path) -> None:
    with _open(tmp_path / "log", ManualClock()) as log:
        for topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            config = log.topic_config(topic)
            assert config.max_compaction_lag_ms == DAY_MS
            assert config.max_segment_ms == DAY_MS


def test_a_quiet_compacted_partition_rolls_and_is_cleaned_past_max_compaction_lag(
    tmp_path: Path,
) -> None:
    """A compacted topic with large segments and no new appends: before the lag nothing is
    cleanable (all in the active segment); once its first batch is older than
    max.compaction.lag.ms, a pass rolls the active segment and cleans it, the second time
    below min.cleanable.dirty.ratio (dirty data past the lag must be cleaned, KIP-354)."""
    clock = ManualClock()
    topic = TopicPartition("quiet", 0)
    with _open(tmp_path / "log", clock) as log:
        log.create_topic(topic.topic, config={
            "cleanup.policy": "compact", "max.compaction.lag.ms": str(HOUR_MS),
            "min.cleanable.dirty.ratio": "1.0",
        })  # fmt: skip
        partition = log.partition_log(topic)
        producer = log.producer()

        def write(values: range) -> None:
            for value in values:
                producer.send(topic.topic, b"%d" % value, key=b"k", partition=0)
                producer.flush()

        def pass_cleaned() -> list[str]:
            done = log.run_housekeeping()
            return [s.topic_partition for s in done.cleaned if s.segments_cleaned]

        def records() -> list[tuple[bytes | None, bytes | None]]:
            return [(r.key, r.value) for _, b in partition.read(0) for r in iter_records(b)]

        write(range(20))
        clock.advance(HOUR_MS - 1000)
        assert pass_cleaned() == [] and len(partition.segments) == 1
        clock.advance(2000)
        assert pass_cleaned() == ["quiet-0"] and len(partition.segments) == 2
        assert records() == [(b"k", b"19")]
        write(range(20, 40))
        clock.advance(HOUR_MS + 1)
        # rolled again; the two closed segments are cleaned into one (merged)
        assert pass_cleaned() == ["quiet-0"] and len(partition.segments) == 2
        assert records() == [(b"k", b"39")]
        clock.advance(2 * HOUR_MS)  # the new active segment is empty: nothing to roll
        assert pass_cleaned() == [] and len(partition.segments) == 2


def test_an_append_to_a_compacted_topic_rolls_past_max_compaction_lag(tmp_path: Path) -> None:
    clock = ManualClock()
    topic = TopicPartition("lagged", 0)
    with _open(tmp_path / "log", clock) as log:
        log.create_topic(topic.topic, config={
            "cleanup.policy": "compact", "max.compaction.lag.ms": str(HOUR_MS),
        })  # fmt: skip
        producer = log.producer()
        producer.send(topic.topic, b"1", key=b"k", partition=0)
        producer.flush()
        clock.advance(HOUR_MS + 1)
        producer.send(topic.topic, b"2", key=b"k", partition=0)
        producer.flush()
        assert len(log.partition_log(topic).segments) == 2


@pytest.mark.parametrize("rate", [0, -5, "fast", True])
def test_a_bad_cleaner_io_rate_is_refused_naming_the_option(tmp_path: Path, rate: object) -> None:
    with pytest.raises(ConfigError, match="cleaner_io_max_bytes_per_second") as caught:
        Log.open(tmp_path / "log", cleaner_io_max_bytes_per_second=rate)  # type: ignore[arg-type]
    assert "positive number of bytes per second" in str(caught.value)
    assert not (tmp_path / "log").exists()  # refused before anything was created


def test_a_bad_max_compaction_lag_is_refused_naming_the_option() -> None:
    with pytest.raises(InvalidConfigError, match=r"max\.compaction\.lag\.ms") as caught:
        TopicConfig.from_mapping({"max.compaction.lag.ms": "0"})
    assert "the minimum is 1" in str(caught.value)
