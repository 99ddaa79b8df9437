"""Random histories on a real log, and the state a fresh process sees, for the snapshot tests.

``run_history`` drives the public API as a streaming sink's tasks do (transactions with
``send_offsets_to_transaction``, commits and aborts, atomic commits under a ledger key, plain
group commits), and may leave transactions open. ``observed_state`` opens the log read-only in
this process, as a fresh process would (snapshot + tail); ``full_replay_state`` does the same
on a copy of the log without any snapshot file, so it replays everything from offset 0. The two
must be equal (issue 14: "whatever replay from zero gives, snapshot+tail gives").
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.transaction_metadata import TransactionMetadata
from txn_log.coordinator.txn_ref import TxnRef
from txn_log.group.group_metadata import GroupOffsetEntry
from txn_log.log import Log
from txn_log.storage.state_snapshot import STATE_SNAPSHOT_SUFFIX
from txn_log.topic_partition import TopicPartition

TOPIC = "data"
IDS = ("task-0", "task-1", "task-2")
GROUPS = ("g0", "g1")
LEDGERS = ("sink-a", "sink-b")


@dataclass(frozen=True)
class ObservedState:
    """What a fresh process's coordinator and group offset store hold."""

    transactions: tuple[TransactionMetadata, ...]
    ledgers: tuple[AtomicCommitEntry, ...]
    groups: tuple[GroupOffsetEntry, ...]
    coordinator_snapshot: int | None
    offsets_snapshot: int | None


def set_intervals(log: Log, records: int) -> None:
    """Snapshot every ``records`` state-log records / offsets (tests use tiny intervals)."""
    log.coordinator.snapshot_interval_records = records
    log.group_offsets.snapshot_interval_offsets = records


def run_history(log: Log, rng: random.Random, steps: int, prefix: str = "") -> dict[str, Any]:
    """``steps`` random operations on transactional ids and ledgers named with ``prefix`` (so
    that processes with different prefixes never fence each other); returns what was
    acknowledged, with each ledger's last committed sequence."""
    ids = tuple(prefix + i for i in IDS)
    ledgers = tuple(prefix + k for k in LEDGERS)
    if TOPIC not in log.topics():
        log.create_topic(TOPIC, partitions=2)
    producers: dict[str, Any] = {}
    sequences = dict.fromkeys(ledgers, 0)
    done = {"commit": 0, "abort": 0, "open": 0, "atomic": 0, "plain": 0}
    for step in range(steps):
        kind = rng.choices(["txn", "atomic", "plain", "reinit"], [6, 2, 1, 1])[0]
        tid = rng.choice(ids)
        group = rng.choice(GROUPS)
        tp = TopicPartition(TOPIC, rng.randrange(2))
        if kind == "plain":
            log.group_offsets.commit(group, {tp: step})
            done["plain"] += 1
            continue
        producer = producers.get(tid)
        if producer is None or kind == "reinit":
            if producer is not None:
                producer.close()
            producer = producers[tid] = log.producer(tid)
            producer.init_transactions()  # aborts what the previous instance left open
            if kind == "reinit":
                continue
        producer.begin_transaction()
        producer.send(TOPIC, b"v%d" % step, partition=tp.partition)
        if kind == "atomic":
            producer.flush()
            ledger = rng.choice(ledgers)
            sequences[ledger] += 1
            ref = TxnRef(tid, producer.producer_id, producer.producer_epoch)
            log.coordinator.commit_transactions(
                ledger,
                sequences[ledger],
                [ref],
                group_id=group,
                offsets=[(TOPIC, tp.partition, step)],
            )
            producer.close()
            del producers[tid]  # its transaction was committed by the coordinator
            done["atomic"] += 1
            continue
        producer.send_offsets_to_transaction({tp: step}, group)
        outcome = rng.choices(["commit", "abort", "open"], [6, 2, 1])[0]
        if outcome == "commit":
            producer.commit_transaction()
        elif outcome == "abort":
            producer.abort_transaction()
        else:
            producer.flush()
            producer.close()  # left open: the next init_transactions() aborts it
            del producers[tid]
        done[outcome] += 1
    for producer in producers.values():
        producer.close()
    return {**done, "sequences": {k: v for k, v in sequences.items() if v}}


def observed_state(path: Path) -> ObservedState:
    """The state a fresh process gets from ``path`` (read-only: it writes nothing)."""
    with Log.open(path, read_only=True, housekeeping_interval_ms=None) as log:
        return ObservedState(
            tuple(log.coordinator.transactions()),
            tuple(log.coordinator.ledgers()),
            tuple(log.group_offsets.snapshot_entries()),
            log.coordinator.started_from_snapshot,
            log.group_offsets.started_from_snapshot,
        )


def full_replay_state(path: Path, scratch: Path) -> ObservedState:
    """The state from replaying every record from offset 0: a copy of the log without any
    snapshot file, opened read-only."""
    copy = scratch / "full-replay"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(
        path, copy, ignore=lambda _d, names: [n for n in names if n.endswith(STATE_SNAPSHOT_SUFFIX)]
    )
    state = observed_state(copy)
    if state.coordinator_snapshot is not None or state.offsets_snapshot is not None:
        raise AssertionError("the full replay copy loaded a snapshot")
    return state


def snapshot_files(path: Path, topic_dir: str) -> list[Path]:
    """The state snapshot files of an internal topic's partition directory, oldest first."""
    return sorted((path / topic_dir).glob(f"*{STATE_SNAPSHOT_SUFFIX}"))


def same_state(a: ObservedState, b: ObservedState) -> bool:
    return (a.transactions, a.ledgers, a.groups) == (b.transactions, b.ledgers, b.groups)
