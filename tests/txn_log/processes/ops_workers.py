"""Peer processes for the operator commands' live-log tests (``tests/txn_log/cli/
test_operator_live.py``): each writes to the log until the parent closes its stdin.

``python -m tests.txn_log.processes.ops_workers commit-loop LOG GROUP TOPIC``: plain offset
commits of GROUP on every partition of TOPIC, offset n in round n
(``{"step": "acked", "round": n}`` after each, durable), as a consumer committing its
progress would.

``python -m tests.txn_log.processes.ops_workers produce-loop LOG TOPIC``: an idempotent
producer appends one record per partition per round and flushes (``{"step": "acked",
"round": n}``).
"""

from __future__ import annotations

import sys

from tests.txn_wire.admin_live_workers import report, stdin_closed
from txn_log.log import Log


def commit_loop(log_dir: str, group: str, topic: str) -> None:
    stop = stdin_closed()
    log = Log.open(log_dir)
    partitions = log.partitions(topic)
    round_no = 0
    while not stop.is_set():
        round_no += 1
        log.group_offsets.commit(group, {tp: round_no for tp in partitions})
        report(step="acked", round=round_no)
    log.close()


def produce_loop(log_dir: str, topic: str) -> None:
    stop = stdin_closed()
    log = Log.open(log_dir)
    producer = log.producer()
    partitions = log.partitions(topic)
    round_no = 0
    while not stop.is_set():
        round_no += 1
        for tp in partitions:
            producer.send(topic, b"round-%d" % round_no, partition=tp.partition)
        producer.flush()
        report(step="acked", round=round_no)
    producer.close()
    log.close()


if __name__ == "__main__":
    role, *arguments = sys.argv[1:]
    {"commit-loop": commit_loop, "produce-loop": produce_loop}[role](*arguments)
