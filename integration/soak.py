"""The soak run (``make soak``): random SIGKILLs of the Spark driver, its tasks and the upstream
producer while at least 1,000,000 committed records flow ``txnlog → Spark → txnlog``.

Each round starts the ETL driver in its own process group and kills it in one of these ways,
chosen at random (seed printed; ``--seed`` replays): at a random moment (``timer``), at one of
the sink and batch-commit crash points after 1-3 hits (``point:<name>``), or a write task's
Python worker mid-write (``task``, Spark retries it). Meanwhile a workload process produces
transactions (a third aborted) and is itself SIGKILLed and restarted now and then
(``producer``), leaving transactions open until their timeout. After the kills, the query runs
to the end and the output is verified exactly once. After every kill the output so far is
checked too (no duplicate, nothing that was not committed upstream, per-key order kept), so a
violation is caught at the kill that caused it. Prints a summary table; exits 1 on any
violation.

    python -m integration.soak [--kills 50] [--records 1000000] [--seed N]
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from demo.pipeline import (
    Report,
    create_topics,
    holds_so_far,
    kill_group,
    spawn,
    verify,
    verify_so_far,
)

POINTS = [
    "sink.task_write",
    "sink.before_commit",
    "batch.after_prepare",
    "txn.between_markers",
    "batch.before_complete",
    "sink.after_commit",
]
PER_TXN = 2000
PAUSE_S = 1.0  # between workload transactions: ~750 transactions over ~15-20 minutes


def start_workload(log_dir: Path, seed: int, transactions: int, generation: int):  # type: ignore[no-untyped-def]
    """The producer workload, paced so that input keeps arriving while the driver is killed
    and restarted (and the workload itself can be killed mid-transaction)."""
    return spawn(
        "workload",
        log_dir,
        transactions,
        PER_TXN,
        seed * 1000 + generation,
        2.0,
        3,
        f"soak-writer-{generation}",
        PAUSE_S,
    )


def one_round(log_dir: Path, checkpoint: Path, rng: random.Random) -> str:
    """Start the driver, kill it one random way, return the scenario's name."""
    kind = rng.choice(["timer", "point", "point", "task"])
    env: dict[str, str] = {}
    scenario = kind
    if kind == "point":
        point = rng.choice(POINTS)
        env = {
            "TXNLOG_CRASH_POINT": point,
            "TXNLOG_CRASH_SCOPE": "group",
            "TXNLOG_CRASH_AFTER": str(rng.randint(1, 3)),
        }
        scenario = f"point:{point}"
    elif kind == "task":
        env = {"TXNLOG_CRASH_POINT": "sink.task_write"}
    driver = spawn(
        "query", log_dir, checkpoint, "continuous", PER_TXN * 2, env=env, new_session=True
    )
    # a driver needs ~15-20 s to start; random kills land before, during and after its batches
    deadline = time.monotonic() + (rng.uniform(10, 50) if kind in ("timer", "task") else 90)
    while driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if driver.poll() is None:
        kill_group(driver)
        return scenario if kind != "point" else f"{scenario} (timer fallback)"
    driver.communicate()
    if driver.returncode != -signal.SIGKILL:
        raise SystemExit(f"driver exited with {driver.returncode} in scenario {scenario}")
    return scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    args = parser.parse_args(argv)
    print(f"seed={args.seed}", flush=True)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="txnlog-soak-"))
    log_dir, checkpoint = work / "log", work / "checkpoint"
    create_topics(log_dir)
    remaining = args.records * 3 // 2 // PER_TXN + 1  # a third are aborted
    generation = 0
    workload = start_workload(log_dir, args.seed, remaining, generation)
    kills: Counter[str] = Counter()
    checked: dict[str, int] = {}  # scenario -> output records checked after its latest kill
    started = time.monotonic()
    while sum(kills.values()) < args.kills:
        scenarios = [one_round(log_dir, checkpoint, rng)]
        if workload.poll() is None and rng.random() < 0.15:
            remaining -= transactions_done(kill_process(workload))
            scenarios.append("producer")
            generation += 1
            workload = start_workload(log_dir, args.seed, remaining, generation)
        so_far = verify_so_far(log_dir)
        if not holds_so_far(so_far):
            kill_process(workload)
            return violation(args.seed, scenarios, so_far, work)
        for scenario in scenarios:
            kills[scenario] += 1
            checked[scenario] = so_far.records_out
        print(
            f"{sum(kills.values())} kills after {time.monotonic() - started:.0f} s ("
            f"{', '.join(scenarios)}): {so_far.records_out:,} records out so far, no duplicate, "
            "none unexpected, order kept",
            flush=True,
        )
    workload.communicate(timeout=3600)
    final = spawn("query", log_dir, checkpoint, "available-now", PER_TXN * 2)
    _, err = final.communicate(timeout=3600)
    if final.returncode != 0:
        print(err[-4000:], file=sys.stderr)
        return 1
    report = verify(log_dir).as_dict()
    print(f"\n{'scenario':<36} {'kills survived':>14} {'records checked after it':>25}")
    for scenario, count in sorted(kills.items()):
        print(f"{scenario:<36} {count:>14} {checked[scenario]:>25,}")
    print(f"{'total':<36} {sum(kills.values()):>14}")
    print(
        f"\nrecords verified (committed input) {report['records_in']:,}; out "
        f"{report['records_out']:,}; duplicates {report['duplicates']}; missing "
        f"{report['missing']}; unexpected {report['unexpected']}; aborted skipped "
        f"{report['aborted_skipped']:,}; micro-batches {report['micro_batches']}; "
        f"{time.monotonic() - started:.0f} s"
    )
    print("exactly once: " + ("YES" if report["exactly_once"] else "NO"))
    if not report["exactly_once"]:
        return 1
    shutil.rmtree(work, ignore_errors=True)  # kept for inspection only when something failed
    return 0


def violation(seed: int, scenarios: list[str], report: Report, work: Path) -> int:
    print(
        f"EXACTLY-ONCE VIOLATED after {', '.join(scenarios)} (seed {seed}, replay with "
        f"--seed {seed}): {report.as_dict()}; work dir kept: {work}",
        file=sys.stderr,
    )
    return 1


def kill_process(proc) -> str:  # type: ignore[no-untyped-def]
    """SIGKILL the workload (mid-transaction, most likely); what it printed until then."""
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    return str(out)


def transactions_done(output: str) -> int:
    """Transactions a killed workload finished (it prints one line per transaction)."""
    return sum(1 for line in output.splitlines() if line.startswith('{"txn"'))


if __name__ == "__main__":
    sys.exit(main())
