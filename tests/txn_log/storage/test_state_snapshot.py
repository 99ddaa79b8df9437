"""The state snapshot file format (``storage/state_snapshot.py``; STYLE 6, issue 14).

Round trip of any content; every truncation, every single-bit flip, an unknown version and the
wrong kind raise ``CorruptSnapshotError`` (never a wrong snapshot, never a raw struct.error);
a file whose name disagrees with its offset is refused; only the newest two files are kept and
leftover temporary files are removed.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txn_log.errors import CorruptSnapshotError
from txn_log.storage.durable_file import temp_path_for
from txn_log.storage.state_snapshot import (
    BatchFingerprint,
    SnapshotKind,
    SnapshotRecord,
    StateSnapshot,
    StateSnapshotDir,
    decode_state_snapshot,
    encode_state_snapshot,
    state_snapshot_file_name,
)

records = st.builds(
    SnapshotRecord,
    st.binary(max_size=40),
    st.none() | st.binary(max_size=40),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
)
snapshots = st.builds(
    StateSnapshot,
    st.sampled_from(list(SnapshotKind)),
    st.integers(0, 2**63 - 1),
    st.none() | st.builds(BatchFingerprint, st.integers(0, 2**62), st.integers(0, 2**32 - 1)),
    st.lists(records, max_size=6).map(tuple),
)


@given(snapshots)
def test_style6_round_trip(snapshot: StateSnapshot) -> None:
    assert decode_state_snapshot(encode_state_snapshot(snapshot), snapshot.kind) == snapshot


@settings(max_examples=50)
@given(snapshots, st.data())
def test_style6_every_truncation_and_bit_flip_is_refused(
    snapshot: StateSnapshot, data: st.DataObject
) -> None:
    encoded = encode_state_snapshot(snapshot)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(CorruptSnapshotError):
        decode_state_snapshot(encoded[:cut], snapshot.kind)
    flipped = bytearray(encoded)
    bit = data.draw(st.integers(0, len(encoded) * 8 - 1))
    flipped[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CorruptSnapshotError):
        decode_state_snapshot(bytes(flipped), snapshot.kind)


def test_style6_unknown_version_and_wrong_kind_are_refused() -> None:
    snapshot = StateSnapshot(SnapshotKind.COORDINATOR, 10, None, (SnapshotRecord(b"k", None),))
    encoded = bytearray(encode_state_snapshot(snapshot))
    with pytest.raises(CorruptSnapshotError, match="kind 1, expected 2"):
        decode_state_snapshot(bytes(encoded), SnapshotKind.GROUP_OFFSETS)
    for version in (1, 3):  # 1: the layout before topic ids, read as unknown (full replay once)
        struct.pack_into(">h", encoded, 0, version)
        with pytest.raises(CorruptSnapshotError, match=f"unknown state snapshot version {version}"):
            decode_state_snapshot(bytes(encoded), SnapshotKind.COORDINATOR)


def test_file_named_for_another_offset_is_refused(tmp_path: Path) -> None:
    snapshots = StateSnapshotDir(tmp_path, SnapshotKind.COORDINATOR)
    data = encode_state_snapshot(StateSnapshot(SnapshotKind.COORDINATOR, 10, None, ()))
    (tmp_path / state_snapshot_file_name(12)).write_bytes(data)
    with pytest.raises(CorruptSnapshotError, match="holds offset 10, its name says 12"):
        snapshots.read(12)


def test_prune_keeps_the_newest_two_and_leftovers_are_removed(tmp_path: Path) -> None:
    snapshots = StateSnapshotDir(tmp_path, SnapshotKind.GROUP_OFFSETS)
    for offset in (3, 30, 300):
        snapshot = StateSnapshot(SnapshotKind.GROUP_OFFSETS, offset, None, ())
        snapshots.path_of(offset).write_bytes(encode_state_snapshot(snapshot))
    leftover = temp_path_for(snapshots.path_of(400))
    leftover.write_bytes(b"half")
    unrelated = tmp_path / "00000000000000000003.snapshot"  # a producer snapshot: not ours
    unrelated.write_bytes(b"x")
    snapshots.prune()
    snapshots.remove_leftovers()
    assert snapshots.offsets() == [30, 300]
    assert not leftover.exists() and unrelated.exists()
