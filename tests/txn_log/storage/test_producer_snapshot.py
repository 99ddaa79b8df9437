"""The producer snapshot file: Kafka's version-1 layout byte for byte (P-21, P-22, STYLE 5/6)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from txn_log.errors import CorruptRecordError, CorruptSnapshotError
from txn_log.storage.producer_snapshot import (
    ENTRIES_OFFSET,
    ENTRY,
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
    snapshot_file_name,
    snapshot_offset_of,
    write_snapshot,
)
from txn_log.storage.producer_state_entry import BatchMetadata, ProducerStateEntry

TS = 1_700_000_000_000  # 0x0000018BCFE56800

ONE_ENTRY = ProducerStateEntry(
    producer_id=1000,
    producer_epoch=5,
    batch_metadata=(BatchMetadata(last_seq=41, last_offset=141, offset_delta=9, timestamp=TS),),
    coordinator_epoch=3,
    current_txn_first_offset=100,
    last_timestamp=TS,
)

# Derived by hand from ProducerStateManager.java's PID_SNAPSHOT_MAP_SCHEMA, big-endian.
COVERED = bytes.fromhex(
    "00000001"  # producer_entries: ArrayOf length, int32 = 1
    "00000000000003e8"  # producer_id int64 = 1000
    "0005"  # epoch int16 = 5
    "00000029"  # last_sequence int32 = 41
    "000000000000008d"  # last_offset int64 = 141
    "00000009"  # offset_delta int32 = 9
    "0000018bcfe56800"  # timestamp int64 = 1_700_000_000_000
    "00000003"  # coordinator_epoch int32 = 3
    "0000000000000064"  # current_txn_first_offset int64 = 100
)
EXPECTED_FILE = bytes.fromhex("0001") + bytes.fromhex("1a5886e5") + COVERED  # version, CRC


def test_crc_is_castagnoli() -> None:
    assert crc32c.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c.crc32c(COVERED) == 0x1A5886E5  # the CRC in EXPECTED_FILE


def test_layout_sizes() -> None:
    assert ENTRY.size == 46 and ENTRIES_OFFSET == 10
    assert len(EXPECTED_FILE) == 56


def test_one_entry_snapshot_matches_the_fixed_byte_vector() -> None:
    assert encode_snapshot([ONE_ENTRY]) == EXPECTED_FILE
    assert decode_snapshot(EXPECTED_FILE) == [ONE_ENTRY]


def test_empty_snapshot() -> None:
    data = encode_snapshot([])
    assert data[:2] == b"\x00\x01" and data[6:] == b"\x00\x00\x00\x00"
    assert decode_snapshot(data) == []


def test_entry_without_batches_uses_minus_one_and_reads_back_empty() -> None:
    entry = ProducerStateEntry(7, producer_epoch=2, coordinator_epoch=4, last_timestamp=TS)
    data = encode_snapshot([entry])
    fields = ENTRY.unpack_from(data, ENTRIES_OFFSET)
    assert fields == (7, 2, -1, -1, 0, TS, 4, -1)
    assert decode_snapshot(data) == [entry]


def test_entries_are_written_sorted_by_producer_id() -> None:
    entries = [ProducerStateEntry(pid, 0, last_timestamp=0) for pid in (9, -3, 4)]
    data = encode_snapshot(entries)
    assert [e.producer_id for e in decode_snapshot(data)] == [-3, 4, 9]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda d: b"\x00\x02" + d[2:], "version"),
        (lambda d: d[:2] + b"\x00\x00\x00\x00" + d[6:], "CRC"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 0x80]), "CRC"),
        (lambda d: d[:9], "truncated"),
        (lambda d: d[:-4], "CRC"),
        (lambda d: b"", "truncated"),
    ],
    ids=["bad-version", "zeroed-crc", "flipped-bit", "short-header", "short-entry", "empty"],
)
def test_damaged_file_is_a_typed_corrupt_snapshot_error(damage: object, reason: str) -> None:
    assert callable(damage)
    with pytest.raises(CorruptSnapshotError, match=reason) as raised:
        decode_snapshot(damage(EXPECTED_FILE), "00000000000000000142.snapshot")
    assert isinstance(raised.value, CorruptRecordError)
    assert "00000000000000000142.snapshot" in str(raised.value)


def test_count_that_disagrees_with_the_length_is_corrupt() -> None:
    covered = bytes.fromhex("00000002") + COVERED[4:]  # claims two entries, holds one
    data = bytes.fromhex("0001") + crc32c.crc32c(covered).to_bytes(4, "big") + covered
    with pytest.raises(CorruptSnapshotError, match="2 entries"):
        decode_snapshot(data)


def test_file_names() -> None:
    assert snapshot_file_name(50) == "00000000000000000050.snapshot"
    assert snapshot_offset_of(Path("/x/00000000000000000050.snapshot")) == 50
    assert snapshot_offset_of(Path("00000000000000000050.snapshot.tmp")) is None
    assert snapshot_offset_of(Path("00000000000000000050.log")) is None


def test_write_and_read_file(tmp_path: Path) -> None:
    path = tmp_path / snapshot_file_name(142)
    write_snapshot(path, [ONE_ENTRY])
    assert path.read_bytes() == EXPECTED_FILE
    assert read_snapshot(path) == [ONE_ENTRY]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_write_fsyncs_the_file_and_then_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    write_snapshot(tmp_path / snapshot_file_name(1), [ONE_ENTRY])
    assert synced == ["file", "dir"]  # data durable before the rename is, rename durable after


# --- Hypothesis ----------------------------------------------------------------------------

INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
OFFSET = st.integers(0, (1 << 63) - 1)


@st.composite
def snapshot_entries(draw: st.DrawFn, producer_id: int) -> ProducerStateEntry:
    """Entries as a snapshot can hold them: at most the newest batch, stamped last_timestamp."""
    timestamp = draw(INT64)
    batches: tuple[BatchMetadata, ...] = ()
    if draw(st.booleans()):
        batches = (
            BatchMetadata(
                last_seq=draw(st.integers(0, (1 << 31) - 1)),
                last_offset=draw(OFFSET),
                offset_delta=draw(st.integers(0, (1 << 31) - 1)),
                timestamp=timestamp,
            ),
        )
    return ProducerStateEntry(
        producer_id=producer_id,
        producer_epoch=draw(INT16),
        batch_metadata=batches,
        coordinator_epoch=draw(INT32),
        current_txn_first_offset=draw(st.none() | OFFSET),
        last_timestamp=timestamp,
    )


ENTRY_LISTS = st.lists(INT64, unique=True, max_size=8).flatmap(
    lambda pids: st.tuples(*(snapshot_entries(pid) for pid in pids)).map(list)
)


@given(ENTRY_LISTS)
def test_round_trip(entries: list[ProducerStateEntry]) -> None:
    data = encode_snapshot(entries)
    assert len(data) == ENTRIES_OFFSET + ENTRY.size * len(entries)
    assert decode_snapshot(data) == sorted(entries, key=lambda e: e.producer_id)


@given(ENTRY_LISTS, st.data())
def test_any_flipped_byte_is_detected(
    entries: list[ProducerStateEntry], data: st.DataObject
) -> None:
    encoded = bytearray(encode_snapshot(entries))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(encoded))


@given(ENTRY_LISTS, st.data())
def test_any_truncation_is_detected(entries: list[ProducerStateEntry], data: st.DataObject) -> None:
    encoded = encode_snapshot(entries)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(encoded[:cut])
