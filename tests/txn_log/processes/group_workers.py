"""Group-offset worker programs for ``test_group_offsets_processes.py`` (O-01..O-05).

Run from the repository root as ``python -m tests.txn_log.processes.group_workers ROLE ...``.
Each role prints one JSON line per step (flushed), so the parent can follow it.

``hold LOG TXN_ID GROUP TOPIC PARTITION OFFSET``
    init_transactions, begin, ``send_offsets_to_transaction({TOPIC-PARTITION: OFFSET}, GROUP)``
    and nothing else, print ``{"step": "open"}``; then wait for ``commit`` or ``abort`` on stdin,
    do it and print ``{"step": "commit"|"abort"}``. Until then the group's offsets sit in
    ``__consumer_offsets`` inside an open transaction.
``commit LOG GROUP TOPIC PARTITION OFFSET``
    a plain (non-transactional) offset commit; prints ``{"step": "done"}``.
``committed LOG GROUP TOPIC PARTITION``
    prints ``{"offset": <committed offset or null>}`` as a fresh process sees it.
``copy LOG TXN_ID GROUP IN_TOPIC OUT_TOPIC STOP_AFTER``
    a consume-transform-produce copier of partition 0: ``init_transactions``, then resumes at
    ``committed(GROUP)`` (0 when there is none), and for each input record runs one
    transaction that writes the upper-cased value to ``OUT_TOPIC`` and commits the next input
    offset with
    ``send_offsets_to_transaction`` (O-01, O-02). After ``STOP_AFTER`` transactions (-1: never)
    it SIGKILLs itself right after a commit, as a crash would; otherwise it exits when the
    input is exhausted. Prints ``{"step": "start", "offset": ...}`` and one
    ``{"step": "copied", "offset": ...}`` per committed transaction.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def report(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def hold(
    log_dir: str, transactional_id: str, group: str, topic: str, partition: str, offset: str
) -> None:
    log = Log.open(log_dir)
    producer = log.producer(transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        {TopicPartition(topic, int(partition)): int(offset)}, group
    )
    report(step="open", producer_id=producer.producer_id)
    command = sys.stdin.readline().strip()
    if command == "commit":
        producer.commit_transaction()
    elif command == "abort":
        producer.abort_transaction()
    else:
        raise SystemExit(f"expected 'commit' or 'abort' on stdin, got {command!r}")
    report(step=command)


def commit(log_dir: str, group: str, topic: str, partition: str, offset: str) -> None:
    log = Log.open(log_dir)
    log.group_offsets.commit(group, {TopicPartition(topic, int(partition)): int(offset)})
    report(step="done")


def committed(log_dir: str, group: str, topic: str, partition: str) -> None:
    tp = TopicPartition(topic, int(partition))
    found = Log.open(log_dir).committed(group, [tp])[tp]
    report(offset=None if found is None else found.offset)


def copy(
    log_dir: str, transactional_id: str, group: str, in_topic: str, out_topic: str, stop: str
) -> None:
    log = Log.open(log_dir)
    source, stop_after = TopicPartition(in_topic, 0), int(stop)
    producer = log.producer(transactional_id)
    # init first, as Kafka advises: it completes the previous instance's transaction (aborted,
    # or rolled forward past its commit point), so the offsets read next are settled (C-14).
    producer.init_transactions()
    found = log.committed(group, [source])[source]
    position = 0 if found is None else found.offset
    report(step="start", offset=position)
    for done, record in enumerate(log.consumer().read(source, position), start=1):
        producer.begin_transaction()
        producer.send(out_topic, (record.value or b"").upper(), partition=0)
        producer.send_offsets_to_transaction({source: record.offset + 1}, group)
        producer.commit_transaction()
        report(step="copied", offset=record.offset + 1)
        if done == stop_after:
            os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    roles = {"hold": hold, "commit": commit, "committed": committed, "copy": copy}
    if role not in roles:
        raise SystemExit(f"unknown role {role!r}; valid roles are {', '.join(roles)}")
    roles[role](*args)
