"""Where the Spark pipeline's time goes beyond the Python Data Source ceiling (issue 27).

A side script to ``bench_pipeline.py``: its queries over the same ``--rows`` rows (``ceiling``,
``kafka-ceiling``, ``read``, ``write``, ``pipeline``), plus ``kafka-write`` (the Kafka-schema
do-nothing source selected to ``key, value`` into ``format("txnlog")``), in alternating
rounds after a warm-up of each; medians are reported. ``read@4096:16384`` runs ``read`` with
the source's output batch bounds set to 4,096..16,384 rows, ``kafka-ceiling@65536`` yields
batches of 65,536 rows.

* CPU time: every thread of Spark's JVM (grouped by thread name: task threads, JIT, GC, the
  rest) and every Python process Spark started (grouped by the worker module they run), read
  from ``/proc`` before and after each query. "reaped children" is the CPU of processes that
  ended during the query (the per-query Python planners). On 2 cores busy all the time, CPU
  seconds say where the wall time went better than the wall time does, and they move much
  less when other jobs load the machine.
* ``--probe DIR``: txnlog's calls timed inside Spark's processes (``pipeline_probes``), the
  do-nothing ends' too; ``--profile cpu|wall`` adds a cProfile dump per call; ``--timeline``
  prints the last round's calls on one clock.
* ``--pyspy DIR`` (needs ``pip install py-spy`` in the venv): py-spy samples every Python
  worker during each query (raw collapsed stacks, one file per process and query) and the
  seconds per function are printed, summed over the workers of each variant.

Prints figures, never asserts.

    cd bench && ../.venv/bin/python pipeline_costs.py [--rounds R] [--variants a,b]
        [--probe DIR [--profile] [--timeline]] [--pyspy DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench_pipeline import (
    INPUT,
    INPUT_PARTITIONS,
    OUTPUT,
    OUTPUT_PARTITIONS,
    KafkaBlankSource,
    build_input,
)
from bench_sink import CHUNK_ROWS, BlankSource, NullSink
from pipeline_probes import ProbedBlank, ProbedNull, ProbedTxnLog

from demo.spark_session import local_session
from txn_log.log import Log

TICK = os.sysconf("SC_CLK_TCK")
PYSPY_RATE = 200  # samples per second
VARIANTS = ("ceiling", "kafka-ceiling", "read", "kafka-write", "write", "pipeline")


def probe_totals(directory: Path, timeline: bool = False) -> dict[str, tuple[int, float, float]]:
    """what -> (calls, cpu seconds, wall seconds), and empties the files; ``timeline``:
    print every call's start and end, in seconds from the first call's start."""
    totals = {}
    calls = []
    for path in sorted(directory.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        calls += [
            (r["start"], r["start"] + r["wall"], r["cpu"], r["pid"], path.stem, r.get("marks", {}))
            for r in rows
        ]
        totals[path.stem] = (len(rows), sum(r["cpu"] for r in rows), sum(r["wall"] for r in rows))
        path.unlink()
    if timeline and calls:
        first = min(c[0] for c in calls)
        for start, end, cpu, pid, what, marks in sorted(calls):
            noted = "".join(
                f"; {name} at {start - first + at:.3f} (cpu {used:.3f})"
                for name, (at, used) in marks.items()
            )
            print(
                f"  {start - first:7.3f} .. {end - first:7.3f}  {what:22} pid {pid:6} "
                f"cpu {cpu:.3f}{noted}"
            )
    return totals


# --- CPU time from /proc ------------------------------------------------------------------------


def _stat(path: Path) -> tuple[str, list[str]] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    return name, text[text.rindex(")") + 2 :].split()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(entry / "stat")
            if stat is not None and int(stat[1][1]) == pid:
                found.append(int(entry.name))
    return found


def _module(pid: int) -> str:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode() for a in args if a]
    return words[-1].rsplit(".", 1)[-1] if words else "?"


def _jvm_group(name: str) -> str:
    for prefix, group in (
        ("Executor task", "jvm task threads"),
        ("stdout writer", "jvm python-input writers"),
        ("writer for", "jvm python-input writers"),
        ("GC ", "jvm gc"),
        ("G1 ", "jvm gc"),
        ("C2 ", "jvm jit"),
        ("C1 ", "jvm jit"),
        ("stream executi", "jvm stream execution"),
    ):
        if name.startswith(prefix):
            return group
    return "jvm other"


def cpu_snapshot(jvm: int) -> dict[str, float]:
    """CPU seconds so far by group: the JVM's threads, every Python process under it."""
    totals: dict[str, float] = defaultdict(float)
    for task in Path(f"/proc/{jvm}/task").iterdir():
        stat = _stat(task / "stat")
        if stat is not None:
            totals[_jvm_group(stat[0])] += (int(stat[1][11]) + int(stat[1][12])) / TICK
    stack = _children(jvm)
    while stack:
        pid = stack.pop()
        stat = _stat(Path(f"/proc/{pid}/stat"))
        if stat is None:
            continue
        kids = _children(pid)
        daemon = bool(kids)
        group = f"py {_module(pid)}{' (daemon)' if daemon else ''}"
        totals[group] += (int(stat[1][11]) + int(stat[1][12])) / TICK
        totals["reaped children"] += (int(stat[1][13]) + int(stat[1][14])) / TICK
        stack.extend(kids)
    stat = _stat(Path(f"/proc/{jvm}/stat"))
    if stat is not None:
        totals["reaped children"] += (int(stat[1][13]) + int(stat[1][14])) / TICK
    me = os.times()
    totals["driver python"] = me.user + me.system
    return totals


def python_workers(jvm: int) -> list[tuple[int, str]]:
    """(pid, module) of every forked Python worker under the JVM (not the daemons)."""
    found = []
    stack = _children(jvm)
    while stack:
        pid = stack.pop()
        kids = _children(pid)
        if kids:
            stack.extend(kids)
        else:
            found.append((pid, _module(pid)))
    return found


# --- queries -------------------------------------------------------------------------------------


def run(
    spark: Any,
    root: Path,
    variant: str,
    name: str,
    rows: int,
    batch_rows: int,
    probe: dict[str, str] | None = None,
) -> Any:
    """One query of ``variant``: (seconds, progress reports); ``probe``: the options of the
    probed txnlog classes (their calls timed), else plain ``format("txnlog")``."""
    probe = probe or {}
    variant, _, chunk_rows = variant.partition("@")  # kafka-ceiling@65536: its batch rows
    if variant in ("read", "pipeline") and chunk_rows:  # read@4096:16384: min, max rows
        probe = {
            **probe,
            "probeMinRows": chunk_rows.split(":")[0],
            "probeMaxRows": chunk_rows.split(":")[1],
        }
    txnlog = "txnlog_probed" if probe else "txnlog"
    log_dir = root / "log"
    writes = variant in ("write", "pipeline", "kafka-write")
    if writes:
        with Log.open(log_dir) as log:
            log.create_topic(
                f"{OUTPUT}_{name}", OUTPUT_PARTITIONS, config={"segment.bytes": str(1 << 30)}
            )
    if variant in ("ceiling", "write", "kafka-ceiling", "kafka-write"):
        fmt = "bench_blank_kafka" if variant.startswith("kafka") else "bench_blank"
        if "probeDir" in probe:
            fmt = "bench_blank_probed"
        frame = (
            spark.readStream.format(fmt)
            .options(**{k: v for k, v in probe.items() if k in ("probeDir", "probeProfile")})
            .option("kafka", str(variant.startswith("kafka")).lower())
            .option("rows", str(rows))
            .option("batchRows", str(batch_rows))
            .option("partitions", str(INPUT_PARTITIONS))
            .option("chunkRows", chunk_rows or str(CHUNK_ROWS))
            .load()
        )
        if variant.startswith("kafka"):
            frame = frame.select("key", "value")
    else:
        frame = (
            spark.readStream.format(txnlog)
            .options(**probe)
            .option("subscribe", INPUT)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(batch_rows))
            .load(str(log_dir))
            .select("key", "value")
        )
    writer = frame.writeStream.option("checkpointLocation", str(root / f"ck-{name}"))
    if writes:
        writer = writer.format(txnlog).options(**probe).option("topic", f"{OUTPUT}_{name}")
        writer = writer.option("path", str(log_dir))
    else:
        null = "bench_null_probed" if "probeDir" in probe else "bench_null"
        writer = writer.format(null).options(
            **{k: v for k, v in probe.items() if k in ("probeDir", "probeProfile")}
        )
    began = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - began
    progress = query.recentProgress
    query.stop()
    return elapsed, progress


def query_name(variant: str, round_: int) -> str:
    return "".join(c if c.isalnum() else "_" for c in variant) + f"_{round_}"


def start_pyspy(jvm: int, out: Path, tag: str) -> list[subprocess.Popen[bytes]]:
    procs = []
    pyspy = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "py-spy"
    for pid, module in python_workers(jvm):
        target = out / f"{tag}-{module}-{pid}.txt"
        procs.append(
            subprocess.Popen(
                [
                    str(pyspy),
                    "record",
                    "-p",
                    str(pid),
                    "--nonblocking",
                    "-r",
                    str(PYSPY_RATE),
                    "-f",
                    "raw",
                    "-o",
                    str(target),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    time.sleep(0.5)
    return procs


def stop_pyspy(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGINT)
    for proc in procs:
        proc.wait(timeout=30)


def pyspy_summary(directory: Path, variant: str, top: int = 40) -> None:
    """Seconds of samples per function (inclusive) over the py-spy files of ``variant``."""
    inclusive: dict[str, int] = defaultdict(int)
    for path in directory.glob(f"{variant}-*.txt"):
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack:
                continue
            names = {re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")}
            for name in names:
                inclusive[name] += int(count)
    print(f"py-spy, {variant} (seconds of samples, inclusive, all workers and rounds):")
    for name, samples in sorted(inclusive.items(), key=lambda item: -item[1])[:top]:
        print(f"  {samples / PYSPY_RATE:8.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=250_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--pyspy", help="directory: py-spy the Python workers of every run")
    parser.add_argument("--probe", help="directory: time txnlog's calls in Spark's processes")
    parser.add_argument(
        "--profile", choices=("cpu", "wall"), help="with --probe: a cProfile dump per call"
    )
    parser.add_argument(
        "--timeline", action="store_true", help="with --probe: the last round's calls"
    )
    args = parser.parse_args()
    variants = args.variants.split(",")
    spark = local_session("pipeline-costs")
    for source in (BlankSource, KafkaBlankSource, NullSink, ProbedTxnLog, ProbedBlank, ProbedNull):
        spark.dataSource.register(source)
    jvm = spark.sparkContext._gateway.proc.pid
    seconds: dict[str, list[float]] = defaultdict(list)
    cpu: dict[str, list[dict[str, float]]] = defaultdict(list)
    stage: dict[str, list[dict[str, float]]] = defaultdict(list)
    probed: dict[str, list[dict[str, tuple[int, float, float]]]] = defaultdict(list)
    probe = None
    if args.probe:
        probe_dir = Path(args.probe).resolve()
        probe_dir.mkdir(parents=True, exist_ok=True)
        probe = {"probeDir": str(probe_dir), "probeProfile": args.profile or ""}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        build_input(root / "log", args.rows)
        for variant in variants:
            run(spark, root, variant, f"warm-{variant}", args.rows, args.batch_rows, probe)
        if args.probe:
            probe_totals(probe_dir)
            for old in probe_dir.glob("*.prof"):
                old.unlink()
        for round_ in range(args.rounds):
            for variant in variants:
                spies = []
                if args.pyspy:
                    Path(args.pyspy).mkdir(parents=True, exist_ok=True)
                    spies = start_pyspy(jvm, Path(args.pyspy), f"{variant}-{round_}")
                before = cpu_snapshot(jvm)
                took, progress = run(
                    spark,
                    root,
                    variant,
                    query_name(variant, round_),
                    args.rows,
                    args.batch_rows,
                    probe,
                )
                after = cpu_snapshot(jvm)
                if args.probe:
                    time.sleep(0.2)
                    last = round_ == args.rounds - 1 and args.timeline
                    if last:
                        print(f"timeline of {variant}, round {round_}:")
                    probed[variant].append(probe_totals(probe_dir, last))
                    for prof in probe_dir.glob("*.prof"):
                        prof.rename(prof.with_name(f"{variant}-{round_}-{prof.name}"))
                if spies:
                    stop_pyspy(spies)
                seconds[variant].append(took)
                cpu[variant].append({k: after[k] - before.get(k, 0.0) for k in after})
                stage[variant].append(_stages(progress))
    spark.stop()
    report(variants, seconds, cpu, stage, args)
    if probed:
        whats = sorted({w for v in variants for p in probed[v] for w in p})
        print("txnlog's calls inside Spark's processes (medians; calls, thread cpu s, wall s):")
        for what in whats:
            cells = []
            for v in variants:
                runs = [p.get(what, (0, 0.0, 0.0)) for p in probed[v]]
                cells.append(
                    f"{_median([r[0] for r in runs]):4.0f} {_median([r[1] for r in runs]):5.2f} "
                    f"{_median([r[2] for r in runs]):5.2f}"
                )
            print(f"{what:28}" + "".join(f"{c:>18}" for c in cells))
    if args.pyspy:
        for variant in variants:
            pyspy_summary(Path(args.pyspy), variant)


def _stages(progress: list[Any]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for report_ in progress:
        for key, value in report_.durationMs.items():
            totals[key] += value / 1000
    return totals


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def report(
    variants: list[str],
    seconds: dict[str, list[float]],
    cpu: dict[str, list[dict[str, float]]],
    stage: dict[str, list[dict[str, float]]],
    args: Any,
) -> None:
    print(
        f"{args.rows:,} rows, micro-batches of {args.batch_rows:,}, local[2], "
        f"medians of {args.rounds} rounds; load {os.getloadavg()}"
    )
    print(f"{'':28}" + "".join(f"{v:>14}" for v in variants))
    print(f"{'wall seconds':28}" + "".join(f"{_median(seconds[v]):14.2f}" for v in variants))
    for key in (
        "latestOffset",
        "queryPlanning",
        "addBatch",
        "walCommit",
        "commitOffsets",
        "triggerExecution",
    ):
        row = [_median([s.get(key, 0.0) for s in stage[v]]) for v in variants]
        print(f"{'stage ' + key:28}" + "".join(f"{x:14.2f}" for x in row))
    groups = sorted({k for v in variants for c in cpu[v] for k in c})
    for group in groups:
        row = [_median([c.get(group, 0.0) for c in cpu[v]]) for v in variants]
        if max(row) >= 0.02:
            print(f"{'cpu ' + group:28}" + "".join(f"{x:14.2f}" for x in row))
    total = [_median([sum(c.values()) for c in cpu[v]]) for v in variants]
    print(f"{'cpu total':28}" + "".join(f"{x:14.2f}" for x in total))


if __name__ == "__main__":
    main()
