"""``open_partition_reader`` (the Spark executors' cheap, lock-free open) and ``log_start_offset``
as seen by another process after retention."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from txn_log.errors import ConfigError, UnknownTopicOrPartitionError
from txn_log.record.codec import encode_batch
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.partition_reader import PartitionReader, open_partition_reader
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
CONFIG = TopicConfig(segment_bytes=300, retention_bytes=1)


def data(first: int, n: int = 3) -> bytes:
    values = pa.array([b"v%d" % (first + i) for i in range(n)], pa.binary())
    return encode_batch(pa.record_batch([values], names=["value"]), now_ms=1_700_000_000_000)


def values(log: PartitionReader, start: int) -> list[bytes]:
    from txn_log.record.codec import decode_batch

    out: list[bytes] = []
    for _header, raw in log.read(start):
        records = decode_batch(raw).records.to_pydict()
        out += [v for o, v in zip(records["offset"], records["value"], strict=True) if o >= start]
    return out


def test_reads_what_a_writer_appends_before_and_after_opening(tmp_path: Path) -> None:
    writer = PartitionLog.open(tmp_path / "t-0", TP, CONFIG)
    for i in range(0, 30, 3):
        writer.append(data(i))
    reader = open_partition_reader(tmp_path / "t-0", TP, CONFIG)
    assert reader.log_end_offset == 30 and len(reader.segments) > 1
    assert values(reader, 4) == [b"v%d" % i for i in range(4, 30)]
    writer.append(data(30))  # caught up on the next read, no producer state needed
    assert reader.log_end_offset == 33 and values(reader, 31) == [b"v31", b"v32"]
    with pytest.raises(ConfigError, match="needs producer state"):
        _ = reader.last_stable_offset
    # read-only: a reader has no way to write at all (it was a ConfigError on a PartitionLog)
    assert not isinstance(reader, PartitionLog) and not hasattr(reader, "append")


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        open_partition_reader(tmp_path / "t-0", TP, CONFIG)


def test_log_start_offset_follows_retention_done_elsewhere(tmp_path: Path) -> None:
    writer = PartitionLog.open(tmp_path / "t-0", TP, CONFIG)
    for i in range(0, 30, 3):
        writer.append(data(i))
    other = open_partition_reader(tmp_path / "t-0", TP, CONFIG)
    assert other.log_start_offset == 0
    assert writer.delete_old_segments()
    assert other.log_start_offset == writer.log_start_offset > 0


def test_a_read_hands_on_the_bytes_its_scan_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch is read from the file once: the bytes yielded are those whose length, magic
    and CRC the scan checked, not a second read (which cost a copy of every batch and could
    see the file changed since the check)."""
    from txn_log.storage.segment import LogSegment

    writer = PartitionLog.open(tmp_path / "t-0", TP, TopicConfig())
    for i in range(0, 30, 3):
        writer.append(data(i))
    reader = open_partition_reader(tmp_path / "t-0", TP, TopicConfig())

    def second_read(*args: object) -> bytes:
        raise AssertionError("a batch was read a second time")

    monkeypatch.setattr(LogSegment, "read_bytes", second_read)
    assert values(reader, 4) == [b"v%d" % i for i in range(4, 30)]
    batches = list(reader.read(0))
    assert [header.base_offset for header, _ in batches] == list(range(0, 30, 3))
    assert all(isinstance(raw, memoryview) and raw.readonly for _, raw in batches)
