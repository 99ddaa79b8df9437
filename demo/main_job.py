"""``make demo``: the main job — an exactly-once ``txnlog → Spark → txnlog`` pipeline that is
killed part-way and restarted.

1. Create ``orders`` (4 partitions) and ``orders_clean`` (3); a workload process fills ``orders``
   with committed transactions, aborted ones (every third) and one transaction held open for a
   few seconds (it pins the last stable offset, then commits).
2. Run the streaming ETL query (``upper(value)``) in its own driver process, with a checkpoint.
3. SIGKILL the driver's whole process group (JVM and Python workers) after some micro-batches.
4. Restart the query from the checkpoint (Trigger.AvailableNow) once the workload is done.
5. Verify and print the report; exit 1 unless exactly-once holds.

With ``--kafka`` (``make demo-kafka``) the same job runs in Kafka mode: a ``txnlog serve`` of the
log directory is started on 127.0.0.1, and the query's source and sink reach it only through
``kafka.bootstrap.servers`` (confluent-kafka), as they would any Kafka cluster; the report also
reads the output back with a confluent-kafka read_committed consumer. The workload still writes
the directory directly (the server is one more peer of it).

    python -m demo.main_job [--kafka] [--transactions N] [--per-transaction N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from demo.pipeline import create_topics, kill_group, progress_totals, sink_ledgers, spawn, verify
from demo.served import start_serve
from txn_log.log import Log


def wait_for_batches(log_dir: Path, count: int, timeout_s: float, bootstrap: str | None) -> int:
    """Wait until the sink's ledger shows ``count`` committed micro-batches."""
    deadline = time.monotonic() + timeout_s
    committed = 0
    while time.monotonic() < deadline:
        ledgers = sink_ledgers(Log.open(log_dir, read_only=True), bootstrap)
        committed = max((entry.batch_id + 1 for entry in ledgers), default=0)
        if committed >= count:
            break
        time.sleep(0.25)
    return committed


def run(work: Path, transactions: int, per_txn: int, seed: int, kafka: bool = False) -> int:
    log_dir = work / "log"
    create_topics(log_dir)
    if not kafka:
        return run_job(work, transactions, per_txn, seed, None)
    with ExitStack() as stack:
        errors = stack.enter_context(open(work / "serve.err", "w"))
        server = start_serve(log_dir, stderr=errors)
        stack.callback(server.stop)
        print(f"Kafka mode: {server.banner[0]}")
        return run_job(work, transactions, per_txn, seed, server.bootstrap)


def run_job(work: Path, transactions: int, per_txn: int, seed: int, bootstrap: str | None) -> int:
    log_dir, checkpoint = work / "log", work / "checkpoint"
    kafka = (bootstrap,) if bootstrap else ()
    started = time.monotonic()
    workload = spawn("workload", log_dir, transactions, per_txn, seed, 4.0, 3, "orders-writer")
    driver = spawn(
        "query", log_dir, checkpoint, "continuous", per_txn * 4, *kafka, new_session=True
    )
    batches_before_kill = wait_for_batches(log_dir, 3, 180, bootstrap)
    kill_group(driver)
    print(
        f"killed the driver (SIGKILL to its process group) after {batches_before_kill} "
        "committed micro-batches"
    )
    _, err = workload.communicate(timeout=600)
    if workload.returncode != 0:
        print(f"the workload failed:\n{err}", file=sys.stderr)
        return 1
    restarted = spawn("query", log_dir, checkpoint, "available-now", per_txn * 4, *kafka)
    out, err = restarted.communicate(timeout=600)
    if restarted.returncode != 0:
        print(f"the restarted query failed:\n{err[-4000:]}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - started
    report = verify(log_dir, bootstrap)
    print_report(report.as_dict(), elapsed, log_dir, progress_of(out), bootstrap)
    return 0 if report.exactly_once else 1


def progress_of(driver_output: str) -> dict[str, int]:
    """The progress totals a driver printed when its query ended (``pipeline.run_query``)."""
    for line in reversed(driver_output.splitlines()):
        if line.startswith('{"progress"'):
            totals: dict[str, int] = json.loads(line)["progress"]
            return totals
    return progress_totals([])


def print_report(
    report: dict[str, object],
    elapsed: float,
    log_dir: Path,
    catch_up: dict[str, int],
    bootstrap: str | None = None,
) -> None:
    records_out = int(report["records_out"])  # type: ignore[call-overload]
    trigger_s, first_s = catch_up["trigger_ms"] / 1000, catch_up["first_trigger_ms"] / 1000
    rate = catch_up["rows"] / trigger_s if trigger_s else 0.0
    lines = [
        ("records in (committed)", report["records_in"]),
        ("records out", records_out),
        ("duplicates", report["duplicates"]),
        ("missing", report["missing"]),
        ("unexpected (e.g. aborted)", report["unexpected"]),
        ("aborted records skipped", report["aborted_skipped"]),
        ("per-key order violations", report["order_violations"]),
        ("micro-batches committed", report["micro_batches"]),
        (
            "throughput after restart",
            f"{rate:,.0f} records/s ({catch_up['rows']:,} records caught up in "
            f"{catch_up['batches']} micro-batches, {trigger_s:.1f} s in triggers, of which "
            f"{first_s:.1f} s in the first: Spark starting its Python workers)",
        ),
        ("wall time (whole job)", f"{elapsed:.1f} s, two Spark driver starts included"),
        ("group offsets = input ends", report["group_offsets_match"]),
        ("LSO = log end everywhere", report["lso_at_log_end"]),
    ]
    print("\n".join(f"{name:<28} {value}" for name, value in lines))
    log = Log.open(log_dir, read_only=True)
    ledgers = sink_ledgers(log, bootstrap)
    if ledgers:
        group = ledgers[-1].group_id
        committed = log.committed(group, log.partitions("orders")) if group else {}
        offsets = {str(tp): om.offset if om else None for tp, om in committed.items()}
        print(f"{'sink group offsets':<28} {group}: {json.dumps(offsets)}")
    print("exactly once: " + ("YES" if report["exactly_once"] else "NO"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transactions", type=int, default=60)
    parser.add_argument("--per-transaction", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", type=Path, default=None, help="work in DIR and keep it")
    parser.add_argument(
        "--kafka", action="store_true", help="run against a txnlog serve (Kafka mode)"
    )
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="txnlog-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return run(work, args.transactions, args.per_transaction, args.seed, args.kafka)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
