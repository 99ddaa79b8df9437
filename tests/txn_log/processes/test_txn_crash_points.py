"""Real processes killed at every step of a commit or abort, then recovered (TESTING.md
scenarios 5-6, DESIGN §3-4).

A worker process (``txn_workers.py``) writes one transaction over three partitions plus group
offsets (``send_offsets_to_transaction``), and commits or aborts it with a crash point armed
(``txn_log/fault_points.py``): it SIGKILLs itself after PREPARE_* is durable but before any
marker, between two markers, or after every marker but before COMPLETE_*. The test first
inspects the files *without* touching the coordinator (the crash happened exactly where it
should), then lets a new instance recover, either a fresh process calling
``init_transactions()`` with the same transactional id or a fresh ``Log.open`` here touching
``coordinator.transactions()``, and checks:

* the transaction finished (G-06: once PREPARE_* is written it completes; C-19: markers on
  every partition, then COMPLETE_*; X-04: a new instance's InitPid finishes the commit; X-05:
  roll-forward after a crash part-way through the markers);
* read_committed shows exactly the committed data (all of it after PREPARE_COMMIT, nothing after
  an abort), in order, and read_uncommitted still holds the aborted records (they are filtered,
  not lost);
* no partition's LSO stays behind its log end (B-03, B-04), group offsets are visible iff the
  transaction committed (O-04, O-05);
* markers the roll-forward writes again are harmless (C-20, X-05) and a second recovery changes
  nothing: same files, indexes, producer state and coordinator state (TESTING.md, first
  paragraph);
* the transactional id is usable again.

The atomic commit of DESIGN §4 (a Spark sink's micro-batch) gets the same treatment: two worker
processes each leave one open transaction on their own partitions, a third process runs
``commit_transactions`` and is killed at the ``batch.*`` crash points (and at the
per-transaction ones it passes through), and recovery rolls the whole commit forward (G-06 for
its single PREPARE record).

Finally a producer SIGKILLed by its parent mid-transaction (before EndTxn) pins the LSO until the
next ``init_transactions()`` aborts its transaction (X-03, C-14).

Seeds: ``TXNLOG_TEST_SEED=<n>`` replays a run; the seed is printed by every test.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from commit_protocol.embedded import EmbeddedBackend
from tests.txn_log.processes.txn_workers import value_for
from txn_log.coordinator.atomic_commit_format import AtomicCommitEntry
from txn_log.coordinator.state_log_format import (
    StateLogEntry,
    TransactionLogEntry,
    decode_record,
)
from txn_log.coordinator.transaction_coordinator import STATE_PARTITION
from txn_log.coordinator.transaction_state import TransactionState
from txn_log.errors import TransactionAbortableError, UnknownTopicOrPartitionError
from txn_log.group.group_offsets import OFFSETS_PARTITION, OffsetAndMetadata
from txn_log.log import Log
from txn_log.record.codec import iter_records
from txn_log.record.control import ControlType
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.replay import read_control_record
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[3]
SEED = int(os.environ.get("TXNLOG_TEST_SEED", random.randrange(1 << 30)))
TOPIC = "out"
INPUT = "in"
GROUP = "copier"
SINK = "sink"
WORKER_TIMEOUT_S = 60


def rng_for(name: str) -> random.Random:
    print(f"seed={SEED} (replay with TXNLOG_TEST_SEED={SEED}) test={name}")
    return random.Random(f"{SEED}-{name}")


# --- running workers ---------------------------------------------------------------------------


@dataclass
class Worker:
    returncode: int
    lines: list[dict[str, Any]]
    stderr: str


def worker_command(*args: object) -> list[str]:
    return [sys.executable, "-m", "tests.txn_log.processes.txn_workers", *map(str, args)]


def worker_env(crash_point: str | None, crash_after: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH_")}
    if crash_point is not None:
        env["TXNLOG_CRASH_POINT"] = crash_point
    if crash_after is not None:
        env["TXNLOG_CRASH_AFTER"] = str(crash_after)
    return env


def parse_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_worker(
    *args: object, crash_point: str | None = None, crash_after: int | None = None
) -> Worker:
    proc = subprocess.run(
        worker_command(*args),
        cwd=ROOT,
        env=worker_env(crash_point, crash_after),
        capture_output=True,
        text=True,
        timeout=WORKER_TIMEOUT_S,
    )
    return Worker(proc.returncode, parse_lines(proc.stdout), proc.stderr)


def assert_killed(worker: Worker, crash_point: str) -> None:
    """The worker reached the crash point and died by SIGKILL, after flushing its data."""
    assert worker.returncode == -signal.SIGKILL, (
        f"{crash_point}: worker exited with {worker.returncode}, expected SIGKILL\n{worker.stderr}"
    )
    steps = [line["step"] for line in worker.lines]
    assert steps == ["flushed"], f"{crash_point}: worker reported {steps}"


def assert_ok(worker: Worker) -> dict[str, Any]:
    assert worker.returncode == 0, worker.stderr
    assert worker.lines and worker.lines[-1]["step"] == "done", worker.lines
    return worker.lines[-1]


# --- inspecting the files without touching the coordinator -------------------------------------


def markers(plog: PartitionLog) -> list[ControlType]:
    """The control type of every COMMIT/ABORT marker in the partition, in offset order."""
    return [
        read_control_record(header, data).control_type
        for header, data in plog.read(plog.log_start_offset)
        if header.is_control
    ]


def state_log_entries(log: Log) -> list[StateLogEntry]:
    """The coordinator's state log as written (no replay, no roll-forward)."""
    entries: list[StateLogEntry] = []
    for _, batch in log.partition_log(STATE_PARTITION).read(0):
        entries.extend(decode_record(r.key or b"", r.value) for r in iter_records(batch))
    return entries


def last_txn_state(entries: list[StateLogEntry], transactional_id: str) -> TransactionState:
    states = [
        e.metadata.state
        for e in entries
        if isinstance(e, TransactionLogEntry)
        and e.transactional_id == transactional_id
        and e.metadata is not None
    ]
    assert states, f"no state log entry for {transactional_id!r}"
    return states[-1]


def last_commit_status(entries: list[StateLogEntry], ledger: str) -> TransactionState | None:
    statuses = [
        e.status for e in entries if isinstance(e, AtomicCommitEntry) and e.ledger_key == ledger
    ]
    return statuses[-1] if statuses else None


# --- the state after recovery --------------------------------------------------------------------


def fingerprint(log_dir: Path, tps: list[TopicPartition]) -> dict[str, Any]:
    """Everything recovery could change, seen by a fresh open that touches the coordinator
    first (so that a second roll-forward, if any, would show)."""
    log = Log.open(log_dir)
    try:
        coordinator_state = [
            (md.transactional_id, md.producer_id, md.producer_epoch, md.state, md.topic_partitions)
            for md in log.coordinator.transactions()
        ]
        ledger = log.coordinator.ledger_entry(SINK)
        committed = log.consumer("read_committed")
        everything = log.consumer("read_uncommitted")
        out: dict[str, Any] = {"coordinator": coordinator_state, "ledger": ledger}
        for tp in [*tps, OFFSETS_PARTITION, STATE_PARTITION]:
            plog = log.partition_log(tp)
            end = plog.log_end_offset
            out[str(tp)] = {
                "log_end": end,
                "lso": plog.last_stable_offset,
                "read_committed_end": committed.end_offset(tp),
                "committed": [(r.offset, r.value) for r in committed.read(tp, 0)],
                "uncommitted": [(r.offset, r.value) for r in everything.read(tp, 0)],
                "markers": markers(plog),
                "aborted": plog.collect_aborted_txns(0, end),
                "producers": dict(plog.producer_state.active_producers()),
            }
        out["groups"] = log.group_offsets.groups()
        out["files"] = {
            str(p.relative_to(log_dir)): p.stat().st_size
            for p in sorted(log_dir.rglob("*"))
            if p.suffix in (".log", ".txnindex", ".index", ".timeindex")
        }
        return out
    finally:
        log.close()


def assert_finished(
    fp: dict[str, Any],
    tps: list[TopicPartition],
    expected: dict[TopicPartition, list[bytes]],
    offsets: dict[TopicPartition, int],
    committed: bool,
) -> None:
    """The transaction(s) finished exactly once, with the outcome ``committed``."""
    wanted = ControlType.COMMIT if committed else ControlType.ABORT
    for tp in [*tps, OFFSETS_PARTITION]:
        part = fp[str(tp)]
        assert part["lso"] == part["log_end"] == part["read_committed_end"], (tp, part)
    for tp in tps:
        part = fp[str(tp)]
        values = expected.get(tp, [])
        visible = [v for _, v in part["committed"]]
        assert visible == (values if committed else []), tp
        assert [v for _, v in part["uncommitted"]] == values, tp  # aborted: filtered, not lost
        offsets_seen = [o for o, _ in part["committed"]]
        assert offsets_seen == sorted(set(offsets_seen)), tp
        if values:
            # every written partition got its marker; a re-written one is harmless (C-20, X-05)
            assert 1 <= len(part["markers"]) <= 2, (tp, part["markers"])
            assert set(part["markers"]) == {wanted}, (tp, part["markers"])
            assert bool(part["aborted"]) is not committed, (tp, part["aborted"])
        else:
            assert part["markers"] == [] and part["uncommitted"] == [], tp
    groups = fp["groups"]
    if committed:
        assert groups.get(GROUP) == {tp: OffsetAndMetadata(o) for tp, o in offsets.items()}
    else:
        assert GROUP not in groups
    for name, _, _, state, _ in fp["coordinator"]:
        assert state in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        ), (name, state)


def assert_second_recovery_changes_nothing(
    log_dir: Path, tps: list[TopicPartition], first: dict[str, Any]
) -> None:
    second = fingerprint(log_dir, tps)
    for key in first:
        assert second[key] == first[key], key


def assert_id_usable(log_dir: Path, transactional_id: str, old_epoch: int) -> None:
    """A new instance of the id fences the old epochs and commits a transaction of its own."""
    log = Log.open(log_dir)
    try:
        producer = log.producer(transactional_id)
        producer.init_transactions()
        assert producer.producer_epoch > old_epoch
        tp = TopicPartition(TOPIC, 0)
        before = log.consumer("read_committed").read(tp, 0)
        producer.begin_transaction()
        producer.send(TOPIC, b"after-recovery", partition=0)
        producer.commit_transaction()
        after = log.consumer("read_committed").read(tp, 0)
        assert [r.value for r in after] == [r.value for r in before] + [b"after-recovery"]
        plog = log.partition_log(tp)
        assert plog.last_stable_offset == plog.log_end_offset
    finally:
        log.close()


# --- setup ---------------------------------------------------------------------------------------


def new_log(log_dir: Path, partitions: int) -> None:
    log = Log.open(log_dir)
    log.create_topic(TOPIC, partitions=partitions)
    log.create_topic(INPUT, partitions=2)
    log.close()


def plan(rng: random.Random, partitions: list[int]) -> dict[int, int]:
    """A random record count per partition (several 4 KiB batches for most of them)."""
    return {p: rng.randint(1, 80) for p in partitions}


def parts_arg(counts: dict[int, int]) -> str:
    return ",".join(f"{p}:{c}" for p, c in sorted(counts.items()))


def expected_values(
    transactional_id: str, counts: dict[int, int]
) -> dict[TopicPartition, list[bytes]]:
    return {
        TopicPartition(TOPIC, p): [value_for(transactional_id, p, i) for i in range(c)]
        for p, c in counts.items()
    }


def offsets_arg(offsets: dict[TopicPartition, int]) -> str:
    return json.dumps({f"{tp.topic}:{tp.partition}": o for tp, o in offsets.items()})


# --- one transaction, every crash point ----------------------------------------------------------

TXN_ID = "copier-0"
# (crash point, TXNLOG_CRASH_AFTER, markers written before the crash). The transaction touches
# __consumer_offsets-0, out-0, out-1, out-2; markers go in that (sorted) order.
TXN_CRASHES = [
    ("txn.after_prepare", None, 0),
    ("txn.between_markers", 1, 1),
    ("txn.between_markers", 3, 3),
    ("txn.before_complete", None, 4),
]


@pytest.mark.parametrize("recover_by", ["init_transactions", "coordinator_touch"])
@pytest.mark.parametrize("outcome", ["commit", "abort"])
@pytest.mark.parametrize(
    ("crash_point", "crash_after", "marked"),
    TXN_CRASHES,
    ids=[f"{p}@{a or 1}" for p, a, _ in TXN_CRASHES],
)
def test_crash_during_end_txn_is_finished_by_the_next_instance(
    tmp_path: Path,
    crash_point: str,
    crash_after: int | None,
    marked: int,
    outcome: str,
    recover_by: str,
) -> None:
    """G-06, C-19, X-04, X-05: a commit or abort killed after its PREPARE_* record completes
    with that outcome when the next process touches the coordinator."""
    rng = rng_for(f"{crash_point}@{crash_after}-{outcome}-{recover_by}")
    log_dir = tmp_path / "log"
    new_log(log_dir, partitions=4)  # out-3 stays outside the transaction
    counts = plan(rng, [0, 1, 2])
    offsets = {
        TopicPartition(INPUT, 0): rng.randint(1, 10_000),
        TopicPartition(INPUT, 1): rng.randint(1, 10_000),
    }
    worker = run_worker(
        "txn", log_dir, TXN_ID, outcome, TOPIC, parts_arg(counts), GROUP, offsets_arg(offsets),
        crash_point=crash_point,
        crash_after=crash_after,
    )  # fmt: skip
    assert_killed(worker, crash_point)
    old_epoch = worker.lines[0]["producer_epoch"]

    # The files as the crash left them, read without the coordinator (no roll-forward yet).
    tps = [TopicPartition(TOPIC, p) for p in range(4)]
    in_txn = [OFFSETS_PARTITION, *(TopicPartition(TOPIC, p) for p in sorted(counts))]
    log = Log.open(log_dir)
    prepared = (
        TransactionState.PREPARE_COMMIT if outcome == "commit" else TransactionState.PREPARE_ABORT
    )
    assert last_txn_state(state_log_entries(log), TXN_ID) is prepared
    for index, tp in enumerate(in_txn):
        plog = log.partition_log(tp)
        assert len(markers(plog)) == (1 if index < marked else 0), (tp, markers(plog))
        if index >= marked:
            assert plog.last_stable_offset < plog.log_end_offset, tp  # still pinned
    pre_markers = {str(tp): len(markers(log.partition_log(tp))) for tp in in_txn}
    log.close()

    # Recovery: the next instance of the id, or any process touching the coordinator.
    if recover_by == "init_transactions":
        done = assert_ok(run_worker("init", log_dir, TXN_ID))
        assert done["producer_id"] == worker.lines[0]["producer_id"]
        assert done["producer_epoch"] == old_epoch + 1
    else:
        log = Log.open(log_dir)
        [md] = log.coordinator.transactions()
        assert md.state is (
            TransactionState.COMPLETE_COMMIT
            if outcome == "commit"
            else TransactionState.COMPLETE_ABORT
        )
        log.close()

    first = fingerprint(log_dir, tps)
    expected = expected_values(TXN_ID, counts)
    assert_finished(first, tps, expected, offsets, committed=outcome == "commit")
    for name, count in pre_markers.items():
        assert len(first[name]["markers"]) >= count, name  # nothing was un-written
    assert_second_recovery_changes_nothing(log_dir, tps, first)
    assert_id_usable(log_dir, TXN_ID, old_epoch)


# --- the atomic commit (DESIGN §4) ---------------------------------------------------------------

TASKS = {"sink-0": [0, 1, 2], "sink-1": [3, 4, 5]}
# The driver's commit touches sink-0's out-0..2, then sink-1's out-3..5 (C-19 per member), then
# the sink group's offsets, then writes COMPLETE for the batch.
BATCH_CRASHES = [
    ("batch.after_prepare", None),
    ("txn.between_markers", 3),  # sink-0's 3 markers and sink-1's first written
    ("txn.before_complete", 1),  # first member's markers all written, its COMPLETE not
    ("batch.before_complete", None),
]
# data-partition markers already written when the driver dies at each point
MARKERS_AT_CRASH = {
    "batch.after_prepare": 0,
    "txn.between_markers": 4,
    "txn.before_complete": 3,
    "batch.before_complete": 6,
}


def open_task_transactions(
    log_dir: Path, counts: dict[str, dict[int, int]]
) -> list[dict[str, Any]]:
    """Each task transaction written by its own process, concurrently, left open."""
    procs = [
        subprocess.Popen(
            worker_command("open", log_dir, tid, TOPIC, parts_arg(counts[tid])),
            cwd=ROOT,
            env=worker_env(None, None),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tid in TASKS
    ]
    refs = []
    for proc in procs:
        out, err = proc.communicate(timeout=WORKER_TIMEOUT_S)
        assert proc.returncode == 0, err
        [line] = parse_lines(out)
        refs.append({k: line[k] for k in ("transactional_id", "producer_id", "producer_epoch")})
    return refs


@pytest.mark.parametrize("recover_by", ["commit_retry", "coordinator_touch"])
@pytest.mark.parametrize(
    ("crash_point", "crash_after"),
    BATCH_CRASHES,
    ids=[f"{p}@{a or 1}" for p, a in BATCH_CRASHES],
)
def test_atomic_commit_killed_after_its_commit_point_rolls_forward(
    tmp_path: Path, crash_point: str, crash_after: int | None, recover_by: str
) -> None:
    """DESIGN §4, G-06, X-05: the batch's PREPARE record commits both task transactions (each
    from another process) and the sink's offsets, whatever step the driver dies at."""
    rng = rng_for(f"batch-{crash_point}@{crash_after}-{recover_by}")
    log_dir = tmp_path / "log"
    new_log(log_dir, partitions=6)
    counts = {tid: plan(rng, partitions) for tid, partitions in TASKS.items()}
    refs = open_task_transactions(log_dir, counts)
    offsets = {TopicPartition(INPUT, 0): rng.randint(1, 10_000), TopicPartition(INPUT, 1): 7}
    batch_id = rng.randint(0, 100)
    commit_args = (
        "commit-transactions",
        log_dir,
        SINK,
        batch_id,
        json.dumps(refs),
        GROUP,
        offsets_arg(offsets),
    )
    driver = run_worker(*commit_args, crash_point=crash_point, crash_after=crash_after)
    assert driver.returncode == -signal.SIGKILL, driver.stderr
    assert driver.lines == []

    tps = [TopicPartition(TOPIC, p) for p in range(6)]
    log = Log.open(log_dir)
    entries = state_log_entries(log)
    assert last_commit_status(entries, SINK) is TransactionState.PREPARE_COMMIT
    written = sum(len(markers(log.partition_log(tp))) for tp in tps)
    assert written == MARKERS_AT_CRASH[crash_point]
    log.close()

    if recover_by == "commit_retry":  # Spark calls commit again for the same batch
        assert assert_ok(run_worker(*commit_args))["committed"] is False
    else:
        log = Log.open(log_dir)
        assert log.coordinator.ledger_has(SINK, batch_id)
        log.close()

    first = fingerprint(log_dir, tps)
    expected = {}
    for tid in TASKS:
        expected.update(expected_values(tid, counts[tid]))
    assert_finished(first, tps, expected, offsets, committed=True)
    assert first["ledger"].status is TransactionState.COMPLETE_COMMIT
    assert first["ledger"].sequence == batch_id
    assert [name for name, *_ in first["coordinator"]] == sorted(TASKS)
    assert_second_recovery_changes_nothing(log_dir, tps, first)
    log = Log.open(log_dir)
    assert log.coordinator.open_transactions(f"{SINK}-") == []
    assert log.coordinator.commit_transactions(SINK, batch_id, []) is False  # idempotent ledger
    log.close()
    for ref in refs:
        assert_id_usable(log_dir, ref["transactional_id"], ref["producer_epoch"])


# --- a producer killed before EndTxn (X-03) ------------------------------------------------------


def test_producer_killed_mid_transaction_is_aborted_by_the_next_init(tmp_path: Path) -> None:
    """X-03, C-14: the parent SIGKILLs a producer with an open transaction; the transaction pins
    the LSO (touching the coordinator alone does not end it before its timeout) until the next
    instance's init_transactions() aborts it."""
    rng = rng_for("killed-before-end-txn")
    log_dir = tmp_path / "log"
    new_log(log_dir, partitions=4)
    counts = plan(rng, [0, 1, 3])
    proc = subprocess.Popen(
        worker_command("open", log_dir, TXN_ID, TOPIC, parts_arg(counts), "hang"),
        cwd=ROOT,
        env=worker_env(None, None),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # written and flushed, transaction open
    assert line, proc.stderr.read() if proc.stderr else ""
    ready = json.loads(line)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=WORKER_TIMEOUT_S)
    assert proc.returncode == -signal.SIGKILL

    tps = [TopicPartition(TOPIC, p) for p in range(4)]
    log = Log.open(log_dir)
    [md] = log.coordinator.transactions()
    assert md.state is TransactionState.ONGOING
    for p in counts:
        plog = log.partition_log(TopicPartition(TOPIC, p))
        assert plog.last_stable_offset == 0 < plog.log_end_offset  # pinned at its first offset
        assert log.consumer("read_committed").read(TopicPartition(TOPIC, p), 0) == []
    log.close()

    done = assert_ok(run_worker("init", log_dir, TXN_ID))
    assert (done["producer_id"], done["producer_epoch"]) == (
        ready["producer_id"],
        ready["producer_epoch"] + 2,  # one bump to fence and abort (T9), one for the new instance
    )
    first = fingerprint(log_dir, tps)
    assert_finished(first, tps, expected_values(TXN_ID, counts), {}, committed=False)
    assert_second_recovery_changes_nothing(log_dir, tps, first)
    assert_id_usable(log_dir, TXN_ID, done["producer_epoch"])


# --- an engine bug found on the way ----------------------------------------------------------


def test_unknown_partition_is_refused_before_it_joins_the_transaction(tmp_path: Path) -> None:
    """C-16, C-19: a send to a partition that does not exist must fail *before* the partition
    is registered with the coordinator. Otherwise the abort's PREPARE_ABORT lists a partition no
    marker can be written to, and every later coordinator call, in every process, fails while
    rolling it forward: the whole log is wedged. The failed send leaves the transaction
    abortable only (issue 12 item 3); after the abort, the next transaction commits."""
    log = Log.open(tmp_path / "log")
    log.create_topic(TOPIC, partitions=2)
    producer = log.producer(TXN_ID)
    producer.init_transactions()
    producer.begin_transaction()
    with pytest.raises(UnknownTopicOrPartitionError, match="partition 5"):
        producer.send(TOPIC, b"lost", partition=5)
    with pytest.raises(TransactionAbortableError, match="partition 5"):
        producer.send(TOPIC, b"kept", partition=1)
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send(TOPIC, b"kept", partition=1)
    producer.commit_transaction()
    assert [r.value for r in log.consumer().read(TopicPartition(TOPIC, 1), 0)] == [b"kept"]
    other = log.producer("another-id")
    other.init_transactions()  # the coordinator is not wedged
    assert [md.state for md in log.coordinator.transactions()] == [
        TransactionState.EMPTY,
        TransactionState.COMPLETE_COMMIT,
    ]
    log.close()


@pytest.mark.parametrize("between", ["nothing", "another_writer"])
def test_an_abort_entry_whose_marker_never_landed_stalls_and_hides_nothing(
    tmp_path: Path, between: str
) -> None:
    """A process is SIGKILLed after it made an ABORT's ``.txnindex`` entry durable but before
    the marker (entry first, so a reader that sees the marker sees the entry; B-10). This
    process had the partition open all along (no recovery on open will clean up for it):

    * ``nothing``: the roll-forward's retry of the marker lands at the same offset, which the
      stale entry already claims; it must succeed, not fail every coordinator call;
    * ``another_writer``: a task transaction registered earlier appends at that offset first,
      then aborts; its records must stay hidden from read_committed reads whose upper bound is
      right after them (the stale entry's LSO must not end the index search early, B-12).
    """
    rng_for(f"stale-abort-entry-{between}")
    live = Log.open(tmp_path)
    live.create_topic(TOPIC, partitions=1)
    tp = TopicPartition(TOPIC, 0)
    task = EmbeddedBackend(live).begin_transaction("task-0", 60_000, "none")
    task.register([tp])  # a Spark write task registers its partitions ahead of its writes
    end_before = live.partition_log(tp).log_end_offset  # this process has the partition open
    dead = run_worker(
        "txn", tmp_path, "dying", "abort", TOPIC, "0:5", GROUP, "{}",
        crash_point="marker.after_txn_index",
    )  # fmt: skip
    assert_killed(dead, "marker.after_txn_index")
    marker_offset = end_before + 5  # where the ABORT marker should have gone
    plog = live.partition_log(tp)
    assert plog.log_end_offset == marker_offset  # the data is there, the marker is not
    if between == "another_writer":
        task.write(tp, pa.record_batch([pa.array([b"task-%d" % i for i in range(3)])], ["value"]))
        task.flush()  # the producer buffers what a task writes: append it now
    live.coordinator.transactions()  # any coordinator call rolls the abort forward
    if between == "another_writer":
        task.abort()
    committed = live.consumer("read_committed")
    assert committed.end_offset(tp) == plog.log_end_offset  # nothing left open
    for upper in range(end_before + 1, plog.log_end_offset + 1):
        assert list(committed.read(tp, 0, upper)) == [], f"records visible below {upper}"
    everything = [r.value for r in live.consumer("read_uncommitted").read(tp, 0)]
    assert len(everything) == 5 + (3 if between == "another_writer" else 0)  # filtered, kept


# --- a flush killed while it starts its transaction in its partitions ----------------------------


@pytest.mark.parametrize("crash_after", [1, 2])
def test_flush_killed_between_first_batches_is_aborted_by_the_next_init(
    tmp_path: Path, crash_after: int
) -> None:
    """C-16, KIP-890, X-03: a flush registers its new partitions (AddPartitionsToTxn) and
    appends their first batches under one hold of the coordinator. Killed after the first (or
    second) of three, every partition holding a batch is already registered, so the next
    instance's init_transactions() aborts the transaction there: no batch pins an LSO, nothing
    is visible, the registered partition that got no batch takes only the abort's marker."""
    log_dir = tmp_path / "log"
    new_log(log_dir, partitions=4)
    counts = {0: 3, 1: 2, 2: 4}  # a few small records: every buffer waits for the flush
    worker = run_worker(
        "txn", log_dir, TXN_ID, "commit", TOPIC, parts_arg(counts), GROUP, "{}",
        crash_point="producer.after_first_batch",
        crash_after=crash_after,
    )  # fmt: skip
    assert worker.returncode == -signal.SIGKILL, worker.stderr
    assert worker.lines == []  # died inside its flush

    tps = [TopicPartition(TOPIC, p) for p in range(4)]
    log = Log.open(log_dir)
    entries = state_log_entries(log)
    assert last_txn_state(entries, TXN_ID) is TransactionState.ONGOING
    [*_, registered] = [
        e.metadata
        for e in entries
        if isinstance(e, TransactionLogEntry)
        and e.transactional_id == TXN_ID
        and e.metadata is not None
    ]
    assert {(TOPIC, p) for p in counts} == set(registered.topic_partitions)
    written = [p for p in sorted(counts) if log.partition_log(tps[p]).log_end_offset > 0]
    assert written == sorted(counts)[:crash_after]
    for p in written:
        plog = log.partition_log(tps[p])
        assert plog.last_stable_offset == 0 < plog.log_end_offset  # pinned at its first offset
    log.close()

    done = assert_ok(run_worker("init", log_dir, TXN_ID))
    first = fingerprint(log_dir, tps)
    unwritten = [tps[p] for p in sorted(counts) if p not in written]
    for tp in unwritten:
        part = first[str(tp)]
        assert part["uncommitted"] == [] and set(part["markers"]) <= {ControlType.ABORT}, tp
        assert part["lso"] == part["log_end"] == part["read_committed_end"], tp
    expected = {tps[p]: [value_for(TXN_ID, p, i) for i in range(counts[p])] for p in written}
    assert_finished(
        first, [tp for tp in tps if tp not in unwritten], expected, {}, committed=False
    )
    assert_second_recovery_changes_nothing(log_dir, tps, first)
    assert_id_usable(log_dir, TXN_ID, done["producer_epoch"])
