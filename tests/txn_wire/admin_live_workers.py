"""Engine peers of a served log for ``test_admin_live_log``: real processes that write or read
a topic while ``txnlog serve`` deletes or grows it for an AdminClient.

``python -m tests.txn_wire.admin_live_workers write LOG TOPIC``: a transactional engine
producer commits rounds of one record per partition (``{"step": "acked", "round": n}``)
until its stdin closes; a round that fails prints ``{"step": "error", "error": "Type:
message"}`` and is aborted (``{"step": "abort-error", ...}`` if the abort fails too).

``python -m tests.txn_wire.admin_live_workers read LOG TOPIC``: a read_committed engine
consumer tails every partition of the topic, looking the partitions up again on each pass,
until its stdin closes; prints ``{"step": "partitions", "count": n}`` when it first sees n
partitions, then after one last pass ``{"step": "read", "records": [[partition, offset,
value], ...]}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from txn_log.errors import TxnLogError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

PASS_PAUSE_S = 0.005


def report(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def stdin_closed() -> threading.Event:
    """Set once the parent closes our stdin (how it stops us)."""
    closed = threading.Event()

    def wait() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=wait, daemon=True).start()
    return closed


def write(log_dir: str, topic: str) -> None:
    stop = stdin_closed()
    log = Log.open(log_dir)
    producer = log.producer("live-writer")
    producer.init_transactions()
    partitions = len(log.partitions(topic))
    round_no = 0
    while not stop.is_set():
        round_no += 1
        try:
            producer.begin_transaction()
            for partition in range(partitions):
                producer.send(topic, b"round-%d" % round_no, partition=partition)
            producer.commit_transaction()
        except TxnLogError as error:
            report(step="error", round=round_no, error=f"{type(error).__name__}: {error}")
            try:
                producer.abort_transaction()
            except TxnLogError as abort_error:
                report(step="abort-error", error=f"{type(abort_error).__name__}: {abort_error}")
            time.sleep(PASS_PAUSE_S)
            continue
        report(step="acked", round=round_no)
    producer.close()
    log.close()


def read(log_dir: str, topic: str) -> None:
    stop = stdin_closed()
    log = Log.open(log_dir)
    consumer = log.consumer("read_committed")
    positions: dict[int, int] = {}
    records: list[tuple[int, int, str]] = []
    while True:
        last_pass = stop.is_set()  # one more whole pass after the parent said stop
        count = len(log.partitions(topic))
        if count > len(positions):
            report(step="partitions", count=count)
        for partition in range(count):
            position = positions.setdefault(partition, 0)
            for record in consumer.read(TopicPartition(topic, partition), position):
                records.append((partition, record.offset, (record.value or b"").decode()))
                positions[partition] = record.offset + 1
        if last_pass:
            break
        time.sleep(PASS_PAUSE_S)
    report(step="read", records=records)
    log.close()


if __name__ == "__main__":
    role, log_dir, topic = sys.argv[1:4]
    {"write": write, "read": read}[role](log_dir, topic)
