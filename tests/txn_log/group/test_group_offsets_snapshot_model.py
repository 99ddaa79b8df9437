"""Group offset snapshot + tail == full replay over random offset-commit histories (issue 14
item 2; O-03..O-05).

A history is plain commits, deletions (null values), transactional commits of a few producers
and their COMMIT / ABORT markers, in log order. For every cut point the state replayed so far is
written to the snapshot file format, read back, restored, and the rest replayed on top: the
materialized offsets (with their log offsets) and the pending ones per producer must equal a
replay from zero. This is where pending transactional offsets cross a snapshot in every way.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from txn_log.group.group_metadata import (
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    OffsetAndMetadata,
)
from txn_log.group.group_offsets import restore_snapshot, snapshot_records
from txn_log.storage.state_snapshot import (
    SnapshotKind,
    StateSnapshot,
    decode_state_snapshot,
    encode_state_snapshot,
)
from txn_log.topic_partition import TopicPartition

KEYS = [(g, TopicPartition("t", p)) for g in ("g0", "g1") for p in (0, 1)]
Event = tuple[str, int, int, int]  # kind, key index, producer id, value

events = st.lists(
    st.tuples(
        st.sampled_from(["plain", "delete", "txn", "txn", "commit", "abort"]),
        st.integers(0, len(KEYS) - 1),
        st.integers(1, 3),
        st.integers(0, 10**6),
    ),
    max_size=40,
)


def apply(groups: GroupMetadata, offset: int, event: Event) -> None:
    kind, key_index, producer_id, value = event
    key = KEYS[key_index]
    if kind in ("commit", "abort"):
        groups.complete_pending_txn(producer_id, kind == "commit")
        return
    committed = None if kind == "delete" else OffsetAndMetadata(value, f"m{value}", value % 7 - 1)
    record = CommitRecordMetadataAndOffset(offset, committed)
    groups.on_offset_commit(key, record, producer_id if kind == "txn" else None)


@settings(max_examples=200, deadline=None)
@given(events)
def test_o05_snapshot_at_every_offset_plus_tail_equals_full_replay(history: list[Event]) -> None:
    full = GroupMetadata()
    for offset, event in enumerate(history):
        apply(full, offset, event)
    for cut in range(len(history) + 1):
        prefix = GroupMetadata()
        for offset, event in enumerate(history[:cut]):
            apply(prefix, offset, event)
        snapshot = StateSnapshot(
            SnapshotKind.GROUP_OFFSETS, cut, None, tuple(snapshot_records(prefix))
        )
        data = encode_state_snapshot(snapshot)
        state = restore_snapshot(decode_state_snapshot(data, SnapshotKind.GROUP_OFFSETS))
        for offset, event in enumerate(history[cut:], start=cut):
            apply(state, offset, event)
        assert state.snapshot_entries() == full.snapshot_entries(), f"snapshot at {cut}"
        assert state.all_committed() == full.all_committed()
        assert state.pending_producer_ids == full.pending_producer_ids
