"""The worker processes of an adversarial run: start, SIGKILL, replace, and collect their events.

Each worker (``adversary.py``) writes its event lines to a file of the work directory (its
stdout); ``drain`` applies the complete lines written so far to the model, and queues the
readers' observations for checking. A worker's slot (``i0``, ``t1`` ...) outlives it: a
replacement is generation ``g + 1`` of the same slot, with the same transactional id. Only
this class starts or ends worker processes, always by pid; ``kill_all`` is the test's
``finally``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tests.txn_log.processes.adversary import EXIT_CORRUPT, EXIT_GAVE_UP
from tests.txn_log.processes.adversary_model import Model

ROOT = Path(__file__).resolve().parents[3]
WRITER_ROLES = ("idem", "txn")
MAX_GIVE_UPS = 5


@dataclass
class Proc:
    """One worker process; its stdout (event lines) and stderr go to files of the work dir."""

    slot: str
    gen: int
    role: str
    popen: subprocess.Popen[bytes]
    out: BinaryIO
    err_path: Path
    partial: bytes = b""
    killed: bool = False

    @property
    def name(self) -> str:
        return f"{self.slot}.g{self.gen}"


class Workers:
    """The live worker of every slot. Used by the test's main thread only."""

    def __init__(
        self,
        log_dir: Path,
        work: Path,
        seed: int,
        slots: dict[str, tuple[str, list[str], int]],
        model: Model,
    ) -> None:
        self.log_dir, self.work, self.seed, self.slots = log_dir, work, seed, slots
        self.model = model
        self.procs: dict[str, Proc] = {}
        self.gens: Counter[str] = Counter()
        self.figures: Counter[str] = Counter()
        self.observations: list[tuple[str, dict[str, Any]]] = []
        self.give_ups: Counter[str] = Counter()
        self.writer_killed = False  # read by the verify thread: a torn tail may exist since
        self.stopping = False

    def spawn(self, slot: str, role: str | None = None) -> Proc:
        """Start the next generation of ``slot`` (as ``role``, by default the slot's own)."""
        role = role or self.slots[slot][0]
        self.gens[slot] += 1
        gen = self.gens[slot]
        name = f"{slot}.g{gen}"
        out_path, err_path = self.work / f"{name}.out", self.work / f"{name}.err"
        seed = self.seed * 1000 + len(self.model.started)
        args = [role, self.log_dir, self.work, slot, gen, seed, *self.slots[slot][1]]
        with out_path.open("wb") as out, err_path.open("wb") as err:
            popen = subprocess.Popen(
                [sys.executable, "-m", "tests.txn_log.processes.adversary", *map(str, args)],
                cwd=ROOT,
                stdout=out,
                stderr=err,
            )
        proc = Proc(slot, gen, role, popen, out_path.open("rb"), err_path)
        self.model.started.add(name)
        self.figures[f"processes started: {role}"] += 1
        return proc

    def start_all(self) -> None:
        for slot in self.slots:
            self.procs[slot] = self.spawn(slot)

    def drain(self, proc: Proc) -> None:
        """Apply every complete event line ``proc`` wrote so far; queue its reads."""
        data = proc.partial + proc.out.read()
        *lines, proc.partial = data.split(b"\n")
        for line in lines:
            event = json.loads(line)
            if event["ev"] in ("read", "read_error"):
                self.observations.append((proc.name, event))
            else:
                self.model.apply(proc.name, proc.role, event)

    def drain_all(self) -> None:
        for proc in self.procs.values():
            self.drain(proc)

    def finish(self, proc: Proc) -> None:
        """``proc`` is dead: read its last events, judge its exit, decide its open units."""
        code = proc.popen.wait()
        self.drain(proc)
        proc.out.close()
        self.model.process_ended(proc.name)
        if proc.killed or (code == 0 and (self.stopping or proc.role == "init")):
            return
        if code == EXIT_GAVE_UP and proc.role in WRITER_ROLES:
            self.figures["writers that gave up after a typed error (replaced)"] += 1
            self.check_progress(proc)
            return
        if code != EXIT_CORRUPT:  # corruption claims were reported from the event itself
            stderr = proc.err_path.read_text(errors="replace")[-3000:]
            self.model.violation(f"{proc.role} exited", f"{proc.name} exited with {code}: {stderr}")

    def check_progress(self, proc: Proc) -> None:
        """A slot whose workers keep giving up without committing anything is stuck."""
        if any(
            u.process == proc.name and u.state == "committed" for u in self.model.units.values()
        ):
            self.give_ups[proc.slot] = 0
            return
        self.give_ups[proc.slot] += 1
        if self.give_ups[proc.slot] == MAX_GIVE_UPS:
            self.model.violation(
                "no progress",
                f"{MAX_GIVE_UPS} workers of {proc.slot} in a row gave up without committing "
                f"anything; the last one's events: {proc.out.name}",
            )

    def kill(self, slot: str) -> str:
        """SIGKILL the worker of ``slot`` and start its replacement; returns what was done."""
        proc = self.procs[slot]
        if proc.popen.poll() is not None:  # it ended by itself: judged and replaced by reap
            self.reap()
            return f"{proc.name} had already exited"
        self.sigkill(proc)
        self.procs[slot] = self.spawn(slot)
        return f"SIGKILL {proc.name}"

    def sigkill(self, proc: Proc) -> None:
        proc.killed = True
        os.kill(proc.popen.pid, signal.SIGKILL)
        self.figures[f"kills: {proc.role}"] += 1
        self.writer_killed |= proc.role in WRITER_ROLES
        self.finish(proc)

    def reap(self) -> None:
        """Judge workers that exited on their own; replace them unless the run is stopping."""
        for slot, proc in list(self.procs.items()):
            if proc.popen.poll() is not None:
                self.finish(proc)
                if self.stopping:
                    del self.procs[slot]
                else:
                    self.procs[slot] = self.spawn(slot)

    def stop_all(self, timeout_s: float) -> None:
        """Ask every worker to stop (the stop file), SIGKILL those still running after
        ``timeout_s``."""
        self.stopping = True
        (self.work / "stop").touch()
        deadline = time.monotonic() + timeout_s
        while self.procs and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.05)
        for slot, proc in list(self.procs.items()):
            self.figures[f"SIGKILLed at the stop (still running after {timeout_s:.0f} s)"] += 1
            self.sigkill(proc)
            del self.procs[slot]

    def run_init(self, slot: str, timeout_s: float) -> None:
        """One more ``init_transactions()`` for ``slot``'s transactional id, to the end."""
        proc = self.spawn(slot, "init")
        try:
            proc.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.model.violation("init hung", f"{proc.name} did not finish in {timeout_s} s")
            self.sigkill(proc)
            return
        self.finish(proc)

    def kill_all(self) -> None:
        """The test's ``finally``: SIGKILL whatever still runs, by pid, and reap it."""
        for proc in self.procs.values():
            if proc.popen.poll() is None:
                os.kill(proc.popen.pid, signal.SIGKILL)
            proc.popen.wait()
