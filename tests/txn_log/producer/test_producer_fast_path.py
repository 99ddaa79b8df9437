"""``send()``'s common case (issue 27): a record that joins a partition's open buffer is sized
inline and buffered without a per-record object; these tests hold it to what the general path
does (F-09, F-16, F-17, F-23, C-25): exact sizes, round-robin order, the transaction timeout
and metadata refresh it must not skip, the precomputed send window it compares its clock
reading with, the live lists it finds buffers in, the peak of buffered bytes it no longer
tracks per record, and the partitioner's remembered hashes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from txn_log import partitioner
from txn_log.clock import ManualClock
from txn_log.errors import ProducerFencedError, TxnLogError
from txn_log.log import Log
from txn_log.partitioner import partition_for_key
from txn_log.producer.producer import Producer
from txn_log.producer.producer_batch import PartitionBuffer
from txn_log.producer.producer_record import records_section_size
from txn_log.producer.transaction_manager import State
from txn_log.record.batch_header import HEADER_SIZE
from txn_log.topic_partition import TopicPartition

START_MS = 1_700_000_000_000

blobs = st.one_of(
    st.none(),
    st.binary(max_size=80),
    st.integers(min_value=0, max_value=20_000).map(lambda n: b"x" * n),
)
sends = st.lists(
    st.tuples(
        blobs,  # key
        blobs,  # value
        st.one_of(st.none(), st.integers(min_value=0, max_value=1)),  # partition
        st.one_of(  # timestamp: now, near the batch's first (either side), or far
            st.none(),
            st.integers(min_value=START_MS - 10_000, max_value=START_MS + 10_000),
            st.integers(min_value=0, max_value=2**62),
        ),
        st.integers(min_value=0, max_value=70),  # ms the clock moves before the send
        st.booleans(),  # a header
    ),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sends)
def test_every_buffer_size_is_exactly_what_its_batch_encodes(tmp_path: Path, plan: list) -> None:
    """After every send the buffer's size is its records section's exact size, and the batch
    it makes is that many bytes after the header: the common case's inline varint sizes are
    the encoder's (F-16, F-17, F-23), for keys and values around the 1- and 2-byte varint
    bounds, timestamps before the batch's first, and records that leave batch.size."""
    clock = ManualClock(START_MS)
    with Log.open(tmp_path / f"log{len(list(tmp_path.iterdir()))}", clock=clock) as log:
        log.create_topic("t", partitions=2)
        producer = log.producer(batch_size=30_000)
        accumulator = producer._accumulator
        for key, value, partition, stamp, advance, header in plan:
            clock.advance(advance)
            tp = producer.send(
                "t",
                value,
                key=key,
                partition=partition,
                timestamp_ms=stamp,
                headers=[("h", b"1")] if header else None,
            )
            buffer = accumulator.buffer(tp)
            assert isinstance(buffer, PartitionBuffer)
            records = [buffer.record(i) for i in range(buffer.count)]
            assert buffer.size == records_section_size(records)
            assert buffer.size <= 30_000 or buffer.count == 1
            batch = buffer.encode_head(buffer.count, now_ms=clock.time_ms())
            assert len(batch) == HEADER_SIZE + buffer.size
        producer.flush()
        read = [r.value for p in (0, 1) for r in log.consumer().read(TopicPartition("t", p), 0)]
        assert sorted(read, key=repr) == sorted((v for _, v, *_ in plan), key=repr)


def test_null_keys_go_round_robin_whichever_path_buffers_them(tmp_path: Path) -> None:
    """Round-robin takes the next partition only for a record it buffers: a record the common
    case hands to the general path (its partition's buffer just left) gets the partition the
    common case picked, not the one after it."""
    with Log.open(tmp_path / "log", clock=ManualClock(START_MS)) as log:
        log.create_topic("t", partitions=3)
        producer = log.producer(batch_size=200)  # a buffer leaves every few records
        chosen = [producer.send("t", b"v" * 40).partition for _ in range(60)]
        assert chosen == [i % 3 for i in range(60)]
        producer.flush()


def test_a_send_past_the_transaction_timeout_is_refused_even_into_an_open_buffer(
    tmp_path: Path,
) -> None:
    """C-25: once the transaction is past transaction.timeout.ms, the next send asks the
    coordinator, which aborts it with an epoch bump: the common case must not buffer the
    record into the partition's open buffer instead."""
    clock = ManualClock(START_MS)
    with Log.open(tmp_path / "log", clock=clock) as log:
        log.create_topic("t", partitions=1)
        producer = log.producer("tx", transaction_timeout_ms=1_000)
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"a", partition=0)
        producer.flush()  # registers the partition: the transaction's clock starts
        producer.send("t", b"b", partition=0)  # opens the buffer again
        producer.send("t", b"c", partition=0)  # the common case
        clock.advance(1_001)
        with pytest.raises(ProducerFencedError):
            producer.send("t", b"d", partition=0)
        with pytest.raises(TxnLogError):
            producer.commit_transaction()
        assert list(log.consumer("read_committed").read(TopicPartition("t", 0), 0)) == []


def test_new_partitions_are_used_once_the_metadata_is_old(tmp_path: Path) -> None:
    """Kafka's metadata.max.age.ms: the common case uses the partition count it read only
    while it is fresh; after that, round-robin spreads over the partitions added meanwhile."""
    clock = ManualClock(START_MS)
    with Log.open(tmp_path / "log", clock=clock) as log:
        log.create_topic("t", partitions=1)
        producer = log.producer(metadata_max_age_ms=1_000)
        for _ in range(3):
            producer.send("t", b"v")
        log.create_partitions("t", 2)
        clock.advance(1_001)
        chosen = {producer.send("t", b"v").partition for _ in range(4)}
        assert chosen == {0, 1}
        producer.flush()


def test_remembered_key_hashes_give_kafkas_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The partitioner remembers recent keys' hashes; a remembered key, a key seen again after
    the memory was emptied, and a bytearray key (never remembered) all land where Kafka's
    murmur2 puts them."""
    monkeypatch.setattr(partitioner, "_HASHES_MAX", 8)
    monkeypatch.setattr(partitioner, "_HASHES", {})
    keys = [f"key-{i}".encode() for i in range(20)]
    for _ in range(3):  # the first pass fills and empties the memory twice
        for key in keys:
            for partitions in (1, 7, 12):
                want = (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
                assert partition_for_key(key, partitions) == want
                assert partition_for_key(bytearray(key), partitions) == want
    assert 0 < len(partitioner._HASHES) <= 8


def general_checks_pass(producer: Producer, now_ms: int) -> bool:
    """What ``send()``'s general path asks of the transaction state before a record: that
    ``require_open_transaction`` passes and ``maybe_check_transaction_timeout`` has nothing
    to ask the coordinator at ``now_ms``."""
    txn = producer._txn
    try:
        txn.require_open_transaction("send()")
    except TxnLogError:
        return False
    started = txn._started_ms
    return started < 0 or now_ms - started <= txn.transaction_timeout_ms


def producers_in_every_state(log: Log, clock: ManualClock) -> dict[str, Producer]:
    """One producer per client state (and idempotent and transactional where both apply),
    each reached through the public calls."""
    log.create_topic("s", partitions=1)
    made: dict[str, Producer] = {"idempotent": log.producer()}
    made["idempotent, written"] = log.producer()
    made["idempotent, written"].send("s", b"v", partition=0)
    made["idempotent, written"].flush()
    made["idempotent, closed"] = log.producer()
    made["idempotent, closed"].close()
    made["uninitialized"] = log.producer("uninit")
    made["ready"] = log.producer("ready")
    made["ready"].init_transactions()
    made["in transaction"] = log.producer("begun")
    made["in transaction"].init_transactions()
    made["in transaction"].begin_transaction()
    started = made["in transaction, registered"] = log.producer("started", 1_000)
    started.init_transactions()
    started.begin_transaction()
    started.send("s", b"v", partition=0)
    started.flush()
    abortable = made["abortable error"] = log.producer("abortable")
    abortable.init_transactions()
    abortable.begin_transaction()
    with pytest.raises(TxnLogError):
        abortable.send("missing", b"v")
    prepared = made["prepared"] = log.producer("prepared")
    prepared.init_transactions()
    prepared.begin_transaction()
    prepared.send("s", b"v", partition=0)
    prepared.prepare_transaction()
    fenced = made["fatal"] = log.producer("fenced")
    fenced.init_transactions()
    fenced.begin_transaction()
    fenced.send("s", b"v", partition=0)
    log.producer("fenced").init_transactions()
    with pytest.raises(ProducerFencedError):
        fenced.flush()
    made["closed"] = log.producer("closed")
    made["closed"].init_transactions()
    made["closed"].close()
    return made


def test_the_send_window_is_exactly_what_the_general_path_checks(tmp_path: Path) -> None:
    """``send()``'s common case compares its clock reading with ``send_until_ms`` instead of
    asking the transaction manager: for every client state (STYLE 4: the whole cross
    product) and clock readings either side of the transaction timeout, that comparison
    lets a send through exactly when the general path's checks would pass with nothing to
    do (C-25, C-40)."""
    clock = ManualClock(START_MS)
    with Log.open(tmp_path / "log", clock=clock) as log:
        made = producers_in_every_state(log, clock)
        states = {name: p._txn.state for name, p in made.items()}
        assert set(states.values()) == set(State)
        for ahead in (0, 999, 1_000, 1_001, 10**9):
            now = START_MS + ahead
            for name, producer in made.items():
                window = now <= producer._txn.send_until_ms
                assert window == general_checks_pass(producer, now), (name, ahead)


def check_record_buffer_lists(producer: Producer, topic: str, partitions: int) -> None:
    """Every partition's entry in the accumulator's live list is its record buffer, None
    when it has none or an Arrow buffer."""
    accumulator = producer._accumulator
    slots = accumulator.record_buffers(topic, partitions)
    for partition in range(partitions):
        buffer = accumulator.buffer(TopicPartition(topic, partition))
        assert slots[partition] is (buffer if isinstance(buffer, PartitionBuffer) else None)


steps = st.lists(
    st.one_of(
        st.tuples(  # send(): partition, value size, a header
            st.just("send"), st.integers(0, 2), st.integers(0, 300), st.booleans()
        ),
        st.tuples(st.just("batch"), st.integers(0, 2), st.integers(1, 40)),  # send_batch()
        st.tuples(st.just("flush")),
        st.tuples(st.just("abort")),
    ),
    max_size=40,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps)
def test_the_record_buffer_lists_follow_every_buffer_change(tmp_path: Path, plan: list) -> None:
    """The lists ``send()``'s common case finds buffers in stay equal to the accumulator's
    buffers through sends on both paths, Arrow batches (which take a partition's buffer
    over), drains of full buffers, drains to make room in buffer.memory, flushes and aborts;
    what was committed is what was sent, in order."""
    clock = ManualClock(START_MS)
    with Log.open(tmp_path / f"log{len(list(tmp_path.iterdir()))}", clock=clock) as log:
        log.create_topic("t", partitions=3)
        producer = log.producer("x", batch_size=1_500, buffer_memory=3_000)
        producer.init_transactions()
        producer.begin_transaction()
        sent: list[list[bytes]] = [[], [], []]
        committed: list[list[bytes]] = [[], [], []]
        for number, (kind, *args) in enumerate(plan):
            clock.advance(1)
            if kind == "send":
                partition, size, header = args
                value = b"%06d" % number + b"x" * size
                headers = [("h", b"1")] if header else None
                producer.send("t", value, partition=partition, headers=headers)
                sent[partition].append(value)
            elif kind == "batch":
                partition, count = args
                values = [b"%06d-%d" % (number, i) for i in range(count)]
                batch = pa.record_batch([pa.array(values, pa.binary())], names=["value"])
                producer.send_batch(TopicPartition("t", partition), batch)
                sent[partition] += values
            elif kind == "flush":
                producer.flush()
            else:
                producer.abort_transaction()
                producer.begin_transaction()
                sent = [[], [], []]
            check_record_buffer_lists(producer, "t", 3)
        producer.commit_transaction()
        for partition in range(3):
            committed[partition] = [
                r.value for r in log.consumer().read(TopicPartition("t", partition), 0)
            ]
        assert committed == sent


def test_the_peak_of_buffered_bytes_counts_a_batch_that_left_at_once(tmp_path: Path) -> None:
    """``peak_buffered_bytes`` is the most the buffers held together, also when the most was
    held only for a moment: an Arrow batch that fills its buffer is appended within the
    ``send_batch()`` that buffered it."""
    with Log.open(tmp_path / "log", clock=ManualClock(START_MS)) as log:
        log.create_topic("t", partitions=2)
        producer = log.producer(batch_size=20_000)
        for _ in range(50):
            producer.send("t", b"v" * 100, partition=0)
        first = producer._accumulator.buffer(TopicPartition("t", 0))
        assert first is not None
        held = first.size
        assert producer.peak_buffered_bytes == held
        producer.flush()
        assert producer.peak_buffered_bytes == held
        for _ in range(10):
            producer.send("t", b"v" * 100, partition=0)
        assert producer.peak_buffered_bytes == held
        second = producer._accumulator.buffer(TopicPartition("t", 0))
        assert second is not None
        batch = pa.record_batch([pa.array([b"w" * 1_000] * 30, pa.binary())], names=["value"])
        producer.send_batch(TopicPartition("t", 1), batch)  # over batch.size: appended at once
        assert producer._accumulator.buffer(TopicPartition("t", 1)) is None
        assert producer.peak_buffered_bytes == max(held, second.size + batch.nbytes)
        producer.flush()
