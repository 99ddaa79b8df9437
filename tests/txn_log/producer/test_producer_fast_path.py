"""``send()``'s common case (issue 27): a record that joins a partition's open buffer is sized
inline and buffered without a per-record object; these tests hold it to what the general path
does (F-09, F-16, F-17, F-23, C-25): exact sizes, round-robin order, the transaction timeout
and metadata refresh it must not skip, and the partitioner's remembered hashes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from txn_log import partitioner
from txn_log.clock import ManualClock
from txn_log.errors import ProducerFencedError, TxnLogError
from txn_log.log import Log
from txn_log.partitioner import partition_for_key
from txn_log.producer.producer_batch import PartitionBuffer
from txn_log.producer.producer_record import records_section_size
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
