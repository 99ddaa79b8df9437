"""Shared pieces of the ``txnlog`` command: opening logs, naming partitions, output, progress.

Output conventions (Kafka's tools): human tables by default, ``--json`` for scripts (one JSON
document on stdout). Exit codes: 0 done, 1 the operation failed or found problems, 2 bad usage.
Progress goes to stderr and only when stderr is a terminal, so piped output stays clean.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from txn_log.errors import ConfigError, UnknownTopicOrPartitionError
from txn_log.log import FORMAT_FILE, Log
from txn_log.topic_partition import TopicPartition

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(ConfigError):
    """A mistyped argument: reported in one line, exit code 2."""


def open_log(path: str, *, writable: bool = False) -> Log:
    """An existing log: read-only unless the subcommand says it modifies the log. A missing log
    raises the one-line "no txnlog directory" error naming ``txnlog init``."""
    root = Path(path)
    if writable and not (root / FORMAT_FILE).is_file():
        Log.open(root, read_only=True)  # raises the one-line "no txnlog directory" error
    return Log.open(root, read_only=not writable)


def create_log(path: str) -> tuple[Log, bool]:
    """The log at ``path`` opened for writing, created when ``path`` is missing or an empty
    directory (``Log.open``), and whether this call found no log there.

    Refuses a file or a non-empty directory that is not a log (ConfigError, nothing written).
    Safe while other processes create the same log: ``Log.open`` creates it once under the log
    lock; two processes racing may both report it as new.
    """
    root = Path(path)
    existed = (root / FORMAT_FILE).is_file()
    return Log.open(root), not existed


def parse_topic_partition(log: Log, text: str) -> TopicPartition:
    """``topic-partition`` (Kafka's naming), checked against what exists."""
    topic, sep, partition = text.rpartition("-")
    if not sep or not partition.isdigit():
        raise UsageError(f"{text!r} is not TOPIC-PARTITION (e.g. orders-0)")
    count = len(log.partitions(topic))  # raises naming the existing topics
    tp = TopicPartition(topic, int(partition))
    if tp.partition >= count:
        raise UnknownTopicOrPartitionError(
            f"partition {tp.partition} of topic {topic!r} does not exist; valid partitions are "
            f"0..{count - 1}"
        )
    return tp


def emit_json(document: Any, out: TextIO = sys.stdout) -> None:
    json.dump(document, out, indent=2, sort_keys=True, default=str)
    out.write("\n")


def emit_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], out: TextIO = sys.stdout
) -> None:
    """A left-aligned text table with a header row; '(none)' when there are no rows."""
    if not rows:
        out.write("(none)\n")
        return
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    out.write("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    out.write("\n")
    for row in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")


class Progress:
    """A one-line progress indicator on a terminal's stderr; silent when piped."""

    def __init__(self, label: str, total: int, stream: TextIO = sys.stderr) -> None:
        self._label = label
        self._total = max(total, 1)
        self._stream = stream
        self._enabled = stream.isatty()
        self._last = 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self._enabled or now - self._last < 0.2:
            return
        self._last = now
        self._stream.write(f"\r{self._label}: {done * 100 // self._total:3d}% ")
        self._stream.flush()

    def finish(self) -> None:
        if self._enabled:
            self._stream.write("\r" + " " * (len(self._label) + 8) + "\r")
            self._stream.flush()


def all_partitions(log: Log, topics: Iterable[str]) -> list[TopicPartition]:
    return [tp for topic in topics for tp in log.partitions(topic)]


def add_action(
    actions: Any,
    name: str,
    help: str,
    run: Callable[[argparse.Namespace], int],
    *positionals: str,
    json: bool = False,
) -> argparse.ArgumentParser:
    """``txnlog <command> <name> path [positionals...] [--json]`` running ``run``.

    A positional written ``name?`` is optional (``nargs="?"``). Returns the parser for options
    of its own.
    """
    parser: argparse.ArgumentParser = actions.add_parser(name, help=help)
    parser.add_argument("path")
    for positional in positionals:
        if positional.endswith("?"):
            parser.add_argument(positional[:-1], nargs="?")
        else:
            parser.add_argument(positional)
    if json:
        parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)
    return parser
