"""``txnlog get-offsets`` (kafka-get-offsets): a partition's offset for a time, as ListOffsets
answers it (``txn_log.consumer.offset_lookup``, the lookup ``txnlog serve`` answers with).

``--time`` takes Kafka's values: -1 latest (the default), -2 earliest, -3 the record with the
largest timestamp (KIP-734), or a timestamp in ms since the epoch (the first offset whose
record timestamp is at least it; -1 when every record is older). Latest is the high
watermark, as Kafka's tool asks (read_uncommitted); ``--isolation read_committed`` gives the
last stable offset instead (B-07). Prints ``topic:partition:offset`` lines, as Kafka's tool
does, or ``--json``. Reads only (the log is opened read-only).
"""

from __future__ import annotations

import argparse
from typing import Any

from txn_log.cli.common import EXIT_OK, UsageError, emit_json, open_log
from txn_log.consumer.offset_lookup import MAX_TIMESTAMP, list_offset
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "get-offsets", help="offsets for a time: latest, earliest or by timestamp"
    )
    parser.add_argument("path")
    parser.add_argument("--topic", help="one topic (default: every non-internal topic)")
    parser.add_argument(
        "--partitions", metavar="P,P...", help="some partitions of --topic (default: all)"
    )
    parser.add_argument(
        "--time",
        default="-1",
        help="-1 latest (default), -2 earliest, -3 max timestamp, or a timestamp in ms",
    )
    parser.add_argument(
        "--isolation",
        choices=["read_uncommitted", "read_committed"],
        default="read_uncommitted",
        help="what latest means: the high watermark (default, as Kafka's tool) or the LSO",
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def parse_time(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = MAX_TIMESTAMP - 1
    if value < MAX_TIMESTAMP:
        raise UsageError(
            f"--time {text!r} must be -1 (latest), -2 (earliest), -3 (max timestamp) or a "
            "timestamp in ms since the epoch (≥ 0)"
        )
    return value


def selected(log: Log, topic: str | None, partitions: str | None) -> list[TopicPartition]:
    if topic is None:
        if partitions is not None:
            raise UsageError("--partitions needs --topic")
        return [tp for t in log.topics() for tp in log.partitions(t)]
    every = log.partitions(topic)  # raises naming the existing topics
    if partitions is None:
        return every
    chosen = []
    for item in partitions.split(","):
        if not item.strip().isdigit() or int(item) >= len(every):
            raise UsageError(
                f"--partitions {partitions!r}: {item!r} is not a partition of topic {topic!r}; "
                f"valid partitions are 0..{len(every) - 1}"
            )
        chosen.append(every[int(item)])
    return chosen


def run(args: argparse.Namespace) -> int:
    timestamp = parse_time(args.time)
    log = open_log(args.path)
    consumer = log.consumer(args.isolation)
    rows = []
    for tp in selected(log, args.topic, args.partitions):
        offset, record_timestamp = list_offset(consumer, log.partition_reader(tp), tp, timestamp)
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "offset": offset,
                "timestamp": record_timestamp,
            }
        )
    if args.json:
        emit_json(rows)
    else:
        for row in rows:
            print(f"{row['topic']}:{row['partition']}:{row['offset']}")
    return EXIT_OK
