"""A producer process that keeps a topic's partition open while another process deletes and
re-creates the topic (``test_topic_identity.py``).

``python -m tests.txn_log.processes.topic_workers LOG TOPIC MODE`` with MODE ``idempotent`` or
``transactional``: sends and flushes (or commits) one record, prints ``{"step": "ready"}``,
then for each line ``go N`` on stdin sends N records and flushes (or commits), printing either
``{"step": "acked", "values": [...], "offsets": [...]}`` or ``{"step": "error", "error": ...}``.
In a transaction an error is followed by ``abort_transaction()``.
"""

from __future__ import annotations

import json
import sys

from txn_log.errors import TxnLogError
from txn_log.log import Log


def report(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def main(log_dir: str, topic: str, mode: str) -> None:
    log = Log.open(log_dir)
    transactional = mode == "transactional"
    producer = log.producer("holder" if transactional else None)
    if transactional:
        producer.init_transactions()
    round_no = 0

    def send_round(count: int) -> None:
        nonlocal round_no
        round_no += 1
        values = [b"r%d-%d" % (round_no, i) for i in range(count)]
        try:
            if transactional:
                producer.begin_transaction()
            for value in values:
                producer.send(topic, value, partition=0)
            results = producer.flush()
            if transactional:
                producer.commit_transaction()
        except TxnLogError as error:
            report(step="error", error=f"{type(error).__name__}: {error}")
            if transactional:
                try:
                    producer.abort_transaction()
                except TxnLogError as abort_error:
                    report(step="abort-error", error=f"{type(abort_error).__name__}: {abort_error}")
            return
        offsets = [o for r in results for o in range(r.base_offset, r.last_offset + 1)]
        report(step="acked", values=[v.decode() for v in values], offsets=offsets)

    send_round(1)
    report(step="ready")
    for line in sys.stdin:
        command, _, count = line.partition(" ")
        if command == "go":
            send_round(int(count))
    log.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
