"""Housekeeping of a writable Log: retention (T-10, B-09) and producer-id expiration (P-26..P-28,
G-18), run on demand here; the background thread and other processes are in
``processes/test_housekeeping_processes.py``."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

from txn_log.clock import ManualClock
from txn_log.errors import OffsetOutOfRangeError, OutOfOrderSequenceError
from txn_log.log import Log
from txn_log.record.codec import decode_batch, encode_batch
from txn_log.storage.partition_log import PartitionLog
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("events", 0)
DAY_MS = 86_400_000
MINUTE_MS = 60_000


def open_log(path: Path, clock: ManualClock) -> Log:
    """A writable log whose housekeeping runs only when a test asks (no background thread)."""
    return Log.open(path, clock=clock, housekeeping_interval_ms=None)


def send_values(log: Log, count: int, *, size: int = 100, prefix: str = "v") -> None:
    producer = log.producer()
    for i in range(count):
        producer.send(TP.topic, f"{prefix}{i}".encode().ljust(size, b"."), partition=0)
        producer.flush()  # one batch each, so small segments roll often


def segment_bases(directory: Path, suffix: str = ".log") -> list[int]:
    return sorted(int(p.name[:20]) for p in directory.glob(f"*{suffix}"))


def raw_batch(producer_id: int, sequence: int, now_ms: int) -> bytes:
    return encode_batch(
        pa.record_batch([pa.array([b"late"], pa.binary())], names=["value"]),
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        now_ms=now_ms,
    )


# --- retention (T-10, B-09) --------------------------------------------------------------------


def test_on_demand_pass_deletes_segments_whose_newest_record_is_past_retention_ms(
    tmp_path: Path,
) -> None:
    """T-10: retention.ms judges a segment by its newest record; B-09: its .txnindex goes too."""
    clock = ManualClock()
    log = open_log(tmp_path / "log", clock)
    log.create_topic(TP.topic, config={"segment.bytes": "500", "retention.ms": str(MINUTE_MS)})
    aborter = log.producer("aborter")
    aborter.init_transactions()
    aborter.begin_transaction()
    aborter.send(TP.topic, b"aborted".ljust(100, b"."), partition=0)
    aborter.flush()
    aborter.abort_transaction()  # an entry in the .txnindex of an old segment
    send_values(log, 8, prefix="old")
    directory = tmp_path / "log" / TP.directory_name
    old_txn_indexes = segment_bases(directory, ".txnindex")
    assert old_txn_indexes, "the abort should have written a .txnindex"
    clock.advance(MINUTE_MS + 1)
    send_values(log, 4, prefix="new")
    partition = log.partition_log(TP)
    expired = [s.base_offset for s in partition.segments[:-1] if s.max_timestamp is not None
               and clock.time_ms() - s.max_timestamp > MINUTE_MS]  # fmt: skip
    kept = [s.base_offset for s in partition.segments if s.base_offset not in expired]
    assert expired and len(kept) >= 2

    result = log.run_housekeeping()

    assert result.ran
    assert list(result.partitions[TP].deleted_segments) == expired
    assert segment_bases(directory) == kept
    for suffix in (".index", ".timeindex", ".txnindex"):
        assert not set(segment_bases(directory, suffix)) & set(expired), suffix
    assert partition.log_start_offset == kept[0]
    with pytest.raises(OffsetOutOfRangeError, match=rf"\[{kept[0]}, "):
        list(partition.read(0))
    values = [r.value for r in log.consumer().read(TP, kept[0])]
    assert values[-4:] == [f"new{i}".encode().ljust(100, b".") for i in range(4)]
    log.close()


def test_retention_bytes_never_deletes_an_open_transaction_or_the_active_segment(
    tmp_path: Path,
) -> None:
    """B-03/B-04: the data of an open transaction stays until it is decided (the LSO never falls
    below the log start); then retention.bytes=1 leaves only the active segment."""
    clock = ManualClock()
    log = open_log(tmp_path / "log", clock)
    log.create_topic(TP.topic, config={"segment.bytes": "500", "retention.bytes": "1"})
    send_values(log, 6, prefix="before")
    producer = log.producer("open-txn")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(TP.topic, b"pending".ljust(100, b"."), partition=0)
    producer.flush()
    partition = log.partition_log(TP)
    first_unstable = partition.last_stable_offset
    send_values(log, 6, prefix="after")

    log.run_housekeeping()

    assert partition.log_start_offset <= first_unstable == partition.last_stable_offset
    assert len(partition.segments) > 1
    producer.commit_transaction()
    result = log.run_housekeeping()
    assert len(partition.segments) == 1
    assert result.partitions[TP].log_start_offset == partition.segments[0].base_offset
    assert segment_bases(tmp_path / "log" / TP.directory_name) == [partition.log_start_offset]
    log.close()


def test_a_retention_pass_does_not_disturb_readers_iterating_the_deleted_segments(
    tmp_path: Path,
) -> None:
    """Readers take no lock: a thread in the middle of a deleted segment reads it to the end."""
    clock = ManualClock()
    log = open_log(tmp_path / "log", clock)
    log.create_topic(TP.topic, config={"segment.bytes": "500", "retention.bytes": "1"})
    send_values(log, 30)
    partition = log.partition_log(TP)
    expected = [v for _, data in partition.read(0) for v in _values(data)]
    started = threading.Barrier(4)
    deleted = threading.Event()
    results: dict[int, list[bytes]] = {}
    errors: list[BaseException] = []

    def read(reader: int) -> None:
        try:
            seen: list[bytes] = []
            batches = partition.read(0)
            _, data = next(batches)
            seen.extend(_values(data))
            started.wait(timeout=10)
            deleted.wait(timeout=10)
            for _, data in batches:
                seen.extend(_values(data))
            results[reader] = seen
        except BaseException as error:  # report it in the main thread
            errors.append(error)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    started.wait(timeout=10)
    result = log.run_housekeeping()
    deleted.set()
    for thread in threads:
        thread.join(timeout=10)
    assert not errors, errors
    assert len(result.partitions[TP].deleted_segments) > 5
    assert results == {i: expected for i in range(3)}
    log.close()


def _values(data: memoryview) -> list[bytes]:
    return [bytes(v) for v in decode_batch(data).records.column("value").to_pylist()]


def test_a_writer_that_fell_behind_retention_appends_at_the_true_log_end(tmp_path: Path) -> None:
    """A process whose newest known segment was deleted by another's retention must not append
    into the deleted file (acknowledged, then lost) nor reuse offsets."""
    clock = ManualClock()
    behind = open_log(tmp_path / "log", clock)  # stands for another process: its own caches
    behind.create_topic(TP.topic, config={"segment.bytes": "500", "retention.bytes": "1"})
    send_values(behind, 2, prefix="first")
    behind.partition_log(TP)  # cached: its active segment is segment 0
    ahead = open_log(tmp_path / "log", clock)
    send_values(ahead, 20, prefix="second")
    assert ahead.run_housekeeping().partitions[TP].deleted_segments[0] == 0
    end = ahead.partition_log(TP).log_end_offset

    producer = behind.producer()
    producer.send(TP.topic, b"acknowledged", partition=0)
    producer.flush()

    fresh = open_log(tmp_path / "log", clock)
    plog = fresh.partition_log(TP)
    assert plog.log_end_offset == end + 1
    last = [v for _, data in plog.read(end) for v in _values(data)]
    assert last == [b"acknowledged"]
    assert behind.partition_log(TP).log_start_offset == plog.log_start_offset
    for log in (behind, ahead, fresh):
        log.close()


# --- producer-id expiration (P-26, P-27, P-28, G-18) -------------------------------------------


def test_idle_producers_expire_alike_in_every_process_and_after_reopening(tmp_path: Path) -> None:
    """P-26/P-27: a producer idle for producer.id.expiration.ms (Kafka's 1 day) is forgotten,
    its records stay; P-28/G-18: its next sequence is then refused as out of order, by every
    process (each a separate cache here) whether or not its own periodic pass has run yet."""
    clock = ManualClock()
    writer = open_log(tmp_path / "log", clock)
    writer.create_topic(TP.topic)
    idle = writer.producer()
    idle.send(TP.topic, b"once", partition=0)
    idle.flush()
    idle_id = writer.partition_log(TP).producer_state.active_producers().keys()
    (idle_id,) = list(idle_id)
    other = open_log(tmp_path / "log", clock)  # another process, caught up, never runs a pass
    assert idle_id in other.partition_log(TP).producer_state.active_producers()
    clock.advance(DAY_MS)
    active = writer.producer()
    active.send(TP.topic, b"recent", partition=0)
    active.flush()

    result = writer.run_housekeeping()

    assert result.partitions[TP].expired_producers == (idle_id,)
    reopened = open_log(tmp_path / "log", clock)
    assert idle_id not in reopened.partition_log(TP).producer_state.active_producers()
    assert len(reopened.partition_log(TP).producer_state.active_producers()) == 1
    for log in (writer, other, reopened):
        with pytest.raises(OutOfOrderSequenceError, match=str(idle_id)):
            log.partition_log(TP).append(raw_batch(idle_id, 1, clock.time_ms()))
    assert [v for _, d in reopened.partition_log(TP).read(0) for v in _values(d)] == [
        b"once",
        b"recent",
    ]  # P-27: the records of an expired producer stay in the log
    for log in (writer, other, reopened):
        log.close()


def test_a_producer_writing_old_timestamps_is_not_expired_while_it_writes(tmp_path: Path) -> None:
    """Record timestamps are the client's (CreateTime): an old one must not expire a producer
    whose batches just arrived, or its next batch would be refused (P-28)."""
    clock = ManualClock()
    log = open_log(tmp_path / "log", clock)
    log.create_topic(TP.topic)
    producer = log.producer()
    for i in range(3):
        producer.send(TP.topic, b"backfill%d" % i, partition=0, timestamp_ms=1_000 + i)
        producer.flush()
    assert log.run_housekeeping().partitions[TP].expired_producers == ()
    producer.send(TP.topic, b"backfill3", partition=0, timestamp_ms=1_003)
    producer.flush()
    log.close()


def test_housekeeping_is_refused_on_a_read_only_log(tmp_path: Path) -> None:
    clock = ManualClock()
    open_log(tmp_path / "log", clock).create_topic(TP.topic)
    inspector = Log.open(tmp_path / "log", read_only=True)
    with pytest.raises(Exception, match="read-only"):
        inspector.run_housekeeping()
    assert isinstance(open_log(tmp_path / "log", clock).partition_log(TP), PartitionLog)


def test_retention_never_deletes_the_internal_topics(tmp_path: Path) -> None:
    """CFG-18: __transaction_state (transactional ids, the batch ledger) and __consumer_offsets
    are replayed from their first offset (Kafka compacts them): time retention must not delete
    their segments, though segment.ms rolls them like any topic."""
    clock = ManualClock()
    log = open_log(tmp_path / "log", clock)
    log.create_topic(TP.topic)
    week = 7 * DAY_MS
    for round_ in range(3):  # each round rolls every partition written (segment.ms is 7 days)
        if round_:
            clock.advance(week + 1)
        producer = log.producer("copier")
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(TP.topic, b"x", partition=0)
        producer.send_offsets_to_transaction({TP: 1}, "group")
        producer.commit_transaction()
    result = log.run_housekeeping()
    internal = {tp: r for tp, r in result.partitions.items() if tp.topic.startswith("__")}
    assert {tp.topic for tp in internal} == {"__transaction_state", "__consumer_offsets"}
    for tp, outcome in internal.items():
        assert outcome.deleted_segments == () and outcome.log_start_offset == 0, tp
        assert len(log.partition_log(tp).segments) > 1, tp
    assert result.partitions[TP].deleted_segments  # an ordinary topic with the same history
    reopened = open_log(tmp_path / "log", clock)
    assert reopened.committed("group", [TP])[TP] is not None
    again = reopened.producer("copier")
    again.init_transactions()  # the transactional id is still known: same producer id
    assert again.producer_id == producer.producer_id
    for opened in (log, reopened):
        opened.close()
