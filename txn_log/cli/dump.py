"""``txnlog dump``: decoded batches, records and index files of one partition (kafka-dump-log).

Read-only. ``--records`` decodes every record; control records show their type and
coordinator epoch. Keys and values print as UTF-8 with undecodable bytes escaped, unless a
decoder is asked for (kafka-dump-log's ``--transaction-log-decoder`` / ``--offsets-decoder``,
which imply ``--records``): then each record of ``__transaction_state`` or
``__consumer_offsets`` shows the fields its reader decodes (``internal_records``, the decoders
``txnlog verify`` checks with), or ``decode_error``.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from txn_log.cli.common import (
    EXIT_OK,
    Progress,
    emit_json,
    emit_table,
    open_log,
    parse_topic_partition,
)
from txn_log.cli.internal_records import describe_record
from txn_log.record.batch_header import BatchHeader, is_crc_valid
from txn_log.record.codec import iter_records
from txn_log.record.control import parse_control_record
from txn_log.storage.partition_reader import PartitionReader
from txn_log.storage.producer_snapshot import read_snapshot, snapshot_offset_of
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC


def add_parser(subparsers: Any) -> None:
    dump = subparsers.add_parser("dump", help="decode the batches or index files of a partition")
    dump.add_argument("path")
    dump.add_argument("topic_partition", metavar="TOPIC-PARTITION")
    dump.add_argument(
        "--from",
        dest="from_offset",
        type=int,
        default=None,
        help="first offset to show (default: the log start)",
    )
    dump.add_argument("--records", action="store_true", help="also decode every record")
    kind = dump.add_mutually_exclusive_group()
    for name in ("index", "timeindex", "txnindex", "snapshot"):
        kind.add_argument(f"--{name}", action="store_true", help=f"dump the .{name} files")
    decoder = dump.add_mutually_exclusive_group()
    decoder.add_argument(
        "--transaction-log-decoder",
        dest="decoder",
        action="store_const",
        const=TRANSACTION_STATE_TOPIC,
        help="decode records as __transaction_state's (implies --records)",
    )
    decoder.add_argument(
        "--offsets-decoder",
        dest="decoder",
        action="store_const",
        const=CONSUMER_OFFSETS_TOPIC,
        help="decode records as __consumer_offsets' (implies --records)",
    )
    dump.add_argument("--json", action="store_true")
    dump.set_defaults(run=run, decoder=None)


def text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def describe_batch(position: int, header: BatchHeader, data: bytes) -> dict[str, Any]:
    return {
        "base_offset": header.base_offset,
        "last_offset": header.last_offset,
        "count": header.records_count,
        "position": position,
        "size": header.size_in_bytes,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "transactional": header.is_transactional,
        "control": header.is_control,
        "compression": header.compression.name.lower(),
        "timestamp_type": header.timestamp_type.name,
        "max_timestamp": header.max_timestamp,
        "crc": f"{header.crc:#010x}",
        "crc_valid": is_crc_valid(data, header),
    }


def describe_records(
    header: BatchHeader, data: bytes, decoder: str | None = None
) -> list[dict[str, Any]]:
    """Each record of a batch; ``decoder`` (an internal topic's name) decodes data records as
    that topic's reader does."""
    out = []
    for record in iter_records(data, verify_crc=False):
        entry: dict[str, Any] = {"offset": record.offset, "timestamp": record.timestamp_ms}
        if header.is_control:
            marker = parse_control_record(record.key, record.value)
            entry["control"] = marker.control_type.name
            entry["coordinator_epoch"] = marker.coordinator_epoch
        elif decoder is not None:
            entry.update(describe_record(decoder, record))
        else:
            entry.update(
                key=text(record.key),
                value=text(record.value),
                headers=[[k, text(v)] for k, v in record.headers],
            )
        out.append(entry)
    return out


def dump_batches(
    plog: PartitionReader, start: int, with_records: bool, decoder: str | None = None
) -> list[dict[str, Any]]:
    progress = Progress("dump", plog.log_end_offset - start)
    batches = []
    for segment, position, header in plog.batch_locations(start):
        data = segment.read_bytes(position, header.size_in_bytes)
        entry = describe_batch(position, header, data)
        entry["segment"] = segment.log_path.name
        if with_records or decoder is not None:
            entry["records"] = describe_records(header, data, decoder)
        batches.append(entry)
        progress.update(header.next_offset - start)
    progress.finish()
    return batches


def dump_files(plog: PartitionReader, kind: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if kind == "snapshot":
        for path in sorted(plog.directory.glob("*.snapshot")):
            for entry in read_snapshot(path):
                row = {"file": path.name, "offset": snapshot_offset_of(path)}
                row.update(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    last_sequence=entry.last_seq,
                    last_offset=entry.last_data_offset,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_first_offset=entry.current_txn_first_offset,
                )
                rows.append(row)
        return rows
    for segment in plog.segments:
        if kind == "index":
            entries: list[Any] = list(segment.offset_index.entries())
        elif kind == "timeindex":
            entries = list(segment.time_index.entries())
        else:
            entries = list(segment.txn_index.entries())
        name = segment.log_path.with_suffix(f".{kind}").name
        rows.extend({"file": name, **asdict(entry)} for entry in entries)
    return rows


def run(args: argparse.Namespace) -> int:
    log = open_log(args.path)
    tp = parse_topic_partition(log, args.topic_partition)
    plog = log.partition_reader(tp)
    kind = next(
        (k for k in ("index", "timeindex", "txnindex", "snapshot") if getattr(args, k)), None
    )
    if kind is not None:
        rows = dump_files(plog, kind)
        if args.json:
            emit_json(rows)
        else:
            emit_table(rows, list(rows[0]) if rows else ["file"])
        return EXIT_OK
    start = plog.log_start_offset if args.from_offset is None else args.from_offset
    plog.check_offset(start)
    batches = dump_batches(plog, start, args.records, args.decoder)
    if args.json:
        emit_json(batches)
        return EXIT_OK
    for batch in batches:
        records = batch.pop("records", None)
        print(" | ".join(f"{k}: {v}" for k, v in batch.items()))
        for record in records or ():
            print("  | " + " ".join(f"{k}: {v}" for k, v in record.items()))
    return EXIT_OK
