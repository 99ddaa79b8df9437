"""The long run (``make longrun``, issue 14): a sink's history of micro-batch commits, then a
real Spark query restarted on it. Does a restart pay for the history?

For each history size (default 1,000 and 100,000 commits), on a fresh log:

1. ``seed``: a real Spark query ``txnlog(src) -> txnlog(out)`` (``local[2]``, in a driver process
   of its own, Trigger.AvailableNow) runs batch 0 over one record per source partition. It
   writes the query's checkpoint (``metadata``, ``offsets/0``, ``commits/0``) and the sink's
   first ledger entry.
2. ``drive``: batches 1 .. N-1 are committed WITHOUT Spark through the sink's commit protocol,
   exactly as ``txn_sink`` does, under that query's identity (sink id ``spark-query-<id>``,
   prefix and group ``txnlog-<id>``): per batch, ``TASKS`` task transactions
   (``SinkCommitProtocol.begin_task`` / ``TaskTransaction.write`` / ``prepare_task``), each
   copying the batch's one record of its source partition to the output partition Kafka's
   partitioner gives its key, then ``protocol.commit(batch_id, messages, offsets)`` with the
   consumed source offsets (ledger entry + group offsets in one atomic commit). The log is
   opened as a Spark worker opens it (``Log.open``'s default): its own housekeeping thread
   runs retention and the compacting cleaner every 30 s (``DEFAULT_HOUSEKEEPING_INTERVAL_MS``)
   throughout, as in production. Then the checkpoint is brought to batch N-1 the way Spark
   itself would have left it: ``offsets/N-2``, ``offsets/N-1`` (Spark's own ``offsets/0``
   with the source line replaced) and ``commits/N-1`` (a copy of ``commits/0``).
3. ``restart``: new source records arrive and the query is restarted from that checkpoint in a
   fresh driver process (a fresh JVM, fresh Python workers: every process opens the log anew).
   Measured: from ``writeStream.start()`` to the end of its one micro-batch N (committed: the
   ledger holds it), and Spark's ``triggerExecution`` of that batch; the JVM's start is not
   included. Then the on-disk size (``.log`` files) of ``__transaction_state`` and
   ``__consumer_offsets``.
4. ``verify``: every source record is in ``out`` exactly once (read_committed), the ledger's
   last batch is N and equals Spark's last commit, and the ledger's offsets equal the group's
   committed offsets and the source's end offsets.

Steps 3 and 4 run ``--restarts`` times (default 3), each on a fresh copy of the same driven
history, and the median restart counts: a single restart of a 20-second Spark job moves by
half its time with whatever else the 2 cores run (1.57 measured beside a test suite, 1.03 on
the same kind of history on a quiet machine), so one sample cannot tell history from load.
``--keep DIR`` keeps each size's history in ``DIR/<commits>/history`` (``log``,
``checkpoint``, ``history.json`` with the drive's figures) and reuses one already there, so
the restarts can be measured again without another hour of driving.

Figures are printed, never asserted (``integration/test_longrun_history.py`` asserts the
correctness part). Real processes and files; the log lives on the disk of ``--dir``.

With ``--internal-segment-bytes`` (e.g. 1048576) the internal topics roll small segments, so
the housekeeping thread's cleaner really cleans them during the drive, before the restart.

    python -m bench.longrun_history [--sizes 1000,100000] [--dir DIR]
        [--internal-segment-bytes N] [--restarts 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity
from commit_protocol.embedded import EmbeddedBackend
from commit_protocol.naming import default_group_id, default_prefix, streaming_sink_id
from commit_protocol.spark_checkpoint import read_query_id
from tests.support import override_internal_config
from txn_log.log import Log
from txn_log.partitioner import partition_for_key
from txn_log.topic_partition import TopicPartition

SRC = "src"
OUT = "out"
TASKS = 4
"""Source and output partitions; Spark plans one write task per source partition, so each
micro-batch commits ``TASKS`` task transactions (``<prefix>-0`` .. ``<prefix>-3``)."""
RESTART_RECORDS = 5
"""New records per source partition that the restarted query's first micro-batch reads."""
INTERNAL = ("__transaction_state", "__consumer_offsets")
ROOT = Path(__file__).resolve().parent.parent


def key_of(partition: int, index: int) -> bytes:
    return b"k-%d-%d" % (partition, index)


def value_of(partition: int, index: int) -> bytes:
    return b"v-%d-%d" % (partition, index)


# --- the log and its source ----------------------------------------------------------------------


def create_log(path: Path, internal_segment_bytes: int | None = None) -> None:
    """The log with its two topics; ``internal_segment_bytes`` lowers the internal topics'
    ``segment.bytes`` (8 MiB) by rewriting their config files before anything is written
    (there is no alter-configs API), so that their segments roll and the housekeeping thread's
    cleaner has something to clean within a run of this length."""
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic(SRC, partitions=TASKS)
        log.create_topic(OUT, partitions=TASKS)
    if internal_segment_bytes is not None:
        override_internal_config(path, {"segment.bytes": str(internal_segment_bytes)})


def append_source(path: Path, per_partition: int) -> None:
    """``per_partition`` more records in every source partition (an idempotent producer):
    record ``i`` of partition ``p`` is ``k-p-i`` / ``v-p-i``."""
    with Log.open(path, housekeeping_interval_ms=None) as log:
        consumer = log.consumer()
        producer = log.producer()
        for p in range(TASKS):
            start = consumer.end_offset(TopicPartition(SRC, p))
            for i in range(start, start + per_partition):
                producer.send(SRC, value_of(p, i), key=key_of(p, i), partition=p)
            producer.flush()
        producer.close()


# --- Spark: the query, in a driver process of its own -------------------------------------------


def run_query(log_dir: str, checkpoint: str) -> dict[str, Any]:
    """Run the query until everything available is written; its timings (see module doc)."""
    from demo.spark_session import local_session

    spark = local_session("txnlog-longrun", "local[2]")
    try:
        started = time.perf_counter()
        query = (
            spark.readStream.format("txnlog")
            .option("subscribe", SRC)
            .option("startingOffsets", "earliest")
            .load(log_dir)
            .selectExpr("key", "value")
            .writeStream.format("txnlog")
            .option("topic", OUT)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start(log_dir)
        )
        query.awaitTermination()
        elapsed = time.perf_counter() - started
        progress = [p for p in query.recentProgress if int(p["numInputRows"]) > 0]
        return {
            "query_id": str(query.id),
            "start_to_end_s": elapsed,
            "batches": [int(p["batchId"]) for p in progress],
            "rows": sum(int(p["numInputRows"]) for p in progress),
            "trigger_ms": [int(p["durationMs"].get("triggerExecution", 0)) for p in progress],
        }
    finally:
        spark.stop()


def spark_process(log_dir: Path, checkpoint: Path) -> dict[str, Any]:
    """``run_query`` in a fresh driver process (fresh JVM and workers); its JSON result."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.longrun_history", "--query", str(log_dir),
         str(checkpoint)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the Spark driver failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- driving the commit protocol without Spark ---------------------------------------------------


def sink_of(query_id: str) -> SinkIdentity:
    """The identity ``txn_sink`` gives the query (no prefix or group id option set)."""
    return SinkIdentity(streaming_sink_id(query_id), default_prefix(query_id),
                        default_group_id(query_id))  # fmt: skip


class CleaningCounter(logging.Handler):
    """Counts the housekeeping thread's cleanings (its "cleaned N segment(s)" log lines)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.cleanings: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "cleaned" in message:
            self.cleanings.append(message)


def drive(
    path: Path, sink: SinkIdentity, first_batch: int, last_batch: int
) -> tuple[float, list[str]]:
    """Commit batches ``first_batch`` .. ``last_batch`` through the commit protocol (module
    doc, step 2); batch ``b`` consumes source offset ``b`` of every partition. Seconds taken
    and the cleanings the log's housekeeping thread did meanwhile."""
    counter = CleaningCounter()
    housekeeping_logger = logging.getLogger("txn_log.log_dir.housekeeping")
    housekeeping_logger.addHandler(counter)
    housekeeping_logger.setLevel(logging.INFO)
    started = time.perf_counter()
    log = Log.open(path)  # the default: its own housekeeping thread, cleaner included
    try:
        protocol = SinkCommitProtocol(EmbeddedBackend(log), sink)
        for batch_id in range(first_batch, last_batch + 1):
            messages = []
            for task in range(TASKS):
                transaction = protocol.begin_task(batch_id, task)
                assert transaction is not None, f"batch {batch_id} already in the ledger"
                key = key_of(task, batch_id)
                value = value_of(task, batch_id)
                records = pa.record_batch(
                    [pa.array([key], pa.binary()), pa.array([value], pa.binary())],
                    names=["key", "value"],
                )
                transaction.write(TopicPartition(OUT, partition_for_key(key, TASKS)), records)
                messages.append(protocol.prepare_task(transaction, batch_id, task, 0))
            offsets = [(SRC, task, batch_id + 1) for task in range(TASKS)]
            protocol.commit(batch_id, messages, offsets)
    finally:
        log.close()
        housekeeping_logger.removeHandler(counter)
    return time.perf_counter() - started, counter.cleanings


def advance_checkpoint(checkpoint: Path, last_batch: int, next_offset: int) -> None:
    """Leave the checkpoint as Spark would after committing ``last_batch`` (which consumed up
    to ``next_offset`` in every source partition): Spark's own batch-0 files, renumbered."""
    template = (checkpoint / "offsets" / "0").read_text().split("\n")
    for batch_id, end in ((last_batch - 1, next_offset - 1), (last_batch, next_offset)):
        source_line = json.dumps({SRC: {str(p): end for p in range(TASKS)}}, separators=(",", ":"))
        text = "\n".join([*template[:2], source_line])
        (checkpoint / "offsets" / str(batch_id)).write_text(text)
    shutil.copyfile(checkpoint / "commits" / "0", checkpoint / "commits" / str(last_batch))


# --- verification and sizes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    source_records: int
    output_records: int
    duplicates: int
    missing: int
    unexpected: int
    ledger_batch: int | None
    spark_last_batch: int
    ledger_offsets: dict[str, int]
    group_offsets: dict[str, int | None]
    source_end_offsets: dict[str, int]

    @property
    def exactly_once(self) -> bool:
        return not (self.duplicates or self.missing or self.unexpected)

    @property
    def consistent(self) -> bool:
        return (
            self.ledger_batch == self.spark_last_batch
            and self.ledger_offsets == self.group_offsets == self.source_end_offsets
        )


def verify(path: Path, checkpoint: Path, sink: SinkIdentity) -> Verdict:
    spark_last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    with Log.open(path, housekeeping_interval_ms=None) as log:
        consumer = log.consumer("read_committed")

        def records(topic: str) -> Counter[tuple[bytes | None, bytes | None]]:
            return Counter(
                (r.key, r.value) for tp in log.partitions(topic) for r in consumer.read(tp, 0)
            )

        source, output = records(SRC), records(OUT)
        sources = log.partitions(SRC)
        ends = {str(tp.partition): consumer.end_offset(tp) for tp in sources}
        committed = log.committed(sink.group_id or "", sources)
        entry = EmbeddedBackend(log).log.coordinator.ledger_entry(sink.sink_id)
    return Verdict(
        sum(source.values()),
        sum(output.values()),
        sum(n - 1 for n in output.values() if n > 1),
        sum(1 for r in source if r not in output),
        sum(1 for r in output if r not in source),
        None if entry is None else entry.sequence,
        spark_last,
        {} if entry is None else {str(p): o for t, p, o in entry.offsets if t == SRC},
        {str(tp.partition): None if om is None else om.offset for tp, om in committed.items()},
        ends,
    )


def topic_bytes(path: Path, topic: str) -> int:
    """On-disk bytes of the topic's segment files (``.log``), every partition."""
    return sum(p.stat().st_size for p in path.glob(f"{topic}-*/*.log"))


# --- one history size ----------------------------------------------------------------------------


HISTORY_FILE = "history.json"


@dataclass(frozen=True)
class History:
    """A driven history (steps 1-2 and the new source records), as kept on disk."""

    commits: int
    drive_s: float
    cleanings: list[str]
    query_id: str
    internal_segment_bytes: int | None = None


@dataclass(frozen=True)
class Restart:
    start_to_commit_s: float
    trigger_ms: int
    batches: list[int]
    verdict: Verdict


@dataclass(frozen=True)
class Run:
    commits: int
    drive_s: float
    start_to_commit_s: float
    """The median of the restarts (each on its own copy of the same history)."""
    trigger_ms: int
    restart_batches: list[int]
    transaction_state_bytes: int
    consumer_offsets_bytes: int
    segments: dict[str, int]
    cleanings: list[str]
    verdict: Verdict
    """The first incorrect restart's verdict, else the last one's."""
    restarts_s: list[float]
    restarts_trigger_ms: list[int]


def build_history(root: Path, commits: int, internal_segment_bytes: int | None = None) -> History:
    """Seed, drive to ``commits`` sink commits in all, add the restart's source records, in
    ``root`` (``log``, ``checkpoint``, ``history.json``)."""
    path, checkpoint = root / "log", root / "checkpoint"
    create_log(path, internal_segment_bytes)
    append_source(path, 1)
    seed = spark_process(path, checkpoint)
    if seed["batches"] != [0]:
        raise RuntimeError(f"the seeding query ran batches {seed['batches']}, expected [0]")
    query_id = read_query_id(str(checkpoint))
    assert query_id is not None and query_id == seed["query_id"]
    last = commits - 1
    append_source(path, last)  # offsets 1 .. last of every partition, one per batch
    drive_s, cleanings = drive(path, sink_of(query_id), 1, last) if last >= 1 else (0.0, [])
    if last >= 1:
        advance_checkpoint(checkpoint, last, last + 1)
    append_source(path, RESTART_RECORDS)
    history = History(commits, drive_s, cleanings, query_id, internal_segment_bytes)
    (root / HISTORY_FILE).write_text(json.dumps(asdict(history)))
    return history


def restart(history_root: Path, run_root: Path) -> Restart:
    """Step 3 and 4 on a copy of the history in ``run_root`` (the history stays as it was)."""
    history = History(**json.loads((history_root / HISTORY_FILE).read_text()))
    shutil.copytree(history_root, run_root)
    path, checkpoint = run_root / "log", run_root / "checkpoint"
    result = spark_process(path, checkpoint)
    return Restart(
        result["start_to_end_s"],
        sum(result["trigger_ms"]),
        result["batches"],
        verify(path, checkpoint, sink_of(history.query_id)),
    )


def long_run(
    root: Path,
    commits: int,
    internal_segment_bytes: int | None = None,
    restarts: int = 1,
) -> Run:
    """Build the history in ``root / "history"`` (or reuse the one found there), restart the
    query ``restarts`` times, each on a fresh copy of it, verify each (module doc)."""
    history_root = root / "history"
    if (history_root / HISTORY_FILE).is_file():
        history = History(**json.loads((history_root / HISTORY_FILE).read_text()))
        if (history.commits, history.internal_segment_bytes) != (commits, internal_segment_bytes):
            raise ValueError(
                f"{history_root} holds {history.commits} commits with internal segment.bytes "
                f"{history.internal_segment_bytes or 'default'}; asked for {commits} with "
                f"{internal_segment_bytes or 'default'}: choose another --keep directory"
            )
    else:
        shutil.rmtree(history_root, ignore_errors=True)
        history_root.mkdir(parents=True)
        history = build_history(history_root, commits, internal_segment_bytes)
    done: list[Restart] = []
    sizes: tuple[int, int, dict[str, int]] | None = None
    for number in range(restarts):
        run_root = root / f"restart-{number}"
        shutil.rmtree(run_root, ignore_errors=True)
        done.append(restart(history_root, run_root))
        if sizes is None:
            path = run_root / "log"
            sizes = (
                topic_bytes(path, "__transaction_state"),
                topic_bytes(path, "__consumer_offsets"),
                {t: len(list(path.glob(f"{t}-*/*.log"))) for t in INTERNAL},
            )
        shutil.rmtree(run_root)
    assert sizes is not None
    wrong = [r for r in done if not (r.verdict.exactly_once and r.verdict.consistent)]
    return Run(
        commits,
        history.drive_s,
        statistics.median(r.start_to_commit_s for r in done),
        int(statistics.median(r.trigger_ms for r in done)),
        done[-1].batches,
        *sizes,
        history.cleanings,
        (wrong[0] if wrong else done[-1]).verdict,
        [r.start_to_commit_s for r in done],
        [r.trigger_ms for r in done],
    )


def report(runs: Sequence[Run]) -> None:
    base = runs[0]
    print(
        "housekeeping cleanings while driving (the Log's own thread, every 30 s): "
        + ", ".join(f"{r.commits:,}: {len(r.cleanings)}" for r in runs)
    )
    print(
        f"{'commits':>9} {'drive s':>8} {'per commit ms':>13} {'restart s':>9} {'trigger ms':>10}"
        f" {'ratio':>6} {'__transaction_state':>20} {'__consumer_offsets':>19} {'exactly once':>12}"
        f" {'consistent':>10}"
    )
    for run in runs:
        per_commit = 1000 * run.drive_s / max(1, run.commits - 1)
        print(
            f"{run.commits:>9,} {run.drive_s:>8.1f} {per_commit:>13.2f} "
            f"{run.start_to_commit_s:>9.2f} {run.trigger_ms:>10,} "
            f"{run.start_to_commit_s / base.start_to_commit_s:>6.2f} "
            f"{run.transaction_state_bytes:>20,} {run.consumer_offsets_bytes:>19,} "
            f"{run.verdict.exactly_once!s:>12} {run.verdict.consistent!s:>10}",
            flush=True,
        )
    print("restarts (s, each on a fresh copy of the same history; the median above): " + "; ".join(
        f"{r.commits:,}: " + ", ".join(f"{t:.2f}" for t in r.restarts_s) for r in runs
    ))  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000", help="sink commits per run")
    parser.add_argument("--dir", default=None, help="where the logs go (default: a temp dir)")
    parser.add_argument(
        "--internal-segment-bytes", type=int, default=None,
        help="lower the internal topics' segment.bytes (default: 8 MiB)",
    )  # fmt: skip
    parser.add_argument(
        "--restarts", type=int, default=3,
        help="restarts per size, each on a fresh copy of the same history (the median counts)",
    )  # fmt: skip
    parser.add_argument(
        "--keep", default=None, metavar="DIR",
        help="build each size's history in DIR/<commits>/history and keep it; a history "
        "already there is reused (its drive figures are those of when it was built)",
    )  # fmt: skip
    parser.add_argument("--query", nargs=2, metavar=("LOG", "CHECKPOINT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.query:
        print(json.dumps(run_query(*args.query)), flush=True)
        return 0
    if args.restarts < 1:
        parser.error(f"--restarts must be at least 1, got {args.restarts}")
    runs = []
    with contextlib.ExitStack() as stack:
        if args.keep is None:
            base = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="txnlog-longrun-", dir=args.dir)
            ))  # fmt: skip
        else:
            base = Path(args.keep)
        for commits in (int(s) for s in args.sizes.split(",")):
            run = long_run(base / str(commits), commits, args.internal_segment_bytes, args.restarts)
            runs.append(run)
            print(json.dumps(asdict(run)), flush=True)
            if args.keep is None:
                shutil.rmtree(base / str(commits))
    report(runs)
    ok = all(r.verdict.exactly_once and r.verdict.consistent for r in runs)
    print("correct: every record exactly once, ledger and group offsets consistent" if ok
          else "WRONG: see the verdicts above")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
