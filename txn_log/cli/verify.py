"""``txnlog verify``: check every segment, index and snapshot; ``--repair`` fixes what it can.

Checks, per partition: every batch of every segment (length, magic, CRC-32C, offsets moving
forward), segments following each other without gaps, offset-index entries pointing at the
batch that holds their offset, time-index entries growing, aborted-transaction entries inside
their segment, and every producer snapshot readable. Each problem names the file and position.

Without ``--repair`` nothing is written (the files are opened read-only). ``--repair`` truncates
a torn tail of a partition's last segment and rebuilds every segment's indexes, deletes
unreadable snapshots, and prints exactly what it removed; corruption before the tail is never
"repaired" by dropping data: it stays reported and the exit code stays 1.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from txn_log.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    Progress,
    all_partitions,
    emit_json,
    emit_table,
    open_log,
)
from txn_log.errors import CorruptRecordError
from txn_log.log import Log
from txn_log.storage.batch_scan import BatchScan, find_valid_batch_after
from txn_log.storage.file_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
    parse_offset_file_name,
)
from txn_log.storage.offset_index import OffsetIndex
from txn_log.storage.producer_snapshot import read_snapshot
from txn_log.storage.time_index import TimeIndex
from txn_log.storage.txn_index import TransactionIndex
from txn_log.topic_partition import TopicPartition


@dataclass(frozen=True)
class Problem:
    file: str
    position: int
    problem: str
    repairable: bool


def add_parser(subparsers: Any) -> None:
    verify = subparsers.add_parser("verify", help="check segments, indexes and snapshots")
    verify.add_argument("path")
    verify.add_argument(
        "--repair",
        action="store_true",
        help="truncate torn tails and rebuild indexes (modifies the log)",
    )
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=run)


def segment_paths(directory: Path) -> list[tuple[int, Path]]:
    found = [
        (parsed[0], p)
        for p in directory.iterdir()
        if (parsed := parse_offset_file_name(p.name)) and parsed[1] == LOG_SUFFIX
    ]
    return sorted(found)


def scan_segment(
    path: Path, base: int, expected_base: int | None, last: bool
) -> tuple[list[Problem], int]:
    """Problems of one .log file (and its indexes), and the segment's next offset."""
    problems: list[Problem] = []
    if expected_base is not None and base != expected_base:
        problems.append(
            Problem(
                str(path),
                0,
                f"segment starts at offset {base}, but the previous one ends at {expected_base}",
                False,
            )
        )
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        scan = BatchScan(fd, path, base_offset=base, start=0, end=size, file_size=size)
        next_offset, positions = base, {}  # batch position -> its last offset
        try:
            for position, header, _ in scan:
                positions[position] = header.last_offset
                next_offset = header.next_offset
        except CorruptRecordError as error:
            problems.append(Problem(str(path), scan.position, str(error), False))
            return problems, next_offset
        if scan.invalid is not None:
            follower = find_valid_batch_after(
                fd, scan.position, size, base_offset=base, min_base_offset=next_offset
            )
            torn = last and follower is None
            if torn:
                message = f"torn tail ({size - scan.position} bytes): {scan.invalid}"
            else:
                where = "" if follower is None else f"; a valid batch follows at {follower}"
                message = f"corrupt batch before the tail: {scan.invalid}{where}"
            problems.append(Problem(str(path), scan.position, message, torn))
            if not torn:  # the indexes cannot be judged against a segment read half-way
                return problems, next_offset
    finally:
        os.close(fd)
    problems += check_indexes(path.parent, base, positions, next_offset)
    return problems, next_offset


def check_indexes(
    directory: Path, base: int, positions: dict[int, int], next_offset: int
) -> list[Problem]:
    """Index entries against the batches found in the segment (read-only)."""
    problems: list[Problem] = []
    index_path = directory / offset_file_name(base, INDEX_SUFFIX)
    offsets = OffsetIndex(index_path, base).entries() if index_path.exists() else []
    for entry in offsets:
        if positions.get(entry.position) != entry.offset:
            message = f"entry for offset {entry.offset} does not point at the batch holding it"
            problems.append(Problem(str(index_path), entry.position, message, True))
    time_path = directory / offset_file_name(base, TIME_INDEX_SUFFIX)
    stamps = TimeIndex(time_path, base).entries() if time_path.exists() else []
    previous = -1
    for stamp in stamps:
        if stamp.timestamp < previous or not base <= stamp.offset < max(next_offset, base + 1):
            message = (
                f"entry ({stamp.timestamp}, {stamp.offset}) is out of order or outside the segment"
            )
            problems.append(Problem(str(time_path), 0, message, True))
        previous = stamp.timestamp
    txn_path = directory / offset_file_name(base, TXN_INDEX_SUFFIX)
    aborted = TransactionIndex(txn_path, base).entries() if txn_path.exists() else []
    for txn in aborted:
        if txn.last_offset >= next_offset:
            message = (
                f"aborted transaction of producer {txn.producer_id} ends at {txn.last_offset}, "
                f"past the segment's end {next_offset}"
            )
            problems.append(Problem(str(txn_path), 0, message, True))
    return problems


def check_snapshots(directory: Path) -> list[Problem]:
    problems = []
    for path in sorted(directory.glob(f"*{SNAPSHOT_SUFFIX}")):
        try:
            read_snapshot(path)
        except CorruptRecordError as error:
            problems.append(Problem(str(path), 0, str(error), True))
    return problems


def check_partition(
    log: Log, tp: TopicPartition, progress: Progress, done: int
) -> tuple[list[Problem], int]:
    """Every problem of one partition, and the bytes scanned so far (for progress)."""
    directory = log.path / tp.directory_name
    segments = segment_paths(directory)
    problems: list[Problem] = []
    expected: int | None = None
    for index, (base, path) in enumerate(segments):
        found, expected = scan_segment(path, base, expected, index == len(segments) - 1)
        problems += found
        done += path.stat().st_size
        progress.update(done)
    return problems + check_snapshots(directory), done


def repair_partition(log: Log, tp: TopicPartition) -> list[str]:
    """Truncate a torn tail, rebuild every segment's indexes, drop unreadable snapshots."""
    removed: list[str] = []
    for problem in check_snapshots(log.path / tp.directory_name):
        Path(problem.file).unlink()
        removed.append(f"deleted unreadable snapshot {problem.file}")
    try:
        plog = log.partition_log(tp)  # opening under the lock truncates a torn tail
    except CorruptRecordError as error:
        return [*removed, f"could not repair {tp}: {error}"]
    removed += plog.last_recovery
    segments = plog.segments
    for index, segment in enumerate(segments):
        try:
            result = segment.recover(
                plog.config.max_message_bytes, allow_torn_tail=index == len(segments) - 1
            )
        except CorruptRecordError as error:
            removed.append(f"could not repair {segment.log_path}: {error}")
            continue
        if result.truncated_bytes:
            removed.append(
                f"truncated {result.truncated_bytes} bytes at position "
                f"{result.truncated_at} of {segment.log_path}"
            )
    return removed


def run(args: argparse.Namespace) -> int:
    log = open_log(args.path, writable=args.repair)
    partitions = all_partitions(log, log.topics(include_internal=True))
    total = sum(
        p.stat().st_size
        for tp in partitions
        for p in (log.path / tp.directory_name).glob(f"*{LOG_SUFFIX}")
    )
    progress = Progress("verify", total)
    problems: list[Problem] = []
    done = 0
    for tp in partitions:
        found, done = check_partition(log, tp, progress, done)
        problems += found
    progress.finish()
    repaired: list[str] = []
    if args.repair:
        for tp in sorted(
            {
                tp
                for tp in partitions
                for p in problems
                if p.repairable and p.file.startswith(str(log.path / tp.directory_name) + os.sep)
            }
        ):
            repaired += repair_partition(log, tp)
        problems = [p for tp in partitions for p in check_partition(log, tp, progress, 0)[0]]
    report(args, problems, repaired, len(partitions))
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
