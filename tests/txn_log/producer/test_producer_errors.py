"""Producer errors (issue 12, items 3 and 13): bad input is refused by ``send()`` with a typed
error before anything is buffered; a failed flush loses no buffered record; and a transaction
that failed a send or a flush can only be aborted, never committed without a record (C-36,
C-37, C-38, C-40, P-08, P-09, P-13, F-09).

Kafka's producer does the same: ``KafkaProducer.send`` checks the record before it enters the
accumulator, a batch the broker finds too large is split and re-enqueued, and any failed send
inside a transaction moves the TransactionManager to ABORTABLE_ERROR.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import directory_bytes
from txn_log.clock import ManualClock
from txn_log.errors import (
    AbortableError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    RecordTooLargeError,
    TransactionAbortableError,
    UnknownTopicOrPartitionError,
)
from txn_log.log import Log
from txn_log.producer.producer import Producer
from txn_log.producer.producer_record import ProducerRecord, record_body_size, record_size
from txn_log.record.batch_header import HEADER_SIZE, BatchHeader, Compression
from txn_log.record.codec import encode_records
from txn_log.record.compression import supported_codecs
from txn_log.topic_partition import TopicPartition

OUT0, OUT1 = TopicPartition("out", 0), TopicPartition("out", 1)
SMALL0 = TopicPartition("small", 0)
LIMIT = 10_000
"""max.message.bytes of the topic ``small``."""
CODECS = [c.name.lower() for c in supported_codecs() if c is not Compression.NONE]


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log", clock=ManualClock())
    log.create_topic("out", partitions=2)
    log.create_topic("small", partitions=1, config={"max.message.bytes": LIMIT})
    return log


def committed_values(log: Log, tp: TopicPartition) -> list[bytes | None]:
    return [r.value for r in log.consumer().read(tp, 0)]


def batch_headers(log: Log, tp: TopicPartition) -> list[BatchHeader]:
    return [header for header, _ in log.partition_log(tp).read(0)]


def assert_consecutive_sequences(headers: list[BatchHeader]) -> None:
    """P-08, P-09: each batch starts where the previous one ended."""
    expected = list(itertools.accumulate(h.records_count for h in headers[:-1]))
    assert [h.base_sequence for h in headers] == [0, *expected]


def stale_max_message_bytes(producer: Producer, topic: str, limit: int) -> None:
    """White-box: the producer's cached metadata says ``limit``, as it would for up to
    ``metadata.max.age.ms`` after the topic was re-created with a smaller max.message.bytes.
    The partition's own config (read at append) is the truth."""
    cached = producer._topics[topic]
    producer._topics[topic] = dataclasses.replace(cached, max_message_bytes=limit)


# --- every field is checked by send() ----------------------------------------------------------

BAD_SENDS = [
    pytest.param({"value": "text"}, InvalidRecordError, r"out-0: value .*got str", id="str-value"),
    pytest.param({"value": 7}, InvalidRecordError, r"out-0: value .*got int", id="int-value"),
    pytest.param({"key": "k"}, InvalidRecordError, r"out-0: key .*got str", id="str-key"),
    pytest.param(
        {"timestamp_ms": "yesterday"},
        InvalidTimestampError,
        r"out-0: timestamp_ms .*0 to 2\*\*63-1.*got str 'yesterday'",
        id="str-timestamp",
    ),
    pytest.param(
        {"timestamp_ms": 1 << 70},
        InvalidTimestampError,
        r"out-0: timestamp_ms",
        id="timestamp-2^70",
    ),
    pytest.param({"timestamp_ms": -1}, InvalidTimestampError, r"negative", id="negative-timestamp"),
    pytest.param({"timestamp_ms": True}, InvalidTimestampError, r"got bool", id="bool-timestamp"),
    pytest.param(
        {"timestamp_ms": 1.7e12}, InvalidTimestampError, r"got float", id="float-timestamp"
    ),
    pytest.param(
        {"headers": [("h", "text")]},
        InvalidRecordError,
        r"out-0: header 0 \('h'\) value .*got str",
        id="str-header-value",
    ),
    pytest.param(
        {"headers": [("ok", b"1"), (b"h", b"v")]},
        InvalidRecordError,
        r"out-0: header 1 key must be a str.*got bytes",
        id="bytes-header-key",
    ),
    pytest.param(
        {"headers": [("h",)]},
        InvalidRecordError,
        r"header 0 must be a \(key, value\) pair",
        id="header-not-a-pair",
    ),
    pytest.param(
        {"headers": "h=v"}, InvalidRecordError, r"headers must be a sequence", id="str-headers"
    ),
    pytest.param(
        {"headers": [("\ud800", b"v")]}, InvalidRecordError, r"not valid UTF-8", id="surrogate-key"
    ),
    pytest.param(
        {"partition": "0"}, InvalidRecordError, r"partition must be an int", id="str-partition"
    ),
    pytest.param(
        {"partition": 7}, UnknownTopicOrPartitionError, r"partition 7", id="missing-partition"
    ),
    pytest.param(
        {"topic": "__consumer_offsets"},
        InvalidTopicError,
        r"Cannot append to internal topic __consumer_offsets",
        id="offsets-topic",
    ),
    pytest.param(
        {"topic": "__transaction_state"},
        InvalidTopicError,
        r"Cannot append to internal topic __transaction_state",
        id="transaction-state-topic",
    ),
    pytest.param({"topic": "no such"}, InvalidTopicError, r"contains ' '", id="bad-topic-name"),
    pytest.param(
        {"topic": "missing"},
        UnknownTopicOrPartitionError,
        r"'missing' does not exist",
        id="missing-topic",
    ),
    pytest.param(
        {"value": bytes(2_000_000)},
        RecordTooLargeError,
        r"out-0: record of 2000\d\d\d bytes .*max.message.bytes of 1048588",
        id="record-over-the-limit",
    ),
]


def bad_send(producer: Producer, fields: dict[str, Any]) -> None:
    producer.send(**{"topic": "out", "value": b"bad", "partition": 0, **fields})


@pytest.mark.parametrize(("fields", "error", "match"), BAD_SENDS)
def test_a_bad_field_is_refused_by_send_and_loses_nothing(
    log: Log, fields: dict[str, Any], error: type[Exception], match: str
) -> None:
    """Issue 12 item 3 and 13, F-09: each bad field raises its typed error from ``send()``,
    naming the partition (or topic) and the field; nothing is buffered or written, and the
    record buffered before it is still written by the next flush."""
    producer = log.producer()
    producer.send("out", b"before", partition=0)
    before = directory_bytes(log.path, content_only=True)
    with pytest.raises(error, match=match):
        bad_send(producer, fields)
    assert directory_bytes(log.path, content_only=True) == before
    producer.send("out", b"after", partition=0)
    producer.flush()
    assert committed_values(log, OUT0) == [b"before", b"after"]
    assert_consecutive_sequences(batch_headers(log, OUT0))


@pytest.mark.parametrize(("fields", "error", "match"), BAD_SENDS)
def test_a_bad_send_leaves_the_transaction_abortable_only(
    log: Log, fields: dict[str, Any], error: type[Exception], match: str
) -> None:
    """C-37, C-40 (Kafka's ABORTABLE_ERROR): a transaction that failed a send may not commit
    without that record. Every later call but ``abort_transaction()`` raises
    TransactionAbortableError naming the transactional id and the original error; the abort
    leaves nothing of the transaction visible, and the next transaction works."""
    producer = log.producer("txn")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"flushed", partition=0)
    producer.flush()
    producer.send("out", b"buffered", partition=1)
    with pytest.raises(error, match=match) as refused:
        bad_send(producer, fields)
    later_calls = [
        lambda: producer.send("out", b"more", partition=0),
        producer.flush,
        lambda: producer.send_offsets_to_transaction({OUT0: 1}, "group"),
        producer.commit_transaction,
        producer.begin_transaction,
        producer.init_transactions,
    ]
    for call in later_calls:
        with pytest.raises(TransactionAbortableError, match=r"'txn'.*abort_transaction\(\)") as e:
            call()
        assert e.value.__cause__ is refused.value
        assert isinstance(e.value, AbortableError) and e.value.code == 120
    producer.abort_transaction()
    assert committed_values(log, OUT0) == committed_values(log, OUT1) == []
    producer.begin_transaction()
    producer.send("out", b"next", partition=1)
    producer.commit_transaction()
    assert committed_values(log, OUT0) == [] and committed_values(log, OUT1) == [b"next"]


def test_bytes_like_fields_are_stored_as_bytes(log: Log) -> None:
    """bytearray and memoryview keys, values and header values are taken (as bytes, copied at
    send: a later change to the caller's buffer does not reach the log); the timestamp range is
    0..2**63-1 inclusive."""
    producer = log.producer()
    value = bytearray(b"value")
    producer.send(
        "out",
        value,
        key=memoryview(b"key"),
        partition=0,
        headers=[("h", bytearray(b"x")), ("n", None)],
        timestamp_ms=0,
    )
    value[:] = b"CHANGED"
    producer.send("out", None, key=None, partition=0, timestamp_ms=(1 << 63) - 1)
    producer.flush()
    first, second = log.consumer().read(OUT0, 0)
    assert (first.key, first.value, first.headers, first.timestamp_ms) == (
        b"key",
        b"value",
        (("h", b"x"), ("n", None)),
        0,
    )
    assert (second.key, second.value, second.timestamp_ms) == (None, None, (1 << 63) - 1)


# --- compression can grow a batch past max.message.bytes ---------------------------------------


def value_for_batch_of(batch_bytes: int) -> int:
    """Length of a value whose one-record batch (no key, no headers) is ``batch_bytes`` long."""
    length = batch_bytes - HEADER_SIZE
    while len(encode_records([(None, bytes(length), 0, ())], now_ms=0)) > batch_bytes:
        length -= 1
    return length


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "value_length",
    [
        pytest.param(value_for_batch_of(LIMIT), id="batch-exactly-at-the-limit"),
        pytest.param(LIMIT - HEADER_SIZE - 32, id="largest-the-old-estimate-took"),
    ],
)
def test_an_incompressible_record_just_under_the_limit_never_commits_without_it(
    log: Log, codec: str, value_length: int
) -> None:
    """F-09: the limit holds for the batch as written, compressed. A random value whose batch
    fits uncompressed grows when compressed: it either lands whole, or it is refused with
    RecordTooLargeError naming both sizes and the transaction can only abort. Never does the
    transaction commit without it (the issue saw it commit without it and without the record
    buffered before it)."""
    producer = log.producer("txn", compression=codec)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("small", b"first", partition=0)
    big = os.urandom(value_length)
    try:
        producer.send("small", big, partition=0)
        producer.commit_transaction()
    except RecordTooLargeError as error:
        assert f"with {codec} compression" in str(error) and "small-0" in str(error)
        with pytest.raises(TransactionAbortableError):
            producer.commit_transaction()
        producer.abort_transaction()
        assert committed_values(log, SMALL0) == []
        producer.begin_transaction()
        producer.send("small", b"next", partition=0)
        producer.commit_transaction()
        assert committed_values(log, SMALL0) == [b"next"]
    else:
        assert committed_values(log, SMALL0) == [b"first", big]


@pytest.mark.parametrize("codec", CODECS)
def test_an_incompressible_record_is_refused_by_send_of_an_idempotent_producer(
    log: Log, codec: str
) -> None:
    """F-09: without a transaction, the too-large record is refused by its own ``send()``
    (its compressed size is checked there when it is near the limit); the records around it
    land."""
    producer = log.producer(compression=codec)
    producer.send("small", b"before", partition=0)
    with pytest.raises(RecordTooLargeError, match=rf"small-0: .*with {codec} compression"):
        producer.send("small", os.urandom(value_for_batch_of(LIMIT)), partition=0)
    producer.send("small", b"after", partition=0)
    producer.flush()
    assert committed_values(log, SMALL0) == [b"before", b"after"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("transactional", [False, True], ids=["idempotent", "transactional"])
def test_a_batch_compression_grows_past_the_limit_is_split_in_order(
    log: Log, codec: str, transactional: bool
) -> None:
    """F-09, P-08, P-09: random records that fill a batch to exactly max.message.bytes
    uncompressed grow past it when compressed. The producer splits the batch, as Kafka's
    splits and re-enqueues a too-large batch, and appends the parts in order with consecutive
    sequences: every record lands once, in order, and no batch exceeds the limit."""
    values = [os.urandom(1000) for _ in range(9)]
    values.append(bytes(value_for_batch_of(LIMIT - sum(len(v) + 9 for v in values))))
    values[-1] = os.urandom(len(values[-1]))
    now = log.clock.time_ms()
    assert len(encode_records([(None, v, now, ()) for v in values], now_ms=now)) == LIMIT
    producer = log.producer("txn" if transactional else None, compression=codec)
    if transactional:
        producer.init_transactions()
        producer.begin_transaction()
    for value in values:
        producer.send("small", value, partition=0)
    if transactional:
        producer.commit_transaction()
    else:
        producer.flush()
    assert committed_values(log, SMALL0) == values
    headers = [h for h in batch_headers(log, SMALL0) if not h.is_control]
    assert len(headers) > 1 and all(h.size_in_bytes <= LIMIT for h in headers)
    assert_consecutive_sequences(headers)


# --- a record that cannot be written at flush time ---------------------------------------------


def test_a_record_too_large_at_flush_is_dropped_alone_and_the_rest_stays_buffered(
    log: Log,
) -> None:
    """No record is lost by a failed flush: the partition's buffer is not taken before its
    append succeeded. A record the partition refuses at flush time (the producer's metadata
    was stale) is dropped with RecordTooLargeError naming it; the record before it is written,
    the one after it stays buffered for the next flush, with consecutive sequences."""
    producer = log.producer()
    producer.send("small", b"a", partition=0)
    stale_max_message_bytes(producer, "small", 1 << 20)
    producer.send("small", bytes(20_000), partition=0)
    producer.send("small", b"c", partition=0)
    with pytest.raises(
        RecordTooLargeError, match=r"small-0: .*record of 200\d\d bytes.*dropped.*1 record"
    ):
        producer.flush()
    assert committed_values(log, SMALL0) == [b"a"]
    producer.flush()
    assert committed_values(log, SMALL0) == [b"a", b"c"]
    assert_consecutive_sequences(batch_headers(log, SMALL0))


def test_a_send_whose_full_buffer_fails_to_append_buffers_nothing(log: Log) -> None:
    """``send()`` appends a full buffer before it buffers its record; when that append fails,
    the send raises (with a note saying so) and its record is not buffered, so the caller can
    send it again without a duplicate. The buffer's other records are not lost."""
    first, big = ProducerRecord(None, b"a", 0, ()), ProducerRecord(None, bytes(20_000), 0, ())
    both = sum(record_size(record_body_size(r), i, 0) for i, r in enumerate([first, big]))
    producer = log.producer(batch_size=both)  # a third record overflows the buffer
    producer.send("small", b"a", partition=0)
    stale_max_message_bytes(producer, "small", 1 << 20)
    producer.send("small", bytes(20_000), partition=0)
    with pytest.raises(RecordTooLargeError) as failed:
        producer.send("small", b"c", partition=0)
    assert "small-0 did not buffer its record" in "".join(failed.value.__notes__)
    assert committed_values(log, SMALL0) == [b"a"]
    producer.flush()
    assert committed_values(log, SMALL0) == [b"a"]
    producer.send("small", b"c", partition=0)
    producer.flush()
    assert committed_values(log, SMALL0) == [b"a", b"c"]
    assert_consecutive_sequences(batch_headers(log, SMALL0))


def test_records_for_a_deleted_topic_are_dropped_with_an_error_and_the_rest_land(
    log: Log,
) -> None:
    """A failed flush keeps what it could not append, except what can never be appended: the
    records of a partition whose topic was deleted are dropped with an error saying how many
    (else every later flush and close() would fail on them); the other partitions' records
    land with the next flush."""
    log.create_topic("gone", partitions=1)
    producer = log.producer()
    producer.send("gone", b"x", partition=0)
    producer.send("gone", b"y", partition=0)
    producer.send("out", b"kept", partition=0)
    log.delete_topic("gone")
    with pytest.raises(
        UnknownTopicOrPartitionError,
        match=r"'gone' does not exist.*2 record\(s\) buffered for gone-0",
    ):
        producer.flush()
    producer.flush()
    assert committed_values(log, OUT0) == [b"kept"]
    producer.close()


def test_a_flush_that_drops_a_record_leaves_the_transaction_abortable_only(log: Log) -> None:
    """C-36, C-40: a flush that could not write a record fails, and the transaction can then
    only abort: commit_transaction() raises TransactionAbortableError from the flush's error
    instead of committing without the record."""
    producer = log.producer("txn")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("small", b"a", partition=0)
    stale_max_message_bytes(producer, "small", 1 << 20)
    producer.send("small", bytes(20_000), partition=0)
    producer.send("small", b"c", partition=0)
    with pytest.raises(RecordTooLargeError) as lost:
        producer.flush()
    with pytest.raises(TransactionAbortableError, match="'txn'") as refused:
        producer.commit_transaction()
    assert refused.value.__cause__ is lost.value
    producer.abort_transaction()
    assert committed_values(log, SMALL0) == []
    producer.begin_transaction()
    producer.send("small", b"d", partition=0)
    producer.commit_transaction()
    assert committed_values(log, SMALL0) == [b"d"]


# --- the size send() checks is the encoder's --------------------------------------------------

_bytes = st.none() | st.binary(max_size=300)
_records = st.lists(
    st.tuples(
        _bytes,
        _bytes,
        st.integers(0, (1 << 63) - 1),
        st.lists(st.tuples(st.text(max_size=5), _bytes), max_size=3).map(tuple),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=_records)
def test_record_sizes_are_the_encoders(
    records: list[tuple[bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]],
) -> None:
    """F-16, F-19, F-23: the size ``send()`` accounts for a record is exactly what the encoder
    writes for it at its place in the batch (varints of its offset and timestamp deltas)."""
    from txn_log.producer.producer_record import records_section_size

    batch = [ProducerRecord(*record) for record in records]
    encoded = encode_records(batch, now_ms=0)
    assert len(encoded) == HEADER_SIZE + records_section_size(batch)
