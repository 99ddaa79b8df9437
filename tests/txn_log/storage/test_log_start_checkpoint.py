"""The log start offset checkpoint DeleteRecords writes (``storage.log_start_checkpoint``):
versioned and checksummed (STYLE 6), never guessed around when damaged, lowered to the log end
by a writer's recovery when outside damage left it past the end; and the log cleaner neither
moves the start nor brings records below it back (B-17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.txn_log.test_delete_records import T0, offsets, produce
from txn_log.errors import CorruptSnapshotError
from txn_log.log import Log
from txn_log.storage.log_start_checkpoint import (
    CHECKPOINT_FILE,
    decode_log_start,
    encode_log_start,
    read_log_start,
)


def test_the_file_round_trips_and_every_damage_is_refused_by_name(tmp_path: Path) -> None:
    data = encode_log_start(1234)
    assert len(data) == 14
    assert decode_log_start(data) == 1234
    assert read_log_start(tmp_path) == 0  # no file: never moved
    flipped = bytearray(data)
    flipped[-1] ^= 1
    for damaged, problem in [
        (bytes(flipped), "CRC-32C mismatch"),
        (data[:10], "truncated"),
        (data + b"\0", "15 bytes, expected 14"),
        (b"\0\x07" + data[2:], "unknown log start offset checkpoint version 7"),
    ]:
        with pytest.raises(CorruptSnapshotError, match=problem):
            decode_log_start(damaged, "here")


def test_a_damaged_checkpoint_fails_readers_loudly_instead_of_bringing_records_back(
    tmp_path: Path,
) -> None:
    with Log.open(tmp_path / "log", housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1)
        produce(log, 5)
        log.delete_records({T0: 3})
        path = log.path / T0.directory_name / CHECKPOINT_FILE
        path.write_bytes(path.read_bytes()[:-1] + b"\xff")
        with pytest.raises(CorruptSnapshotError, match=str(path)):
            _ = log.partition_reader(T0).log_start_offset


def test_a_checkpoint_past_the_log_end_is_lowered_to_it_before_anything_is_appended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only outside damage can leave it there (DeleteRecords syncs the log first): readers
    clamp it to the log end, and a writer's recovery lowers it to the log end, so no record
    appended afterwards lands below the start."""
    with Log.open(tmp_path / "log", housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1)
        produce(log, 5)
    directory = tmp_path / "log" / T0.directory_name
    (directory / CHECKPOINT_FILE).write_bytes(encode_log_start(9))
    with Log.open(tmp_path / "log", read_only=True) as inspecting:
        assert inspecting.partition_reader(T0).log_start_offset == 5
    with Log.open(tmp_path / "log", housekeeping_interval_ms=None) as log:
        partition = log.partition_log(T0)
        assert partition.last_recovery[-1] == (
            "t-0: the log start offset checkpoint 9 lay past the log end 5 (records lost "
            "after it was written?); lowered it to the log end"
        )
        assert read_log_start(directory) == 5
        produce(log, 2)
        assert offsets(log, 5) == [5, 6]


def test_the_cleaner_neither_moves_the_start_nor_brings_records_below_it_back(
    tmp_path: Path,
) -> None:
    with Log.open(tmp_path / "log", housekeeping_interval_ms=None) as log:
        log.create_topic(
            "t", 1, {"cleanup.policy": "compact,delete", "segment.bytes": 200,
                     "min.cleanable.dirty.ratio": 0.01, "retention.ms": -1},
        )  # fmt: skip
        for round_ in range(4):
            producer = log.producer()
            for key in (b"a", b"b", b"c"):
                producer.send("t", b"%s%d" % (key, round_), key=key, partition=0)
                producer.flush()
            producer.close()
        log.delete_records({T0: 5})
        stats = log.log_manager.clean("t")
        assert stats[0].records_removed > 0
        reader = log.partition_reader(T0)
        assert reader.log_start_offset == 5
        kept = offsets(log, 5)
        assert kept and min(kept) >= 5
        assert [r.value for r in log.consumer().read(T0, 5)][-3:] == [b"a3", b"b3", b"c3"]
        assert read_log_start(reader.directory) == 5
