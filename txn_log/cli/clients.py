"""``txnlog produce`` and ``txnlog consume``: quick manual use (the console producer/consumer).

``produce`` sends each line of stdin as a value (``--key-separator`` splits key and value),
idempotently, or in one transaction with ``--transactional-id``; internal topics are refused
before anything is written (C-03). It prints nothing on stdout and its summary on stderr.
``consume`` prints values, one per line on stdout (``--print-key`` for keys), and its summary
on stderr, at ``--isolation-level`` (read_committed by default); like any
read_committed reader it lets the coordinator abort transactions past their timeout. It follows
the topic until Ctrl-C (SIGINT: the summary, exit 0), as ``kafka-console-consumer`` does,
unless ``--timeout-ms`` (idle time) or ``--max-messages`` stops it first.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

from txn_log.cli.common import EXIT_OK, open_log
from txn_log.consumer.consumer import ConsumerRecord
from txn_log.topic_config import check_client_append
from txn_log.topic_partition import TopicPartition


def add_parser(subparsers: Any) -> None:
    produce = subparsers.add_parser(
        "produce",
        help="send stdin lines (modifies the log)",
        description=(
            "Send stdin to TOPIC, one record per line, until the end of input (Ctrl-D on a "
            "terminal): each line is the value, or KEY<sep>VALUE with --key-separator. Records "
            "are sent idempotently, or all in one transaction with --transactional-id. Output: "
            "stdout stays empty; the summary ('Sent N record(s) to TOPIC.') goes to stderr once "
            "every record is in the log, as do errors."
        ),
    )
    produce.add_argument("path")
    produce.add_argument("topic")
    produce.add_argument("--partition", type=int, default=None)
    produce.add_argument(
        "--key-separator",
        default=None,
        help="split each line into KEY<sep>VALUE at the first separator",
    )
    produce.add_argument(
        "--transactional-id", default=None, help="send all lines in one transaction under this id"
    )
    produce.set_defaults(run=run_produce)

    consume = subparsers.add_parser(
        "consume",
        help="print records of a topic",
        description=(
            "Print the records of TOPIC, one record per line on stdout: the value, after the "
            "key with --print-key and TOPIC-PARTITION@OFFSET with --print-offset, "
            "tab-separated ('null' for a missing key or value). Without --from-beginning only "
            "records that arrive from now on are printed. It follows the topic until Ctrl-C, "
            "unless --timeout-ms or --max-messages stops it first. The summary ('Processed a "
            "total of N message(s).') goes to stderr at the end, as do errors."
        ),
    )
    consume.add_argument("path")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, default=None)
    consume.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the log start (default: only records that arrive from now on)",
    )
    consume.add_argument(
        "--timeout-ms",
        type=int,
        default=None,
        help="stop when no record arrived for this long (default: follow until Ctrl-C)",
    )
    consume.add_argument(
        "--isolation-level",
        default="read_committed",
        choices=["read_committed", "read_uncommitted"],
    )
    consume.add_argument("--max-messages", type=int, default=None)
    consume.add_argument("--print-key", action="store_true")
    consume.add_argument("--print-offset", action="store_true")
    consume.set_defaults(run=run_consume)


def run_produce(args: argparse.Namespace) -> int:
    check_client_append(args.topic)  # before anything is opened, let alone written (C-03)
    log = open_log(args.path, writable=True)
    log.partitions(args.topic)  # a mistyped topic fails before anything is read
    producer = log.producer(args.transactional_id)
    if args.transactional_id is not None:
        producer.init_transactions()
        producer.begin_transaction()
    count = 0
    for line in sys.stdin.buffer:
        line = line.rstrip(b"\r\n")
        key = None
        if args.key_separator is not None:
            key, _, line = line.partition(args.key_separator.encode())
        producer.send(args.topic, line, key=key, partition=args.partition)
        count += 1
    if args.transactional_id is not None:
        producer.commit_transaction()
    else:
        producer.flush()
    print(f"Sent {count} record(s) to {args.topic}.", file=sys.stderr)
    return EXIT_OK


def run_consume(args: argparse.Namespace) -> int:
    log = open_log(args.path, writable=args.isolation_level == "read_committed")
    consumer = log.consumer(args.isolation_level)
    partitions = log.partitions(args.topic)
    if args.partition is not None:
        partitions = [
            log.partition_reader(TopicPartition(args.topic, args.partition)).topic_partition
        ]
    positions = {
        tp: consumer.start_offset(tp) if args.from_beginning else consumer.end_offset(tp)
        for tp in partitions
    }
    printed = 0
    with CtrlC() as ctrl_c:
        for line in follow(args, consumer, positions, ctrl_c):
            print(line, flush=True)
            printed += 1
    print(f"Processed a total of {printed} message(s).", file=sys.stderr)
    return EXIT_OK


class CtrlC:
    """Ctrl-C (SIGINT) while in this context sets ``pressed``, as it ends
    ``kafka-console-consumer``: the follow loop stops between two records, never in the middle
    of a read (a KeyboardInterrupt raised there could leave a lock of the log held).

    The handler only assigns an attribute, and must take no lock: Python runs it in the main
    thread between any two bytecodes, so a handler that took a lock the main thread might be
    holding at that moment would wait for itself forever. ``threading.Event.set`` does take
    one, the lock ``Event.wait`` holds around its wait, and the process then never exited.
    Main thread only (``signal.signal``); the previous handler is restored on exit.
    """

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None

    def __enter__(self) -> CtrlC:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: object) -> None:
        self.pressed = True


def follow(
    args: argparse.Namespace,
    consumer: Any,
    positions: dict[TopicPartition, int],
    ctrl_c: CtrlC,
) -> Iterator[str]:
    """The records from ``positions`` on, formatted, until ``--max-messages`` were given, none
    arrived for ``--timeout-ms`` (without it: never), or Ctrl-C was pressed.

    Each round reads every partition up to an end planned before the read and moves its
    position to that end (past markers and aborted records that yield nothing). The end is
    taken first: one taken after the read would move the position past a record committed in
    between, which would then never be printed. Polls every 50 ms when idle.
    """
    given = 0
    idle_since = time.monotonic()
    while not ctrl_c.pressed:
        for tp, start in positions.items():
            remaining = None if args.max_messages is None else args.max_messages - given
            end = consumer.end_offset(tp)  # exclusive; only grows
            records = consumer.read(tp, start, end, max_records=remaining)
            for record in records:
                if ctrl_c.pressed:
                    return
                yield format_record(args, tp, record)
                positions[tp] = record.offset + 1
                given += 1
                idle_since = time.monotonic()
            if remaining is None or len(records) < remaining:  # not cut short by the limit
                positions[tp] = max(positions[tp], end)
        done = args.max_messages is not None and given >= args.max_messages
        idle_ms = (time.monotonic() - idle_since) * 1000
        if done or (args.timeout_ms is not None and idle_ms >= args.timeout_ms):
            return
        time.sleep(0.05)  # a SIGINT runs the handler within it; the loop then sees ``pressed``


def format_record(args: argparse.Namespace, tp: TopicPartition, record: ConsumerRecord) -> str:
    fields = []
    if args.print_offset:
        fields.append(f"{tp}@{record.offset}")
    if args.print_key:
        fields.append((record.key or b"null").decode("utf-8", "backslashreplace"))
    fields.append((record.value or b"null").decode("utf-8", "backslashreplace"))
    return "\t".join(fields)
