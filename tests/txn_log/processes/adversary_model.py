"""The adversarial suite's model: what every worker was told, and the checks of every read.

Each flush of an idempotent producer and each transaction is a *unit*. Its records are
visible under read_committed as follows (G-05, G-07, G-09, TESTING.md scenarios 2, 6, 9):

=============  ==========================================================  ==============
state          how it got there                                            visibility
=============  ==========================================================  ==============
committed      ``flush()`` / ``commit_transaction()`` returned (acked)      must be seen
aborted        ``abort_transaction()`` called, or the worker died before   never
               it called ``commit_transaction()``
in_doubt       died (or failed) inside ``commit_transaction()``, or inside   whole or none
               an idempotent ``flush()``
open           the worker is alive and has not decided yet                  undecided
=============  ==========================================================  ==============

"Must be seen" is relative to one read: a record acknowledged before the read started, whose
offset is in the read's ``[start, end)``, at or above the log start measured after the read
(retention), and not in the scratch topic while a deletion of it overlapped the time from the
record's send to the read's end. Checks that need an undecided unit wait for a later step;
at the end every worker has stopped and everything is decided.

Time is CLOCK_MONOTONIC, shared by every process on the machine; a worker writes each event
line before it goes on, and the parent reads the lines after the read it checks has ended,
so a deletion that began before a read's end is always known when the read is checked.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.txn_log.processes.adversary import SCRATCH

TP = tuple[str, int]
MUST, MAY, NEVER, UNDECIDED = "must", "may", "never", "undecided"
MAX_MESSAGES_PER_KIND = 5  # the same kind of violation is counted after this many, not listed
MAX_MESSAGES = 20_000  # ... and written to violations.txt up to this many in all


@dataclass
class Write:
    vid: str
    tp: TP
    unit: Unit
    offset: int | None = None


@dataclass
class Unit:
    key: str
    kind: str  # "idem" or "txn"
    process: str
    t_intent: float
    group_offset: int | None
    writes: list[Write] = field(default_factory=list)
    state: str = "open"  # open, committing, aborting, committed, aborted, in_doubt
    t_ack: float = math.inf

    @property
    def visibility(self) -> str:
        if self.state == "committed":
            return MUST
        if self.state == "in_doubt":
            return MAY
        if self.state in ("aborted", "aborting"):
            return NEVER
        return UNDECIDED


def order_key(vid: str) -> tuple[str, int, int]:
    """``SLOT.gGEN.SEQ`` -> (slot, gen, seq): a slot's values grow across its generations."""
    slot, gen, seq = vid.split(".")
    return slot, int(gen[1:]), int(seq)


class Model:
    """Everything acknowledged so far, and the checks; not thread-safe (the parent's loop)."""

    def __init__(self) -> None:
        self.writes: dict[str, Write] = {}
        self.units: dict[str, Unit] = {}
        self.acked_by_tp: dict[TP, list[tuple[int, str]]] = {}  # (offset, vid), not scratch
        self.scratch_acked: dict[TP, list[tuple[float, int, str]]] = {}  # (sent at, offset, vid)
        self.deletions: list[list[float]] = []  # [start, end] of each scratch deletion
        self.started: set[str] = set()  # worker processes (SLOT.gGEN) started
        self.ended: set[str] = set()  # ... of which every event has been read, and dead
        self.seen_at: dict[str, tuple[TP, int]] = {}
        self.group_units: dict[tuple[str, int], Unit] = {}
        self.violations: list[str] = []  # the first few of each kind
        self.all_violations: list[str] = []  # written to the work dir
        self.violation_kinds: Counter[str] = Counter()
        self.figures: Counter[str] = Counter()

    # --- events ----------------------------------------------------------------------------------

    def violation(self, kind: str, message: str) -> None:
        if message.startswith("final "):
            kind += " [final read]"
        self.violation_kinds[kind] += 1
        if len(self.all_violations) < MAX_MESSAGES:
            self.all_violations.append(f"{kind}: {message}")
        if self.violation_kinds[kind] <= MAX_MESSAGES_PER_KIND:
            self.violations.append(f"{kind}: {message}")

    def apply(self, process: str, role: str, event: dict[str, Any]) -> None:
        """One event line of a worker (see ``adversary.py`` for the protocol)."""
        ev = event["ev"]
        unit = self.units.get(event.get("unit", ""))
        if ev == "begin":
            self.begin(process, "txn" if role == "txn" else "idem", event)
        elif ev == "flushed" and unit is not None:
            self.set_offsets(unit, event["offsets"])
        elif ev == "acked" and unit is not None:
            self.set_offsets(unit, event["offsets"])
            self.settle(unit, "committed", event["t"])
        elif ev == "ending" and unit is not None:
            unit.state = "committing" if event["commit"] else "aborting"
        elif ev == "ended" and unit is not None:
            self.settle(unit, "committed" if event["commit"] else "aborted", event["t"])
        elif ev == "failed" and unit is not None and unit.kind == "idem":
            self.settle(unit, "in_doubt", math.inf)
        elif ev == "deleting":
            self.deletions.append([event["t"], math.inf])
        elif ev in ("deleted", "refused") and self.deletions and self.deletions[-1][1] == math.inf:
            if ev == "refused":  # refused before anything was removed
                self.deletions.pop()
            else:
                self.deletions[-1][1] = event["t"]
                self.figures["topic deletions"] += 1
        elif ev == "ready" and self.deletions and self.deletions[-1][1] == math.inf:
            self.deletions[-1][1] = event["t"]  # a killed deleter's deletion ends here at last
        elif ev == "retention":
            self.figures["retention segments deleted"] += len(event["deleted"])
        if ev == "refused":
            self.figures["topic deletions refused (open transaction)"] += 1
        if ev in ("failed", "gave_up", "error") and event.get("corrupt"):
            self.violation(
                "false corruption", f"{process} {ev}: {event['error']}: {event['message']}"
            )

    def begin(self, process: str, kind: str, event: dict[str, Any]) -> None:
        unit = Unit(event["unit"], kind, process, event["t"], event.get("group_offset"))
        self.units[unit.key] = unit
        for vid, topic, partition in event["writes"]:
            write = Write(vid, (topic, partition), unit)
            unit.writes.append(write)
            self.writes[vid] = write
        if unit.group_offset is not None:
            self.group_units[(process.split(".")[0], unit.group_offset)] = unit

    def set_offsets(self, unit: Unit, offsets: dict[str, int] | None) -> None:
        if offsets is None:
            self.violation(
                "flush offsets",
                f"{unit.key}: flush() returned offsets that do not "
                "cover the records sent (one batch per partition expected)",
            )
            return
        for write in unit.writes:
            write.offset = offsets[write.vid]

    def settle(self, unit: Unit, state: str, t_ack: float) -> None:
        unit.state, unit.t_ack = state, t_ack
        self.figures[f"{unit.kind} units {state}"] += 1
        if state == "committed":
            self.figures["records acknowledged"] += len(unit.writes)
            for write in unit.writes:
                if write.offset is None:
                    continue
                if write.tp[0] == SCRATCH:
                    sent = self.scratch_acked.setdefault(write.tp, [])
                    bisect.insort(sent, (unit.t_intent, write.offset, write.vid))
                else:
                    acked = self.acked_by_tp.setdefault(write.tp, [])
                    bisect.insort(acked, (write.offset, write.vid))

    def process_ended(self, process: str) -> None:
        """Every event of ``process`` has been applied and it is dead: decide its open units
        (a transaction never asked to commit is aborted by its successor or its timeout)."""
        self.ended.add(process)
        for unit in self.units.values():
            if unit.process != process or unit.state in ("committed", "aborted", "in_doubt"):
                continue
            if unit.state == "aborting" or (unit.kind == "txn" and unit.state == "open"):
                self.settle(unit, "aborted", math.inf)
            else:  # inside commit_transaction(), or an idempotent flush not acknowledged
                self.settle(unit, "in_doubt", math.inf)

    # --- checks ----------------------------------------------------------------------------------

    def deleted_between(self, t_from: float, t_to: float) -> bool:
        """Did a deletion of the scratch topic overlap [t_from, t_to]? Deletions follow one
        another (one deleter at a time), so their starts and their ends both ascend."""
        first = bisect.bisect_left(self.deletions, t_from, key=lambda window: window[1])
        return first < len(self.deletions) and self.deletions[first][0] <= t_to

    def last_deletion_end(self, t_check: float) -> float:
        """End of the last deletion that started by ``t_check`` (-inf if none): a scratch
        record sent after it is exempt from no check at ``t_check``."""
        count = bisect.bisect_right(self.deletions, t_check, key=lambda window: window[0])
        return self.deletions[count - 1][1] if count else -math.inf

    def exempt(self, write: Write, t_check: float, log_start: int) -> bool:
        """May ``write`` be missing at ``t_check`` without a loss: below the log start
        (retention), or in the scratch topic while a deletion overlapped."""
        if write.offset is not None and write.offset < log_start:
            return True
        return write.tp[0] == SCRATCH and self.deleted_between(write.unit.t_intent, t_check)

    def decidable(self, records: list[list[Any]]) -> bool:
        for _, vid in records:
            write = self.writes.get(vid)
            if write is None:
                if vid.rsplit(".", 1)[0] in self.started - self.ended:
                    return False
            elif write.unit.visibility == UNDECIDED:
                return False
        return True

    def check_read(self, obs: dict[str, Any], source: str) -> bool:
        """Check one read; False when it must wait for undecided units (nothing reported)."""
        records = obs["records"]
        if not self.decidable(records):
            return False
        tp: TP = (obs["tp"][0], obs["tp"][1])
        where = f"{source} read {tp[0]}-{tp[1]} [{obs['start']}, {obs['end']})"
        self.figures["reads checked"] += 1
        self.figures["records read"] += len(records)
        previous = obs["start"] - 1
        last_by_slot: dict[str, tuple[int, int]] = {}
        for offset, vid in records:
            if offset <= previous or offset >= obs["end"]:
                self.violation("order (G-05)", f"{where}: offset {offset} after {previous}")
            previous = offset
            self.check_record(tp, offset, vid, where)
            if vid in self.writes:
                slot, gen, seq = order_key(vid)
                if slot in last_by_slot and (gen, seq) <= last_by_slot[slot]:
                    self.violation(
                        "producer order",
                        f"{where}: {vid} at {offset} after {slot} {last_by_slot[slot]}",
                    )
                last_by_slot[slot] = (gen, seq)
        self.check_complete(tp, obs, {vid for _, vid in records}, where)
        return True

    def check_record(self, tp: TP, offset: int, vid: str, where: str) -> None:
        write = self.writes.get(vid)
        if write is None:
            self.violation("unknown record", f"{where}: {vid!r} at {offset} was never sent")
            return
        unit = write.unit
        if write.tp != tp:
            self.violation("wrong partition", f"{where}: {vid} at {offset} was sent to {write.tp}")
        if unit.visibility == NEVER:
            self.violation(
                "aborted or unacknowledged record visible (G-07)",
                f"{where}: {vid} at {offset} of {unit.key} ({unit.state})",
            )
        if write.offset is not None and write.offset != offset and tp[0] != SCRATCH:
            self.violation(
                "offset moved", f"{where}: {vid} at {offset}, acknowledged at {write.offset}"
            )
        first = self.seen_at.setdefault(vid, (tp, offset))
        if first != (tp, offset):
            self.violation("duplicate", f"{where}: {vid} at {offset}, seen before at {first}")

    def check_complete(self, tp: TP, obs: dict[str, Any], seen: set[str], where: str) -> None:
        """Every record acknowledged before the read started, in its range, is in it."""
        if tp[0] == SCRATCH:  # only records sent after the last deletion (not every generation)
            sent = self.scratch_acked.get(tp, [])
            after = bisect.bisect_right(sent, (self.last_deletion_end(obs["t1"]), math.inf))
            candidates = sorted(
                (offset, vid)
                for _, offset, vid in sent[after:]
                if obs["start"] <= offset < obs["end"]
            )
        else:
            acked = self.acked_by_tp.get(tp, [])
            low = bisect.bisect_left(acked, (obs["start"], ""))
            candidates = acked[low : bisect.bisect_left(acked, (obs["end"], ""))]
        for offset, vid in candidates:
            write = self.writes[vid]
            if vid in seen or write.unit.t_ack >= obs["t0"]:
                continue
            if not self.exempt(write, obs["t1"], obs["log_start"]):
                self.violation(
                    "acknowledged record missing",
                    f"{where} (log start "
                    f"{obs['log_start']}): {vid} acknowledged at {offset} by "
                    f"{write.unit.key}",
                )

    def check_group(self, obs: dict[str, Any]) -> bool:
        """``committed(group)`` of a transactional slot during the run: never an aborted
        transaction's offset, never older than the last commit acknowledged before the call
        (G-09, O-04). False when it must wait for an undecided unit."""
        slot, value = obs["slot"], obs["offset"]
        unit = self.group_units.get((slot, value)) if value is not None else None
        if value is not None and unit is None:
            if any(p.split(".")[0] == slot for p in self.started - self.ended):
                return False
            self.violation("group offsets", f"group of {slot}: offset {value} was never sent")
            return True
        if unit is not None and unit.visibility == UNDECIDED:
            return False
        self.figures["group offset checks"] += 1
        if unit is not None and unit.visibility == NEVER:
            self.violation(
                "group offsets of an aborted transaction (G-09)",
                f"group of {slot}: offset {value} of {unit.key} ({unit.state})",
            )
        expected = self.last_group_offset(
            slot, lambda u: u.state == "committed" and u.t_ack < obs["t0"]
        )
        if expected is not None and (value is None or value < expected):
            self.violation(
                "group offsets hidden or old (issue 12 #1 class)",
                f"group of {slot}: committed() = {value} at t={obs['t0']:.3f}, but "
                f"offset {expected} was committed before",
            )
        return True

    def last_group_offset(self, slot: str, counts: Any) -> int | None:
        offsets = [
            u.group_offset
            for (s, _), u in self.group_units.items()
            if s == slot and u.group_offset is not None and counts(u)
        ]
        return max(offsets, default=None)

    def check_group_final(
        self, slot: str, value: int | None, final_seen: set[str], log_starts: dict[TP, int]
    ) -> None:
        """At the end: the group's offsets are those of its last transaction whose data
        committed: data and offsets commit together (G-09)."""

        def committed(u: Unit) -> bool:
            return u.state == "committed" or (
                u.state == "in_doubt" and any(w.vid in final_seen for w in u.writes)
            )

        expected = self.last_group_offset(slot, committed)
        self.check_group({"slot": slot, "offset": value, "t0": math.inf})
        if expected is not None and (value is None or value < expected):
            self.violation(
                "group offsets lost (G-09)",
                f"group of {slot}: committed() = "
                f"{value}, but the data of the transaction with offset {expected} "
                "is visible",
            )
        unit = self.group_units.get((slot, value)) if value is not None else None
        if (
            unit is not None
            and unit.state == "in_doubt"
            and not committed(unit)
            and any(not self.exempt(w, math.inf, log_starts.get(w.tp, 0)) for w in unit.writes)
        ):
            self.violation(
                "group offsets without their data (G-09)",
                f"group of {slot}: offset {value} of {unit.key} is committed, its data is not",
            )

    def check_in_doubt_whole(self, final_seen: set[str], log_starts: dict[TP, int]) -> None:
        """At the end: each in-doubt unit is visible whole or not at all (per partition for an
        idempotent flush, whose partitions are separate batches)."""
        for unit in self.units.values():
            if unit.state != "in_doubt":
                continue
            groups: dict[Any, list[Write]] = {}
            for write in unit.writes:
                groups.setdefault(write.tp if unit.kind == "idem" else None, []).append(write)
            for writes in groups.values():
                visible = [w for w in writes if w.vid in final_seen]
                missing = [
                    w
                    for w in writes
                    if w.vid not in final_seen
                    and not self.exempt(w, math.inf, log_starts.get(w.tp, 0))
                ]
                if visible and missing:
                    self.violation(
                        "in-doubt unit partly visible",
                        f"{unit.key}: "
                        f"{len(visible)} records visible, {len(missing)} missing "
                        f"(e.g. {missing[0].vid} in {missing[0].tp})",
                    )
            if unit.kind == "txn":
                visible_any = any(w.vid in final_seen for w in unit.writes)
                self.figures[
                    "in-doubt transactions visible"
                    if visible_any
                    else "in-doubt transactions not visible"
                ] += 1
