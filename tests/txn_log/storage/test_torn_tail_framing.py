"""Torn tail or corruption: judged by the batch framing from the last good batch (F-25, F-26;
DESIGN §3: a torn tail is truncated, corruption before it is an error, never silent loss).

A value may itself hold a serialized record batch (mirrored or archived Kafka data): its bytes
pass every check a batch of the log passes (magic 2, CRC-32C, plausible offsets). Only the
framing tells the two apart: the batch at the first invalid position declares its own length,
and bytes inside that length are its own, not a following batch (issue 12 item 6).
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from txn_log.errors import CorruptRecordError
from txn_log.record.batch_header import BATCH_LENGTH_OFFSET, LOG_OVERHEAD, validate_batch
from txn_log.record.codec import encode_batch
from txn_log.storage.batch_scan import find_valid_batch_after
from txn_log.storage.file_names import LOG_SUFFIX, offset_file_name
from txn_log.storage.segment import LogSegment

MAX_BATCH = 1 << 20
NOW = int(time.time() * 1000)
PADDING = 1024  # bytes of the value after the embedded batch


def values_batch(base_offset: int, values: list[bytes]) -> bytes:
    column = pa.array(values, pa.binary())
    return encode_batch(
        pa.record_batch([column], names=["value"]), base_offset=base_offset, now_ms=NOW
    )


def plain_batches(count: int) -> list[bytes]:
    return [values_batch(3 * n, [b"v%d-%d" % (n, r) for r in range(3)]) for n in range(count)]


def mirrored_batch(base_offset: int) -> tuple[bytes, int]:
    """A batch at ``base_offset`` holding one record whose value is a whole record batch with
    the offsets the log's next batch would have, then padding; and where the embedded batch
    ends inside the outer one."""
    embedded = values_batch(base_offset, [b"mirrored-%d" % i for i in range(5)])
    outer = values_batch(base_offset, [embedded + b"p" * PADDING])
    return outer, outer.index(embedded) + len(embedded)


def write_segment(directory: Path, data: bytes) -> LogSegment:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / offset_file_name(0, LOG_SUFFIX)).write_bytes(data)
    return LogSegment.open(directory, 0, index_interval_bytes=300)


def follower(segment: LogSegment, position: int, next_offset: int) -> int | None:
    with segment.log_path.open("rb") as file:
        return find_valid_batch_after(
            file.fileno(),
            position,
            segment.log_path.stat().st_size,
            base_offset=0,
            min_base_offset=next_offset,
        )


def with_length(batch: bytes, size: int) -> bytes:
    """``batch`` with its length prefix declaring ``size`` bytes in all (not covered by the CRC)."""
    raw = bytearray(batch)
    raw[BATCH_LENGTH_OFFSET:LOG_OVERHEAD] = (size - LOG_OVERHEAD).to_bytes(4, "big")
    return bytes(raw)


@pytest.mark.parametrize("cut", ["after the embedded batch", "inside the padding's last byte"])
def test_a_torn_batch_whose_value_holds_a_record_batch_is_a_torn_tail(
    tmp_path: Path, cut: str
) -> None:
    good = b"".join(plain_batches(3))
    outer, embedded_end = mirrored_batch(9)
    keep = len(outer) - PADDING // 2 if cut.startswith("after") else len(outer) - 1
    assert keep > embedded_end  # the embedded batch is whole in the file
    segment = write_segment(tmp_path, good + outer[:keep])
    assert follower(segment, len(good), 9) is None
    recovery = segment.recover(MAX_BATCH)
    assert (recovery.truncated_at, recovery.truncated_bytes) == (len(good), keep)
    assert recovery.reason is not None and "incomplete" in recovery.reason
    assert (segment.size, segment.next_offset) == (len(good), 9)
    assert segment.log_path.stat().st_size == len(good)


def test_a_complete_last_batch_holding_a_record_batch_with_a_bad_crc_is_a_torn_tail(
    tmp_path: Path,
) -> None:
    good = b"".join(plain_batches(3))
    outer = bytearray(mirrored_batch(9)[0])
    outer[-10] ^= 0x01  # in the padding: the outer CRC fails, the embedded batch stays valid
    segment = write_segment(tmp_path, good + bytes(outer))
    recovery = segment.recover(MAX_BATCH)
    assert recovery.truncated_at == len(good) and recovery.reason is not None
    assert "CRC" in recovery.reason


def test_a_batch_holding_a_record_batch_with_a_bad_crc_before_a_valid_batch_is_corruption(
    tmp_path: Path,
) -> None:
    good = b"".join(plain_batches(3))
    outer = bytearray(mirrored_batch(9)[0])
    outer[-10] ^= 0x01
    after = values_batch(10, [b"after"])
    data = good + bytes(outer) + after
    segment = write_segment(tmp_path, data)
    assert follower(segment, len(good), 9) == len(good) + len(outer)
    with pytest.raises(CorruptRecordError, match=f"position {len(good)}\\b.*follows at"):
        segment.recover(MAX_BATCH)
    assert segment.log_path.read_bytes() == data  # nothing cut


def test_an_appender_overwrites_a_torn_batch_holding_a_record_batch(tmp_path: Path) -> None:
    good = b"".join(plain_batches(3))
    outer, _ = mirrored_batch(9)
    segment = write_segment(tmp_path, good + outer[: len(outer) - PADDING // 2])
    batch = values_batch(9, [b"next"])
    assert segment.append(batch, validate_batch(batch)) == len(good)
    assert segment.log_path.read_bytes() == good + batch


@pytest.mark.parametrize(
    "declared",
    [
        "past the end of the file",
        "ending inside the last batch",
        "ending inside the next batch",
        "shorter than the batch",
    ],
)
def test_a_damaged_length_prefix_hiding_valid_batches_is_corruption(
    tmp_path: Path, declared: str
) -> None:
    """The length prefix is outside the CRC: a damaged one must not make the valid batches
    after it look like the inside of one torn batch."""
    batches = plain_batches(6)
    damaged = 3
    start = sum(map(len, batches[:damaged]))
    size = len(batches[damaged])
    end = sum(map(len, batches))
    new_size = {
        "past the end of the file": end - start + 1000,
        "ending inside the last batch": end - start - 7,
        "ending inside the next batch": size + 9,
        "shorter than the batch": size - 9,
    }[declared]
    batches[damaged] = with_length(batches[damaged], new_size)
    data = b"".join(batches)
    segment = write_segment(tmp_path, data)
    with pytest.raises(CorruptRecordError, match=f"position {start}\\b.*follows at"):
        segment.recover(MAX_BATCH)
    assert segment.log_path.read_bytes() == data


def test_a_lost_frame_is_corruption_when_a_valid_batch_follows(tmp_path: Path) -> None:
    """A length prefix below the header size gives no framing: the search starts right after."""
    batches = plain_batches(4)
    start = len(batches[0]) + len(batches[1])
    batches[2] = b"\x00" * LOG_OVERHEAD + batches[2][LOG_OVERHEAD:]
    segment = write_segment(tmp_path, b"".join(batches))
    assert follower(segment, start, 6) == start + len(batches[2])
    with pytest.raises(CorruptRecordError, match=f"position {start}\\b"):
        segment.recover(MAX_BATCH)
