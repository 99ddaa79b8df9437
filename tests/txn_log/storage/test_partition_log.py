"""The partition log: append, read, offsets, KIP-27, retention, rolling, markers and the LSO."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest

from txn_log.clock import ManualClock
from txn_log.errors import (
    CorruptRecordError,
    ExpectedOffsetMismatchError,
    InvalidProducerEpochError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    TransactionCoordinatorFencedError,
    UnsupportedCompressionTypeError,
)
from txn_log.record.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    Compression,
    TimestampType,
    compute_crc,
)
from txn_log.record.codec import decode_batch, encode_batch
from txn_log.record.control import ControlType, encode_control_batch
from txn_log.storage.partition_log import PartitionLog
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def batch(
    n: int,
    *,
    start: int = 0,
    producer_id: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
    timestamps: list[int] | None = None,
    value_size: int = 10,
    compression: Compression = Compression.NONE,
) -> bytes:
    values = [f"v{start + i}".encode().ljust(value_size, b".") for i in range(n)]
    columns = {"value": pa.array(values, pa.binary())}
    if timestamps is not None:
        columns["timestamp"] = pa.array(timestamps, pa.int64())
    return encode_batch(
        pa.record_batch(list(columns.values()), names=list(columns)),
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
        compression=compression,
        now_ms=1_000,
    )


def open_log(path: Path, clock: ManualClock | None = None, **config: object) -> PartitionLog:
    return PartitionLog.open(
        path, TP, TopicConfig.from_mapping(config), clock=clock or ManualClock()
    )


def values(log: PartitionLog, start: int = 0, end: int | None = None) -> list[bytes]:
    out: list[bytes] = []
    for _, data in log.read(start, end):
        records = decode_batch(data).records
        for offset, value in zip(
            records.column("offset").to_pylist(),
            records.column("value").to_pylist(),
            strict=True,
        ):
            if offset >= start and (end is None or offset < end):
                out.append(value.rstrip(b"."))
    return out


def files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def test_append_assigns_offsets_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append(batch(3))
    second = log.append(batch(2, start=3, compression=Compression.LZ4))
    assert (first.base_offset, first.last_offset) == (0, 2)
    assert (second.base_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == log.high_watermark == log.last_stable_offset == 5
    assert values(log) == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert values(log, 1, 4) == [b"v1", b"v2", b"v3"]
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 5 and values(reopened) == values(log)


def test_read_outside_the_log_is_an_error_naming_the_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(2))
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 3 is outside the log \[0, 2\]"):
        list(log.read(3))


def test_idempotent_retry_is_answered_with_the_original_offsets(tmp_path: Path) -> None:
    """§15 behaviour 1 / P-10 step 5: a retried batch leaves exactly one copy."""
    log = open_log(tmp_path)
    log.append(batch(1, start=99))
    data = batch(3, producer_id=7, epoch=0, seq=0)
    original = log.append(data)
    retry = log.append(data)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (1, 3)
    assert log.log_end_offset == 4
    # the cache survives a reopen (state rebuilt from the log, P-24)
    reopened = open_log(tmp_path)
    again = reopened.append(data)
    assert again.duplicate and again.base_offset == original.base_offset
    assert reopened.log_end_offset == 4


def test_sequence_and_epoch_rules_reach_the_partition(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(OutOfOrderSequenceError, match="producer 5"):
        log.append(batch(1, producer_id=5, epoch=0, seq=3))  # unknown producer, seq != 0
    log.append(batch(2, producer_id=5, epoch=1, seq=0))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, producer_id=5, epoch=1, seq=5))  # gap
    with pytest.raises(InvalidProducerEpochError):
        log.append(batch(1, producer_id=5, epoch=0, seq=2))  # stale epoch
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, producer_id=5, epoch=2, seq=1))  # new epoch must start at 0
    log.append(batch(1, producer_id=5, epoch=2, seq=0))
    assert log.log_end_offset == 3


def test_kip27_expected_offset(tmp_path: Path) -> None:
    """K-04: a mismatch refuses the whole batch; -1 means no check; off unless configured."""
    log = open_log(tmp_path, **{"check.expected.offsets": "true"})
    log.append(batch(2), expected_offset=0)
    log.append(batch(1), expected_offset=-1)
    before = files(tmp_path)
    with pytest.raises(ExpectedOffsetMismatchError, match=r"expected offset 2 .* log end offset 3"):
        log.append(batch(4), expected_offset=2)
    assert files(tmp_path) == before and log.log_end_offset == 3
    log.append(batch(1), expected_offset=3)
    unchecked = open_log(tmp_path / "off")
    unchecked.append(batch(1), expected_offset=42)  # ignored: the topic did not enable it
    assert unchecked.log_end_offset == 1


def test_kip27_two_writers_at_most_one_wins(tmp_path: Path) -> None:
    """K-06: two writers appending at the same expected offset: exactly one succeeds."""
    first = open_log(tmp_path, **{"check.expected.offsets": "true"})
    second = open_log(tmp_path, **{"check.expected.offsets": "true"})
    first.append(batch(1), expected_offset=0)
    with pytest.raises(ExpectedOffsetMismatchError):
        second.append(batch(1), expected_offset=0)
    assert second.log_end_offset == 1


def corrupt_crc(data: bytes) -> bytes:
    out = bytearray(data)
    out[-1] ^= 0xFF
    return bytes(out)


def with_codec_bits(data: bytes, code: int) -> bytes:
    out = bytearray(data)
    (attributes,) = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, (attributes & ~0x07) | code)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out))
    return bytes(out)


@pytest.mark.parametrize(
    ("bad", "error", "fragment"),
    [
        (lambda: batch(1, value_size=2000), RecordTooLargeError, "max.message.bytes of 1024"),
        (lambda: corrupt_crc(batch(2)), CorruptRecordError, "CRC-32C"),
        (lambda: with_codec_bits(batch(2), 7), UnsupportedCompressionTypeError, "code 7"),
        (
            lambda: encode_control_batch(
                ControlType.COMMIT,
                producer_id=1,
                producer_epoch=0,
                coordinator_epoch=0,
                timestamp_ms=0,
            ),
            InvalidRecordError,
            "control batch",
        ),
        (lambda: batch(2)[:-3], CorruptRecordError, "declares"),
    ],
)
def test_bad_batches_are_refused_and_change_nothing(
    tmp_path: Path, bad: object, error: type[Exception], fragment: str
) -> None:
    log = open_log(tmp_path, **{"max.message.bytes": "1024"})
    log.append(batch(2))
    before = files(tmp_path)
    with pytest.raises(error, match=fragment):
        log.append(bad())  # type: ignore[operator]
    assert files(tmp_path) == before
    assert values(open_log(tmp_path)) == [b"v0", b"v1"]


def test_log_append_time_stamps_every_record(tmp_path: Path) -> None:
    clock = ManualClock(5_000)
    log = open_log(tmp_path, clock, **{"message.timestamp.type": "LogAppendTime"})
    result = log.append(batch(2, timestamps=[10, 20]))
    assert result.log_append_time_ms == 5_000
    ((_, data),) = list(log.read(0))
    decoded = decode_batch(data)
    assert decoded.header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert decoded.records.column("timestamp").to_pylist() == [5_000, 5_000]


def test_offset_for_timestamp_uses_the_time_index(tmp_path: Path) -> None:
    """KIP-32 / T-17: the first offset whose timestamp is ≥ the target; markers never answer."""
    log = open_log(tmp_path, **{"segment.bytes": "300"})
    for i in range(10):
        log.append(batch(2, start=2 * i, timestamps=[1000 * i, 1000 * i + 500]))
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(500) == 1
    assert log.offset_for_timestamp(4200) == 9
    assert log.offset_for_timestamp(9500) == 19
    assert log.offset_for_timestamp(9501) is None


def test_segments_roll_by_size_and_by_time(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path / "size", clock, **{"segment.bytes": "200"})
    for i in range(5):
        log.append(batch(1, start=i, value_size=50))
    assert len(list((tmp_path / "size").glob("*.log"))) == 5
    timed = open_log(tmp_path / "time", clock, **{"segment.ms": "1000"})
    timed.append(batch(1, timestamps=[0]))
    timed.append(batch(1, timestamps=[900]))
    timed.append(batch(1, timestamps=[1500]))  # T-10: first timestamp of the segment + 1000
    assert [p.name[:20] for p in sorted((tmp_path / "time").glob("*.log"))] == [
        "00000000000000000000",
        "00000000000000000002",
    ]
    assert values(timed) == [b"v0", b"v0", b"v0"]


def test_retention_by_size_and_by_time(tmp_path: Path) -> None:
    clock = ManualClock(100_000)
    log = open_log(tmp_path, clock, **{"segment.bytes": "200", "retention.bytes": "300"})
    for i in range(6):
        log.append(batch(1, start=i, value_size=50, timestamps=[100_000 + i]))
    deleted = log.delete_old_segments()  # Kafka's rule: only while the rest stays ≥ the limit
    assert deleted == [0, 1, 2]
    assert log.log_start_offset == 3 and values(log, 3) == [b"v3", b"v4", b"v5"]
    assert sum(p.stat().st_size for p in tmp_path.glob("*.log")) >= 300
    with pytest.raises(OffsetOutOfRangeError):
        list(log.read(0))
    timed = open_log(tmp_path / "t", clock, **{"segment.bytes": "200", "retention.ms": "1000"})
    for i in range(3):
        timed.append(batch(1, start=i, value_size=50, timestamps=[100_000 + 600 * i]))
    clock.advance(1_001)
    assert timed.delete_old_segments() == [0]  # newest record 100_000 is > 1000 ms old
    assert timed.log_start_offset == 1


def test_markers_close_transactions_and_move_the_lso(tmp_path: Path) -> None:
    """B-01..B-05: open transactions pin the LSO; an abort is indexed; markers take offsets."""
    log = open_log(tmp_path)
    log.append(batch(2, producer_id=1, epoch=3, seq=0, transactional=True))  # 0-1
    log.append(batch(1, start=2))  # 2, non-transactional, still behind the open txn
    log.append(batch(2, start=3, producer_id=2, epoch=0, seq=0, transactional=True))  # 3-4
    assert log.last_stable_offset == 0
    aborted = log.append_marker(
        ControlType.ABORT, producer_id=1, producer_epoch=3, coordinator_epoch=5
    )
    assert aborted.offset == 5 and aborted.completed_txn is not None
    assert log.last_stable_offset == 3
    committed = log.append_marker(
        ControlType.COMMIT, producer_id=2, producer_epoch=0, coordinator_epoch=5
    )
    assert committed.offset == 6
    assert log.last_stable_offset == log.log_end_offset == 7
    txns = log.collect_aborted_txns(0, 7)
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in txns] == [
        (1, 0, 5, 3)
    ]
    duplicate = log.append_marker(
        ControlType.COMMIT, producer_id=2, producer_epoch=0, coordinator_epoch=5
    )
    assert duplicate.completed_txn is None  # C-20: harmless
    before = files(tmp_path)
    with pytest.raises(InvalidProducerEpochError):  # B-01 step 1: stale producer epoch
        log.append_marker(ControlType.ABORT, producer_id=1, producer_epoch=2, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):  # C-23: zombie coordinator
        log.append_marker(ControlType.ABORT, producer_id=1, producer_epoch=3, coordinator_epoch=4)
    with pytest.raises(InvalidProducerEpochError):  # a zombie's data after the marker
        log.append(batch(1, producer_id=1, epoch=2, seq=0))
    assert files(tmp_path) == before
    reopened = open_log(tmp_path)  # P-25: LSO and aborted index rebuilt after a restart
    assert reopened.last_stable_offset == 8
    assert reopened.collect_aborted_txns(0, 8) == txns


@pytest.fixture
def crc_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every CRC-32C computed from here on (``crc32c.crc32c``, which ``batch_header``
    calls for every check and every stamp)."""
    import crc32c

    real = crc32c.crc32c
    calls: list[int] = []

    def counting(data: bytes | bytearray | memoryview, *args: int) -> int:
        calls.append(len(data))
        return int(real(data, *args))

    monkeypatch.setattr(crc32c, "crc32c", counting)
    return calls


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_an_append_computes_the_crc_once_and_once_more_to_stamp_log_append_time(
    tmp_path: Path, crc_calls: list[int], timestamp_type: str
) -> None:
    """F-11, F-26: the client batch's CRC is checked once; the base offset is rewritten outside
    it, and LogAppendTime (inside it, T-08) is stamped with one recomputation. Nothing checks
    the whole batch again on the way to the file (issue 13 item 4)."""
    log = open_log(tmp_path, **{"message.timestamp.type": timestamp_type})
    log.append(batch(3))
    data = batch(3, start=3, value_size=500)
    crc_calls.clear()
    log.append(data)
    expected = 1 if timestamp_type == "CreateTime" else 2
    assert crc_calls == [len(data) - ATTRIBUTES_OFFSET] * expected
    assert values(open_log(tmp_path))[3:] == [b"v3", b"v4", b"v5"]  # and the file reads back


def test_a_marker_computes_its_crc_once(tmp_path: Path, crc_calls: list[int]) -> None:
    """B-01: the coordinator's marker is encoded with its CRC and written as encoded."""
    log = open_log(tmp_path, ManualClock(1_000))  # the batch's time: no roll, no snapshot
    log.append(batch(1, producer_id=1, epoch=0, seq=0, transactional=True))
    crc_calls.clear()
    log.append_marker(ControlType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0)
    assert len(crc_calls) == 1
    assert open_log(tmp_path).last_stable_offset == 2
