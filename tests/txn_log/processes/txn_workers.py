"""Transactional worker programs for the crash-point suite (``test_txn_crash_points.py``).

Run from the repository root as ``python -m tests.txn_log.processes.txn_workers ROLE ...``,
usually with ``TXNLOG_CRASH_POINT`` (and ``TXNLOG_CRASH_AFTER``) set so that the engine
SIGKILLs the process at one step of a commit (``txn_log/fault_points.py``). Each role prints one
JSON line per acknowledged step (flushed), so the parent knows how far the worker got even when
it died with no chance to report.

Roles (``PARTS`` is ``partition:count,partition:count,...``):

``txn LOG TXN_ID commit|abort TOPIC PARTS GROUP OFFSETS_JSON``
    init_transactions, begin, send ``count`` records to each partition, send the group offsets
    (``{"topic:partition": next_offset}``) with ``send_offsets_to_transaction``, flush (so the
    data is durably in the log, uncommitted), print ``{"step": "flushed", ...}``, then commit or
    abort and print ``{"step": "done"}``.
``open LOG TXN_ID TOPIC PARTS [hang]``
    init, begin, send, flush, print the transaction's ``TxnRef`` fields; then either exit
    leaving the transaction open (a member of an atomic commit, DESIGN §4-5) or, with ``hang``,
    sleep until the parent kills it (a producer dying mid-transaction, X-03).
``commit-transactions LOG LEDGER SEQUENCE REFS_JSON GROUP OFFSETS_JSON``
    the driver side of DESIGN §4: ``coordinator.commit_transactions`` of the listed ones.
``init LOG TXN_ID``
    a new producer instance: ``init_transactions()`` (fences and finishes the old one, C-14).
"""

from __future__ import annotations

import json
import sys
import time

from txn_log.coordinator.txn_ref import TxnRef
from txn_log.log import Log
from txn_log.producer.producer import Producer
from txn_log.topic_partition import TopicPartition

BATCH_SIZE = 4096  # small, so each partition of a transaction gets several batches


def value_for(transactional_id: str, partition: int, index: int) -> bytes:
    """The ``index``-th value a worker writes to ``partition`` (the parent recomputes it)."""
    return b"%s|p%d|%06d|" % (transactional_id.encode(), partition, index) + b"v" * (
        64 + (index * 37) % 200
    )


def parse_parts(parts: str) -> dict[int, int]:
    """``"0:5,2:7"`` -> ``{0: 5, 2: 7}`` (partition -> record count)."""
    return {int(p): int(c) for p, c in (item.split(":") for item in parts.split(","))}


def parse_offsets(offsets_json: str) -> dict[TopicPartition, int]:
    out = {}
    for name, offset in json.loads(offsets_json).items():
        topic, partition = name.rsplit(":", 1)
        out[TopicPartition(topic, int(partition))] = int(offset)
    return out


def report(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def _send_all(producer: Producer, transactional_id: str, topic: str, parts: dict[int, int]) -> None:
    longest = max(parts.values())
    for index in range(longest):  # interleave partitions, as a real workload would
        for partition, count in sorted(parts.items()):
            if index < count:
                producer.send(
                    topic,
                    value_for(transactional_id, partition, index),
                    key=b"k%d" % partition,
                    partition=partition,
                )


def txn(
    log_dir: str,
    transactional_id: str,
    outcome: str,
    topic: str,
    parts: str,
    group: str,
    offsets_json: str,
) -> None:
    log = Log.open(log_dir)
    producer = log.producer(transactional_id, batch_size=BATCH_SIZE)
    producer.init_transactions()
    producer.begin_transaction()
    _send_all(producer, transactional_id, topic, parse_parts(parts))
    offsets = parse_offsets(offsets_json)
    if offsets:  # "{}": a transaction of data only
        producer.send_offsets_to_transaction(offsets, group)
    producer.flush()
    report(
        step="flushed",
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
    )
    if outcome == "commit":
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    report(step="done")


def open_txn(log_dir: str, transactional_id: str, topic: str, parts: str, hang: bool) -> None:
    log = Log.open(log_dir)
    producer = log.producer(transactional_id, batch_size=BATCH_SIZE)
    producer.init_transactions()
    producer.begin_transaction()
    _send_all(producer, transactional_id, topic, parse_parts(parts))
    producer.flush()
    report(
        step="flushed",
        transactional_id=transactional_id,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
    )
    while hang:  # the parent SIGKILLs us here, mid-transaction
        time.sleep(1.0)


def commit_transactions(
    log_dir: str, ledger: str, sequence: str, refs_json: str, group: str, offsets_json: str
) -> None:
    log = Log.open(log_dir)
    refs = [
        TxnRef(r["transactional_id"], r["producer_id"], r["producer_epoch"])
        for r in json.loads(refs_json)
    ]
    offsets = [(tp.topic, tp.partition, o) for tp, o in parse_offsets(offsets_json).items()]
    committed = log.coordinator.commit_transactions(
        ledger, int(sequence), refs, group_id=group, offsets=offsets
    )
    report(step="done", committed=committed)


def init(log_dir: str, transactional_id: str) -> None:
    log = Log.open(log_dir)
    producer = log.producer(transactional_id)
    producer.init_transactions()
    report(step="done", producer_id=producer.producer_id, producer_epoch=producer.producer_epoch)


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    if role == "txn":
        txn(*args)
    elif role == "open":
        open_txn(args[0], args[1], args[2], args[3], args[4:] == ["hang"])
    elif role == "commit-transactions":
        commit_transactions(*args)
    elif role == "init":
        init(*args)
    else:
        raise SystemExit(
            f"unknown role {role!r}; valid roles are txn, open, commit-transactions, init"
        )
