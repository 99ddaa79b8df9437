"""The internal topics' key layout is compaction-correct, on real logs (C-02, C-10, C-11, C-27,
issue 14 item 3).

The cleaner is another branch's work; these tests do not need it. They read the records a real
history wrote to ``__transaction_state`` and ``__consumer_offsets`` and build the log a
transaction-aware cleaner would leave (Kafka's rules: only below the partition's last stable
offset; aborted transactional records dropped; control markers kept; of the rest, the newest
record per key; offsets unchanged), then replay it the way the coordinator and the group offset
store do. The result must equal replaying the full log, and what a fresh process sees.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from tests.txn_log.snapshot_history import observed_state, run_history, set_intervals
from txn_log.clock import ManualClock
from txn_log.coordinator.coordinator_state import CoordinatorState
from txn_log.coordinator.state_log_format import decode_record
from txn_log.coordinator.transaction_metadata import DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS
from txn_log.coordinator.transaction_state import TransactionState
from txn_log.group.group_metadata import CommitRecordMetadataAndOffset, GroupMetadata
from txn_log.group.group_offsets_format import decode_record as decode_offset_record
from txn_log.log import Log
from txn_log.record.codec import iter_records
from txn_log.record.control import ControlType
from txn_log.storage.replay import read_control_record
from txn_log.topic_partition import TopicPartition

STATE = TopicPartition("__transaction_state", 0)
OFFSETS = TopicPartition("__consumer_offsets", 0)


@dataclass(frozen=True)
class Rec:
    """One record of a partition as a cleaner sees it."""

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int | None  # transactional records only
    marker: ControlType | None = None  # control records only


def read_partition(log: Log, tp: TopicPartition) -> list[Rec]:
    out = []
    reader = log.partition_reader(tp)
    for header, batch in reader.read(reader.log_start_offset):
        if header.is_control:
            marker = read_control_record(header, batch).control_type
            out.append(Rec(header.base_offset, None, None, header.producer_id, marker))
            continue
        pid = header.producer_id if header.is_transactional else None
        out += [Rec(r.offset, r.key, r.value, pid) for r in iter_records(batch)]
    return out


def compact(records: list[Rec]) -> list[Rec]:
    """What a transaction-aware keep-newest-per-key cleaner leaves (module docstring)."""
    fate: dict[int, str] = {}  # record offset -> "commit" / "abort" / "open"
    open_by_pid: dict[int, list[int]] = {}
    for rec in records:
        if rec.marker is not None and rec.producer_id is not None:
            outcome = "commit" if rec.marker is ControlType.COMMIT else "abort"
            for offset in open_by_pid.pop(rec.producer_id, []):
                fate[offset] = outcome
        elif rec.producer_id is not None:
            open_by_pid.setdefault(rec.producer_id, []).append(rec.offset)
    open_offsets = [o for offsets in open_by_pid.values() for o in offsets]
    lso = min(open_offsets, default=records[-1].offset + 1 if records else 0)
    cleanable = [
        r for r in records if r.offset < lso and r.marker is None and fate.get(r.offset) != "abort"
    ]
    newest = {r.key: r.offset for r in cleanable}
    return [
        r
        for r in records
        if r.offset >= lso or r.marker is not None or (r in cleanable and newest[r.key] == r.offset)
    ]


def replay_coordinator(records: list[Rec]) -> CoordinatorState:
    return CoordinatorState.replay(decode_record(r.key or b"", r.value) for r in records)


def replay_offsets(records: list[Rec]) -> GroupMetadata:
    """As ``GroupOffsetStore._catch_up`` applies them."""
    groups = GroupMetadata()
    for rec in records:
        if rec.marker is not None:
            if (
                rec.marker in (ControlType.COMMIT, ControlType.ABORT)
                and rec.producer_id is not None
            ):
                groups.complete_pending_txn(rec.producer_id, rec.marker is ControlType.COMMIT)
            continue
        decoded = decode_offset_record(rec.key, rec.value)
        if decoded is not None:
            group_id, tp, committed = decoded
            commit = CommitRecordMetadataAndOffset(rec.offset, committed)
            groups.on_offset_commit((group_id, tp), commit, rec.producer_id)
    return groups


def test_c02_compacted_internal_topics_replay_to_the_same_state(tmp_path: Path) -> None:
    seed = int(os.environ.get("TXNLOG_TEST_SEED", random.randrange(2**32)))
    print(f"TXNLOG_TEST_SEED={seed}")
    path = tmp_path / "log"
    with Log.open(path, housekeeping_interval_ms=None) as log:
        set_intervals(log, 10**9)
        run_history(log, random.Random(seed), 120)
        # leave one transaction open with pending offsets: nothing at or past the LSO is cleaned
        producer = log.producer("task-open")
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("data", b"open", partition=0)
        producer.send_offsets_to_transaction({TopicPartition("data", 0): 999}, "g0")
        producer.flush()
        state_records = read_partition(log, STATE)
        offsets_records = read_partition(log, OFFSETS)
        producer.close()
    reduced_state, reduced_offsets = compact(state_records), compact(offsets_records)
    assert len(reduced_state) < len(state_records) / 3  # compaction really removed records
    assert len(reduced_offsets) < len(offsets_records)
    full_state = replay_coordinator(state_records)
    assert replay_coordinator(reduced_state).snapshot_entries() == full_state.snapshot_entries()
    full_groups = replay_offsets(offsets_records)
    assert replay_offsets(reduced_offsets).snapshot_entries() == full_groups.snapshot_entries()
    assert full_groups.pending_producer_ids  # the open transaction's offsets are pending
    fresh = observed_state(path)  # and both equal what the engine itself replays
    assert tuple(full_state.ledger_entries()) == fresh.ledgers
    assert tuple(full_groups.snapshot_entries()) == fresh.groups


def test_c10_completed_transaction_newest_record_is_all_expiration_needs(tmp_path: Path) -> None:
    """C-10: after COMPLETE_* the id's newest record holds no partitions, only the producer id,
    epoch and timestamps, so compaction can drop every older record of the transaction."""
    with Log.open(tmp_path / "log", housekeeping_interval_ms=None) as log:
        log.create_topic("data", partitions=1)
        producer = log.producer("t")
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("data", b"x", partition=0)
        producer.send_offsets_to_transaction({TopicPartition("data", 0): 1}, "g")
        producer.commit_transaction()
        records = read_partition(log, STATE)
    newest = [decode_record(r.key or b"", r.value) for r in compact(records)]
    assert len(newest) == 1
    md = newest[0].metadata  # type: ignore[union-attr]
    assert md is not None and md.state is TransactionState.COMPLETE_COMMIT
    assert md.topic_partitions == frozenset()
    assert md.producer_id == producer.producer_id and md.txn_last_update_timestamp_ms > 0
    assert len(records) >= 4  # Empty, Ongoing (x2), PrepareCommit, CompleteCommit


def test_c27_c11_t12_idle_id_is_tombstoned_by_a_production_log(tmp_path: Path) -> None:
    """C-27 runs in production: an ordinary ``Log.open`` coordinator, on an ordinary
    operation, writes a tombstone (C-11) for an id idle past transactional.id.expiration.ms;
    keep-newest-per-key then leaves only that tombstone, and the snapshot drops the id."""
    clock = ManualClock()
    path = tmp_path / "log"
    with Log.open(path, clock=clock, housekeeping_interval_ms=None) as log:
        log.create_topic("data", partitions=1)
        idle = log.producer("idle")
        idle.init_transactions()
        idle.begin_transaction()
        idle.send("data", b"x", partition=0)
        idle.commit_transaction()
        clock.advance(DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS + 1000)
        busy = log.producer("busy")
        busy.init_transactions()  # any coordinator operation runs the expiration scan
        assert [md.transactional_id for md in log.coordinator.transactions()] == ["busy"]
        records = read_partition(log, STATE)
    newest = [decode_record(r.key or b"", r.value) for r in compact(records)]
    by_id = {e.transactional_id: e.metadata for e in newest}  # type: ignore[union-attr]
    assert "idle" in by_id and by_id["idle"] is None  # the tombstone survives compaction
    assert by_id["busy"] is not None
    assert [md.transactional_id for md in replay_coordinator(compact(records)).snapshot_entries()
            if hasattr(md, "transactional_id")] == ["busy"]  # fmt: skip
