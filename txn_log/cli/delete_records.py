"""``txnlog delete-records PATH --offset-json-file FILE``: delete every record below the given
offsets (modifies the log; Kafka's ``kafka-delete-records``, the engine's ``Log.delete_records``).

The file is Kafka's::

    {"partitions": [{"topic": "orders", "partition": 0, "offset": 42},
                    {"topic": "orders", "partition": 1, "offset": -1}],
     "version": 1}

``offset`` -1 means the high watermark (every record now in the partition). A partition listed
twice is refused, as Kafka's tool refuses it, before anything changes. Prints each partition's
new low watermark (its log start offset), or the error that refused it; exit code 1 when any
partition was refused. Safe on a live log: each partition's start moves under its lock, as an
append; the disk space comes back when housekeeping's retention deletes the segments wholly
below it (Kafka's retention thread does the same).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from txn_log.cli.common import EXIT_FAILED, EXIT_OK, UsageError, emit_json, emit_table, open_log
from txn_log.storage.delete_records import DeleteRecordsResult
from txn_log.topic_partition import TopicPartition

EXAMPLE = '{"partitions": [{"topic": "orders", "partition": 0, "offset": 42}], "version": 1}'


def add_parser(subparsers: Any) -> None:
    command = subparsers.add_parser(
        "delete-records",
        help="delete the records below offsets, as kafka-delete-records (modifies the log)",
    )
    command.add_argument("path")
    command.add_argument(
        "--offset-json-file",
        required=True,
        help=f"Kafka's JSON of partitions and offsets (-1: the high watermark), e.g. {EXAMPLE}",
    )
    command.add_argument("--json", action="store_true")
    command.set_defaults(run=run)


def parse_offsets(text: str, source: str) -> dict[TopicPartition, int]:
    """The offsets of Kafka's offset JSON; UsageError naming what is wrong and the shape."""

    def wrong(problem: str) -> UsageError:
        return UsageError(f"{source}: {problem}; expected JSON like {EXAMPLE}")

    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise wrong(f"not JSON ({error})") from None
    if not isinstance(document, dict) or "version" not in document:
        raise wrong("no version field")
    if document["version"] != 1:
        raise wrong(f"unsupported version {document['version']!r} (only 1)")
    entries = document.get("partitions")
    if not isinstance(entries, list):
        raise wrong("no partitions list")
    offsets: list[tuple[TopicPartition, int]] = []
    for entry in entries:
        fields = entry if isinstance(entry, dict) else {}
        topic, partition, offset = (fields.get(k) for k in ("topic", "partition", "offset"))
        if not (
            isinstance(topic, str)
            and all(isinstance(n, int) and not isinstance(n, bool) for n in (partition, offset))
            and partition >= 0  # type: ignore[operator]
        ):
            raise wrong(f"bad entry {entry!r}: needs a topic, a partition >= 0 and an offset")
        offsets.append((TopicPartition(topic, partition), offset))  # type: ignore[arg-type]
    twice = sorted(str(tp) for tp, n in Counter(tp for tp, _ in offsets).items() if n > 1)
    if twice:
        raise wrong(f"partitions listed more than once: {', '.join(twice)}")
    return dict(offsets)


def run(args: argparse.Namespace) -> int:
    path = Path(args.offset_json_file)
    try:
        text = path.read_text()
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None
    offsets = parse_offsets(text, str(path))
    with open_log(args.path, writable=True) as log:
        results = log.delete_records(offsets)
    rows = [_row(result) for result in results.values()]
    if args.json:
        emit_json({"partitions": rows})
    else:
        emit_table(rows, ["topic", "partition", "low_watermark", "error"])
    return EXIT_FAILED if any(r.error is not None for r in results.values()) else EXIT_OK


def _row(result: DeleteRecordsResult) -> dict[str, Any]:
    tp = result.topic_partition
    error = None if result.error is None else f"{type(result.error).__name__}: {result.error}"
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "low_watermark": result.low_watermark,
        "error": error,
    }
