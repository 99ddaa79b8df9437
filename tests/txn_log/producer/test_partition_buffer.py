"""``PartitionBuffer`` against a plain list of records (F-16, F-17): its columns (keys only
once a record has one, timestamps as runs of one millisecond) give back every record, its
exact size and the batch the per-record encoder makes of any head of it, through additions by
both of ``send()``'s paths and removals of any head (an appended batch, a split, a dropped
record)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from txn_log.producer.producer_batch import PartitionBuffer
from txn_log.producer.producer_record import (
    ProducerRecord,
    record_body_size,
    records_section_size,
)
from txn_log.record.codec import encode_records

START_MS = 1_700_000_000_000
SETTINGS = {"producer_id": 4, "producer_epoch": 1, "base_sequence": 0, "now_ms": START_MS}

records = st.builds(
    ProducerRecord,
    st.one_of(st.none(), st.binary(max_size=12)),  # key
    st.one_of(st.none(), st.binary(max_size=150)),  # value
    st.sampled_from([0, 0, 0, 1, 2, 70, -3, 10**6]).map(lambda ms: START_MS + ms),
    st.one_of(st.just(()), st.just((("h", b"x"),))),  # headers
)
steps = st.lists(
    st.one_of(
        # a record sent 1-40 times (one millisecond), by the general path or the fast one
        st.tuples(st.just("add"), records, st.integers(1, 40), st.booleans()),
        st.tuples(st.just("remove"), st.integers(0, 50)),
    ),
    max_size=30,
)


def add_fast(buffer: PartitionBuffer, record: ProducerRecord) -> bool:
    """What ``RecordAccumulator.add_fast`` does to a buffer, without its limits: a record
    without headers joins a buffer that holds records."""
    from txn_log.producer.record_accumulator import RecordAccumulator

    accumulator = RecordAccumulator.__new__(RecordAccumulator)
    accumulator._buffered_bytes = 0
    accumulator.buffer_memory = 1 << 40
    key, value, timestamp, _ = record
    return accumulator.add_fast(buffer, key, value, timestamp, 1 << 40, 1 << 40)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_a_buffer_holds_exactly_the_records_added_in_order(plan: list) -> None:
    buffer = PartitionBuffer()
    model: list[ProducerRecord] = []
    for step in plan:
        if step[0] == "add":
            _, record, times, fast = step
            for _ in range(times):
                if not (fast and not record.headers and add_fast(buffer, record)):
                    body = record_body_size(record)
                    buffer.add(record, body, buffer.next_size(record, body))
                model.append(record)
        else:
            count = min(step[1], len(model))
            buffer.remove_head(count)
            del model[:count]
        assert buffer.count == len(model)
        assert [buffer.record(i) for i in range(len(model))] == model
        assert buffer.size == records_section_size(model)
        if model:
            assert buffer.head_key() == model[0].key
            assert buffer.first_timestamp == model[0].timestamp_ms
            assert buffer.last_timestamp == model[-1].timestamp_ms
            for count in {1, len(model) // 2 + 1, len(model)}:
                head = buffer.encode_head(count, **SETTINGS)
                assert bytes(head) == encode_records(model[:count], **SETTINGS)


def test_a_record_after_a_removed_head_is_sized_from_the_new_first() -> None:
    """The size of the timestamp delta a run's records share is measured again from the new
    first record when the head leaves: a record sent in the last record's millisecond then
    takes one byte less (delta 0 instead of 100)."""
    buffer = PartitionBuffer()
    early = ProducerRecord(None, b"v", START_MS, ())
    late = ProducerRecord(None, b"v", START_MS + 100, ())
    for record in (early, late):
        body = record_body_size(record)
        buffer.add(record, body, buffer.next_size(record, body))
    buffer.remove_head(1)
    assert add_fast(buffer, late)
    assert buffer.size == records_section_size([late, late])
