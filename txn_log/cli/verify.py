"""``txnlog verify``: check every segment, index, snapshot and internal record; ``--repair``
fixes what it can.

What is checked, per partition, is listed in ``verify_checks``; each problem names the file and
position. Safe on a live log (DESIGN §3):

- The whole log is first checked without any lock, opened read-only. A partition with problems
  is checked again under its partition lock (the writers' lock, so no append is in flight and
  a half-written batch is finished), and only what that finds is reported: a live writer's
  batch, an index entry newer than the scan, or the index entry of an abort whose marker is
  being written are not problems. That second check waits for the writer's current batch.
- Segments, partitions and topics that retention or another process's topic deletion remove
  during the run are skipped, not reported.
- Without ``--repair`` nothing is written or created. ``--repair`` calls
  ``PartitionLog.repair`` for each partition with a repairable problem: under the partition
  lock it truncates a torn tail of the last segment (X-11, X-20), rebuilds every index and
  deletes unreadable snapshots, and it prints exactly what it changed. Corruption before the
  tail, and records of an internal topic that do not decode, are never "repaired" by dropping
  data: they stay reported and the exit code stays 1.
"""

from __future__ import annotations

import argparse
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from txn_log.cli.common import EXIT_FAILED, EXIT_OK, Progress, emit_json, emit_table, open_log
from txn_log.cli.verify_checks import PartitionCheck, Problem, check_partition
from txn_log.errors import TxnLogError, UnknownTopicOrPartitionError
from txn_log.log import Log
from txn_log.storage.file_names import LOG_SUFFIX
from txn_log.storage.partition_log import LOCK_FILE, PartitionLog
from txn_log.topic_partition import TopicPartition


def add_parser(subparsers: Any) -> None:
    verify = subparsers.add_parser(
        "verify", help="check segments, indexes, snapshots and internal records"
    )
    verify.add_argument("path")
    verify.add_argument(
        "--repair",
        action="store_true",
        help="truncate torn tails, rebuild indexes, drop unreadable snapshots (modifies the log)",
    )
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=run)


@contextmanager
def partition_lock(directory: Path) -> Iterator[bool]:
    """Hold the partition's writer lock (``PartitionLog``'s flock) without creating anything.

    Yields False if the partition directory is gone. A partition no writer ever opened has
    no lock file and nothing to wait for. Use it only while this process holds no other lock
    on the partition (a second flock in one process waits for the first).
    """
    try:
        fd: int | None = os.open(directory / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        fd = None
    if fd is None:
        yield directory.is_dir()
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)  # drops the flock


def partition_exists(log: Log, tp: TopicPartition) -> bool:
    """Whether the topic still has this partition (another process may have deleted it)."""
    try:
        exists = tp in log.partitions(tp.topic)
    except UnknownTopicOrPartitionError:
        return False
    return exists and (log.path / tp.directory_name).is_dir()


def checked_under_lock(
    log: Log, tp: TopicPartition, reuse: PartitionCheck | None
) -> PartitionCheck | None:
    directory = log.path / tp.directory_name
    with partition_lock(directory) as present:
        return check_partition(directory, tp.topic, reuse=reuse) if present else None


def repair_partition(log: Log, tp: TopicPartition) -> list[str]:
    """Everything ``PartitionLog.repair`` changed (it holds the partition lock throughout)."""
    if not partition_exists(log, tp):
        return []
    directory, config = log.path / tp.directory_name, log.topic_config(tp.topic)
    try:
        plog, done = PartitionLog.open_for_repair(directory, tp, config, clock=log.clock)
    except (TxnLogError, OSError) as error:
        return [f"could not repair {tp}: {error}"] if partition_exists(log, tp) else []
    plog.close()
    return done


def verify_partition(
    log: Log, tp: TopicPartition, progress: Progress, done: list[int], repair: bool
) -> tuple[list[Problem], list[str]] | None:
    """The problems left in one partition and what was repaired; None if it vanished."""
    directory = log.path / tp.directory_name

    def on_segment(size: int) -> None:
        done[0] += size
        progress.update(done[0])

    found = check_partition(directory, tp.topic, on_segment=on_segment)
    if found is not None and found.problems:
        found = checked_under_lock(log, tp, found)  # a live tail is no problem (DESIGN §3)
    repaired: list[str] = []
    if repair and found is not None and any(p.repairable for p in found.problems):
        repaired = repair_partition(log, tp)
        found = checked_under_lock(log, tp, None)
    if found is None or (found.problems and not partition_exists(log, tp)):
        return None
    return found.problems, repaired


def list_partitions(log: Log) -> list[TopicPartition]:
    """Every partition of every topic, internal ones included (deleted topics skipped)."""
    partitions: list[TopicPartition] = []
    for topic in log.topics(include_internal=True):
        try:
            partitions += log.partitions(topic)
        except UnknownTopicOrPartitionError:
            continue  # deleted since it was listed
    return partitions


def log_bytes(log: Log, partitions: list[TopicPartition]) -> int:
    total = 0
    for tp in partitions:
        for path in (log.path / tp.directory_name).glob(f"*{LOG_SUFFIX}"):
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                continue
    return total


def run(args: argparse.Namespace) -> int:
    log = open_log(args.path, writable=args.repair)
    partitions = list_partitions(log)
    progress = Progress("verify", log_bytes(log, partitions))
    problems: list[Problem] = []
    repaired: list[str] = []
    checked, done = 0, [0]
    for tp in partitions:
        result = verify_partition(log, tp, progress, done, args.repair)
        if result is None:
            continue  # deleted meanwhile
        problems += result[0]
        repaired += result[1]
        checked += 1
    progress.finish()
    report(args, problems, repaired, checked)
    return EXIT_FAILED if problems else EXIT_OK


def report(
    args: argparse.Namespace, problems: list[Problem], repaired: list[str], partitions: int
) -> None:
    if args.json:
        emit_json(
            {
                "partitions": partitions,
                "problems": [asdict(p) for p in problems],
                "repaired": repaired,
            }
        )
        return
    for line in repaired:
        print(f"repaired: {line}")
    if problems:
        emit_table([asdict(p) for p in problems], ["file", "position", "problem", "repairable"])
        hint = " (run with --repair to fix the repairable ones)" if not args.repair else ""
        print(f"{len(problems)} problem(s) in {partitions} partition(s){hint}")
    else:
        print(f"OK: {partitions} partition(s), no problems")
