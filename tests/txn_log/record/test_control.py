"""Transaction markers (F-15, F-28..F-31): exact bytes, parsing, kafka-python agreement."""

from __future__ import annotations

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from txn_log.errors import CorruptRecordError, InvalidRecordError
from txn_log.record.batch_header import TimestampType, validate_batch
from txn_log.record.codec import decode_batch, iter_records
from txn_log.record.control import (
    ControlRecord,
    ControlType,
    control_key,
    control_value,
    encode_control_batch,
    parse_control_record,
)

# COMMIT marker, producer 5 epoch 2, coordinator epoch 7, timestamp 1000 ms, base offset 10.
MARKER_HEADER = bytes.fromhex(
    "000000000000000a"  # base_offset 10
    "00000042"  # batch_length 66 = 78 - 12
    "ffffffff"  # partition_leader_epoch -1
    "02"  # magic 2 (F-01)
)
MARKER_REST = bytes.fromhex(
    "0030"  # attributes: transactional 0x10 | control 0x20, CreateTime, no codec (F-15)
    "00000000"  # last_offset_delta 0: one record
    "00000000000003e8"  # base_timestamp 1000
    "00000000000003e8"  # max_timestamp 1000
    "0000000000000005"  # producer_id 5
    "0002"  # producer_epoch 2
    "ffffffff"  # base_sequence -1: markers carry none
    "00000001"  # records_count 1
    "20"  # record length 16 (zigzag 32)
    "00"  # record attributes
    "00"  # timestamp delta 0
    "00"  # offset delta 0
    "08"
    "00000001"  # key length 4; key: version 0, type 1 = COMMIT (F-28, Kafka numbering)
    "0c"
    "000000000007"  # value length 6; value: version 0, coordinator_epoch 7 (F-29)
    "00"  # no headers
)


def test_marker_bytes_match_the_hand_derived_layout() -> None:
    crc = crc32c.crc32c(MARKER_REST)
    assert crc == 0x9F0731FC
    expected = MARKER_HEADER + crc.to_bytes(4, "big") + MARKER_REST
    actual = encode_control_batch(
        ControlType.COMMIT,
        producer_id=5,
        producer_epoch=2,
        coordinator_epoch=7,
        timestamp_ms=1000,
        base_offset=10,
    )
    assert actual == expected
    assert len(actual) == 78


def test_control_type_numbering_is_kafkas_not_the_seeds_f28() -> None:
    assert ControlType.ABORT == 0
    assert ControlType.COMMIT == 1
    assert control_key(ControlType.ABORT) == b"\x00\x00\x00\x00"
    assert control_value(-1) == b"\x00\x00\xff\xff\xff\xff"


@given(
    st.sampled_from(list(ControlType)),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
)
def test_kafka_python_and_our_decoders_agree_on_markers(
    control_type: ControlType,
    producer_id: int,
    epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int,
) -> None:
    batch = encode_control_batch(
        control_type,
        producer_id=producer_id,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp_ms=timestamp,
        base_offset=base_offset,
    )
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert theirs.is_control_batch and theirs.is_transactional
    assert theirs.timestamp_type == TimestampType.CREATE_TIME
    assert (theirs.producer_id, theirs.producer_epoch) == (producer_id, epoch)
    assert theirs.base_sequence == -1
    [record] = list(theirs)
    assert record.type == control_type
    assert record.offset == base_offset and record.timestamp == timestamp

    header = validate_batch(batch)
    assert header.is_control and header.records_count == 1
    [ours] = list(iter_records(batch))
    assert parse_control_record(ours.key, ours.value) == ControlRecord(
        0, control_type, coordinator_epoch
    )
    columns = decode_batch(batch).records.to_pylist()
    assert [(r["offset"], r["key"], r["value"]) for r in columns] == [
        (base_offset, ours.key, ours.value)
    ]


def test_later_versions_parse_by_their_known_prefix() -> None:
    parsed = parse_control_record(b"\x00\x01\x00\x00" + b"more", b"\x00\x03\x00\x00\x00\x09" + b"x")
    assert parsed == ControlRecord(1, ControlType.ABORT, 9)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (None, b"\x00" * 6, "key must be at least 4 bytes, got null"),
        (b"\x00\x00\x00", b"\x00" * 6, "key must be at least 4 bytes, got 3"),
        (b"\xff\xff\x00\x01", b"\x00" * 6, "negative version"),
        (b"\x00\x00\x00\x02", b"\x00" * 6, "unknown control record type 2"),
        (b"\x00\x00\x00\x01", b"\x00" * 5, "COMMIT marker value must be at least 6 bytes"),
        (b"\x00\x00\x00\x00", None, "ABORT marker value must be at least 6 bytes, got null"),
        (b"\x00\x00\x00\x00", b"\x80\x00\x00\x00\x00\x00", "negative version"),
    ],
)
def test_bad_control_records_are_corrupt(
    key: bytes | None, value: bytes | None, message: str
) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        parse_control_record(key, value)


def test_a_marker_needs_a_producer_id_f31() -> None:
    with pytest.raises(InvalidRecordError, match="producer id"):
        encode_control_batch(
            ControlType.ABORT,
            producer_id=-1,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp_ms=0,
        )
