"""The adversarial suite (issue 12, "What must be shown"): everything at once, checked at every
step.

Worker processes (``adversary.py``) share one log: idempotent producers, transactional
producers (several partitions and topics per transaction, group offsets sent with
``send_offsets_to_transaction`` in some, a third aborted), a deleter that deletes and
re-creates the ``scratch`` topic some producers write to, a retention worker running
``delete_old_segments()`` on a topic with small segments, and read_committed readers, as
processes and as threads of this process sharing one ``Log``. The parent SIGKILLs random
workers at random times and starts replacements (the same transactional id: the next
``init_transactions()`` fences the dead instance and finishes its transaction), and runs
``txnlog verify`` and ``txnlog verify --repair`` on the live log.

After every step every read is checked against the model (``adversary_model.py``): offsets
strictly increasing (G-05), no record of an aborted or never-committed transaction (G-07), no
duplicate, no record nobody sent, each producer's order kept, every record acknowledged before
the read and inside its range present unless retention or a deletion of its topic removed it,
group offsets never those of an aborted transaction nor older than the last committed ones
(G-09); no error may claim corruption, and ``verify`` may report nothing but the torn tail a
SIGKILLed writer can leave. At the end everything stops, every transactional id is initialised
once more, the final read_committed of every partition must equal the acknowledged records
(in-doubt transactions whole or not at all), with the group offsets of the last transaction
whose data committed, and ``txnlog verify`` must exit 0.

TESTING.md scenarios 1 (copier under bounces: transactions with offsets, a concurrent
read_committed reader), 2 (bounce loop: producers killed and restarted), 6 (kill -9 loop:
acknowledged ⊆ visible, no duplicate, nothing aborted visible) and 9 (queue checker: producer
and consumer processes, random SIGKILLs, lost / duplicated / aborted reads reported);
checklist G-05, G-07, G-09.

``make test`` runs it at scale 1 (about 20 s of chaos); ``make faults`` with
``TXNLOG_FAULT_SCALE=10`` (ten times as long). The seed is printed; ``TXNLOG_TEST_SEED=<seed>``
replays its choices (which worker is killed, when, what each one sends; the interleaving is the
machine's). ``TXNLOG_ADVERSARY_KEEP_GOING=1`` runs to the end and lists every violation kind
instead of stopping at the first step that found one; ``TXNLOG_ADVERSARY_WITHOUT=deleter,...``
leaves roles out (idem, txn, deleter, retention, reader, verify) to tell defects apart.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.txn_log.processes.adversary import (
    ALL_PARTITIONS,
    GROUP_OFFSETS_TP,
    MAIN,
    OTHER,
    PLAIN,
    RETAINED,
    SCRATCH,
    TOPICS,
    Reader,
    claims_corruption,
    ensure_scratch,
    error_fields,
    group_id,
    now,
    value_id,
)
from tests.txn_log.processes.adversary_model import Model
from tests.txn_log.processes.adversary_procs import ROOT, Workers
from txn_log.errors import TxnLogError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

pytestmark = pytest.mark.fault

SEED = int(os.environ.get("TXNLOG_TEST_SEED", random.randrange(1 << 30)))
SCALE = int(os.environ.get("TXNLOG_FAULT_SCALE", "1"))
KEEP_GOING = os.environ.get("TXNLOG_ADVERSARY_KEEP_GOING") == "1"
RUN_S = 20.0 * SCALE
# slot -> (role, topics written, weight when choosing whom to kill)
SLOTS: dict[str, tuple[str, list[str], int]] = {
    "i0": ("idem", [MAIN, OTHER, PLAIN, RETAINED], 3),
    "i1": ("idem", [MAIN, PLAIN, RETAINED, SCRATCH], 3),
    "i2": ("idem", [PLAIN], 2),
    "t0": ("txn", [MAIN, OTHER], 4),
    "t1": ("txn", [MAIN, OTHER, RETAINED], 4),
    "t2": ("txn", [MAIN, OTHER, RETAINED, SCRATCH], 4),
    "d0": ("deleter", [], 1),
    "r0": ("retention", [], 1),
    "q0": ("reader", [], 1),
    "q1": ("reader", [], 1),
}
# leave roles out to tell defects apart, e.g. TXNLOG_ADVERSARY_WITHOUT=deleter,retention
WITHOUT = set(filter(None, os.environ.get("TXNLOG_ADVERSARY_WITHOUT", "").split(",")))
SLOTS = {
    slot: (role, [t for t in topics if not (t == SCRATCH and "deleter" in WITHOUT)], weight)
    for slot, (role, topics, weight) in SLOTS.items()
    if role not in WITHOUT
}
TXN_SLOTS = [s for s, (role, _, _) in SLOTS.items() if role == "txn"]
READER_THREADS = 3
MAX_BACKLOG = 300  # observations of the reader threads waiting to be checked
PLAIN_0 = TopicPartition(PLAIN, 0)
RANGE_IN_MESSAGE = re.compile(r"\[\d+, \d+\]")


class Run:
    """One adversarial run: the workers, the reader and verify threads, the model, the checks.

    Threads hand their observations to the main thread through ``thread_obs`` (under
    ``lock``); only the main thread touches the model.
    """

    def __init__(self, base: Path) -> None:
        self.rng = random.Random(SEED)
        self.log_dir, self.work = base / "log", base / "work"
        self.work.mkdir(parents=True)
        self.model = Model()
        self.workers = Workers(self.log_dir, self.work, SEED, SLOTS, self.model)
        self.figures: Counter[str] = Counter()
        self.pending: list[tuple[str, dict[str, Any]]] = []
        self.thread_obs: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.stop_threads = threading.Event()
        self.threads: list[threading.Thread] = []
        self.shared_log: Log | None = None
        self.verifier: subprocess.Popen[str] | None = None

    # --- readers in threads ----------------------------------------------------------------------

    def reader_thread(self, index: int) -> None:
        rng = random.Random(SEED * 7 + index)
        assert self.shared_log is not None
        reader = Reader(self.shared_log, rng)
        try:
            while not self.stop_threads.is_set():
                # a quarter of the time every thread tails the partition only idempotent
                # producers write, where read_committed runs up to a batch being written
                if int(now() * 2) % 4 == 0:
                    observations = [reader.step(PLAIN_0) for _ in range(10)]
                else:
                    observations = [reader.step()]
                if index == 0 and rng.random() < 0.3:
                    observations += [self.group_offsets(slot) for slot in TXN_SLOTS]
                with self.lock:
                    self.thread_obs += [(f"thread-{index}", o) for o in observations]
                time.sleep(rng.uniform(0.0, 0.005))
                while len(self.thread_obs) > MAX_BACKLOG and not self.stop_threads.is_set():
                    time.sleep(0.02)  # the checks are behind: do not outrun them
        except Exception:
            with self.lock:
                self.thread_obs.append(
                    (f"thread-{index}", {"ev": "crash", "trace": traceback.format_exc()})
                )

    def group_offsets(self, slot: str) -> dict[str, Any]:
        assert self.shared_log is not None
        t0 = now()
        try:
            found = self.shared_log.committed(group_id(slot), [GROUP_OFFSETS_TP])
        except TxnLogError as error:
            return {"ev": "read_error", "tp": [MAIN, 0], "t": t0, **error_fields(error)}
        offset = found[GROUP_OFFSETS_TP]
        value = None if offset is None else offset.offset
        return {"ev": "group", "slot": slot, "offset": value, "t0": t0, "t1": now()}

    # --- checks ----------------------------------------------------------------------------------

    def check(self, *, final: bool = False) -> None:
        """Check every read that ended before this step's events were collected."""
        started = now()
        with self.lock:
            self.pending += self.thread_obs
            self.thread_obs = []
        self.workers.drain_all()
        self.pending += self.workers.observations
        self.workers.observations = []
        undecided = []
        for source, obs in self.pending:
            ended = obs.get("t1", obs.get("t", 0.0))
            if (not final and ended >= started) or not self.check_one(source, obs):
                undecided.append((source, obs))
        self.pending = undecided
        if final:
            for source, obs in undecided:
                self.model.violation("undecided at the end", f"{source}: {obs}"[:500])

    def check_one(self, source: str, obs: dict[str, Any]) -> bool:
        ev = obs["ev"]
        if ev == "read":
            return self.model.check_read(obs, source)
        if ev == "group":
            return self.model.check_group(obs)
        if ev == "verify":
            self.judge_verify(obs)
            return True
        if ev == "crash":
            self.model.violation(f"{source} thread crashed", obs["trace"][-2000:])
        elif obs["corrupt"]:
            self.model.violation(
                "false corruption",
                f"{source} reading {obs['tp']}: {obs['error']}: {obs['message']}",
            )
        elif obs["error"] == "OffsetOutOfRangeError":
            self.figures["reads below the log start (OffsetOutOfRangeError)"] += 1
            if not RANGE_IN_MESSAGE.search(obs["message"]):
                self.model.violation("OffsetOutOfRangeError without the range", obs["message"])
        elif obs["tp"][0] == SCRATCH and obs["typed"]:
            self.figures["scratch reads refused while deleted"] += 1
        else:
            self.model.violation(
                "read error", f"{source} reading {obs['tp']}: {obs['error']}: {obs['message']}"
            )
        return True

    def verify_loop(self) -> None:
        """``txnlog verify --repair`` and ``txnlog verify`` on the live log, one after the other
        (seeded: about 60% with ``--repair``), until the run stops; judged by ``check``."""
        rng = random.Random(SEED * 13)
        try:
            while not self.stop_threads.wait(rng.uniform(0.1, 0.8)):
                obs = self.one_verify(rng.random() < 0.6)
                with self.lock:
                    self.thread_obs.append(("verify", obs))
        except Exception:
            with self.lock:
                self.thread_obs.append(("verify", {"ev": "crash", "trace": traceback.format_exc()}))

    def one_verify(self, repair: bool) -> dict[str, Any]:
        args = ["verify", str(self.log_dir), "--json", *(["--repair"] if repair else [])]
        after_kill, t0 = self.workers.writer_killed, now()
        self.verifier = subprocess.Popen(
            [sys.executable, "-m", "txn_log.cli", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = self.verifier.communicate(timeout=300)
        return {
            "ev": "verify",
            "repair": repair,
            "after_kill": after_kill,
            "t0": t0,
            "t1": now(),
            "code": self.verifier.returncode,
            "out": out,
            "err": err,
        }

    def judge_verify(self, obs: dict[str, Any]) -> None:
        """Nothing but a SIGKILLed writer's torn tail may be reported, and verify must never
        crash: everything else is a problem that is not there (issue 12 #4 class)."""
        what = "txnlog verify" + (" --repair" if obs["repair"] else "")
        self.figures[f"verify runs{' --repair' if obs['repair'] else ''}"] += 1
        try:
            report = json.loads(obs["out"])
        except ValueError:
            self.model.violation(f"{what} failed", f"exit {obs['code']}: {obs['err'][-2000:]}")
            return
        self.figures["verify --repair actions"] += len(report["repaired"])
        for problem in report["problems"]:
            text = f"{problem['file']} at {problem['position']}: {problem['problem']}"
            if obs["after_kill"] and problem["problem"].startswith("torn tail"):
                self.figures["torn tails reported on the live log (after a SIGKILL)"] += 1
            else:
                self.model.violation(f"{what} reports a problem", text)
            if claims_corruption(Exception(problem["problem"])) and not problem["repairable"]:
                self.model.violation("false corruption", f"{what}: {text}")

    # --- the run ---------------------------------------------------------------------------------

    def start(self) -> None:
        log = Log.open(self.log_dir)
        for topic, (partitions, config) in TOPICS.items():
            log.create_topic(topic, partitions, config)
        log.close()
        self.workers.start_all()
        self.shared_log = Log.open(self.log_dir)
        targets: list[tuple[str, Any, tuple[int, ...]]] = [
            (f"reader-{i}", self.reader_thread, (i,)) for i in range(READER_THREADS)
        ]
        targets += [] if "verify" in WITHOUT else [("verify", self.verify_loop, ())]
        for name, target, args in targets:
            thread = threading.Thread(target=target, args=args, name=name, daemon=True)
            thread.start()
            self.threads.append(thread)

    def chaos(self) -> None:
        """SIGKILL a random worker about once a second (a seeded schedule, so the number of
        kills scales with the run whatever the checks cost) and check after each; never past
        ``RUN_S``."""
        slots = list(SLOTS)
        weights = [SLOTS[s][2] for s in slots]
        schedule, at = [], 0.0
        while at < RUN_S:
            at += self.rng.uniform(0.3, 1.7)
            schedule.append((at, self.rng.choices(slots, weights)[0]))
        started = now()
        steps = 0
        for at, slot in schedule:
            if now() >= started + RUN_S:  # a loaded machine: bounded time before every kill
                self.figures["scheduled kills skipped (the run's time was up)"] += 1
                continue
            time.sleep(max(0.0, started + at - now()))
            steps += 1
            action = self.workers.kill(slot)
            self.workers.reap()
            self.check()
            self.fail_if_violated(f"step {steps} ({action})")
        self.figures["steps"] = steps

    def stop(self) -> None:
        """Stop every worker (stop file; SIGKILL after 60 s), the reader threads; finish every
        transactional id with one more ``init_transactions()``."""
        self.workers.stop_all(60.0)
        self.stop_threads.set()
        for thread in self.threads:
            thread.join(timeout=120)
            if thread.is_alive():
                self.model.violation("thread stuck", f"{thread.name} did not stop in 120 s")
        self.check()
        for slot in TXN_SLOTS:
            self.workers.run_init(slot, 120.0)

    def final_check(self) -> None:
        """Every partition read whole (read_committed), every group's offsets, then ``txnlog
        verify``: exactly the acknowledged records, nothing left open, no problem."""
        with Log.open(self.log_dir) as log:
            ensure_scratch(log)
            seen: set[str] = set()
            log_starts: dict[tuple[str, int], int] = {}
            for tp in ALL_PARTITIONS:
                try:
                    seen.update(self.final_read(log, tp, log_starts))
                except TxnLogError as error:
                    kind = "false corruption" if claims_corruption(error) else "final read failed"
                    self.model.violation(kind, f"final read of {tp}: {error!r}")
            self.check(final=True)
            self.model.check_in_doubt_whole(seen, log_starts)
            for slot in TXN_SLOTS:
                found = log.committed(group_id(slot), [GROUP_OFFSETS_TP])[GROUP_OFFSETS_TP]
                value = None if found is None else found.offset
                self.model.check_group_final(slot, value, seen, log_starts)
        done = subprocess.run(
            [sys.executable, "-m", "txn_log.cli", "verify", str(self.log_dir)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            self.model.violation(
                "txnlog verify at the end", done.stdout[-2000:] + done.stderr[-2000:]
            )

    def final_read(
        self, log: Log, tp: TopicPartition, log_starts: dict[tuple[str, int], int]
    ) -> set[str]:
        """Queue the whole of ``tp`` as one read to check (every acknowledged record counts:
        t0 = t1 = ∞); returns the values seen."""
        consumer = log.consumer("read_committed")
        start, end = consumer.start_offset(tp), consumer.end_offset(tp)
        log_end = log.partition_log(tp).log_end_offset
        if end != log_end:
            self.model.violation("open at the end", f"{tp}: LSO {end} < log end {log_end}")
        records = [(r.offset, value_id(r.value)) for r in consumer.read(tp, start, end)]
        obs = {
            "ev": "read",
            "tp": [tp.topic, tp.partition],
            "start": start,
            "end": end,
            "t0": math.inf,
            "t1": math.inf,
            "log_start": start,
            "records": records,
        }
        self.pending.append(("final", obs))
        log_starts[(tp.topic, tp.partition)] = start
        self.figures["final records visible"] += len(records)
        return {vid for _, vid in records}

    def fail_if_violated(self, when: str) -> None:
        if self.model.violations and not KEEP_GOING:
            raise AssertionError(self.failure(when))

    def failure(self, when: str) -> str:
        (self.work / "violations.txt").write_text("\n".join(self.model.all_violations) + "\n")
        kinds = ", ".join(f"{k} ×{n}" for k, n in self.model.violation_kinds.items())
        listed = "\n  ".join(self.model.violations)
        return (
            f"adversarial suite, seed {SEED} (replay: TXNLOG_TEST_SEED={SEED}), {when}: "
            f"{kinds}\n  {listed}\nevery violation: {self.work / 'violations.txt'} (pytest keeps "
            "only its last few base temp dirs: run with --basetemp DIR to keep it)"
        )

    def cleanup(self) -> None:
        self.stop_threads.set()
        if self.verifier is not None and self.verifier.poll() is None:
            os.kill(self.verifier.pid, signal.SIGKILL)
        self.workers.kill_all()
        for thread in self.threads:
            thread.join(timeout=30)
        if self.shared_log is not None:
            self.shared_log.close()

    def print_figures(self, seconds: float) -> None:
        figures = self.figures + self.workers.figures + self.model.figures
        print(f"\nadversarial suite: seed {SEED}, scale {SCALE}, {seconds:.0f} s")
        for name, count in sorted(figures.items()):
            print(f"  {name:<62} {count:>10,}")
        kinds = self.model.violation_kinds
        print(f"  violations: {dict(kinds) if kinds else 'none'}")


def test_read_committed_is_exactly_the_acknowledged_records_under_attack(tmp_path: Path) -> None:
    """G-05, G-07, G-09; TESTING.md scenarios 1, 2, 6, 9 (see the module docstring): every
    read, at every step and at the end, shows the committed records and nothing else, in
    order, no acknowledged record is lost, and no error claims corruption that is not there."""
    print(f"seed={SEED} scale={SCALE}")
    run = Run(tmp_path)
    started = time.monotonic()
    try:
        run.start()
        run.chaos()
        run.stop()
        run.final_check()
    finally:
        run.cleanup()
        run.print_figures(time.monotonic() - started)
    assert not run.model.violations, run.failure("at the end")
