"""Processes racing on one group's offsets through a served log, for
``test_offset_delete_wire``.

``python -m tests.txn_wire.offset_delete_workers commit BOOTSTRAP GROUP ROUNDS``: a confluent
consumer (standalone: it commits without joining) commits ``orders-0`` at 1, 2, ... ROUNDS,
and after each commit reads the group's offset of ``orders-0`` back; prints
``{"role": "commit", "rounds": n, "mismatches": [[committed, read back], ...]}``.

``python -m tests.txn_wire.offset_delete_workers delete BOOTSTRAP GROUP ROUNDS``: kafka-python's
admin client commits ``orders-1`` and deletes its offset again (OffsetDelete), ROUNDS times;
prints ``{"role": "delete", "rounds": n, "errors": [every answer that was no success]}``.
"""

from __future__ import annotations

import json
import sys

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import TopicPartition as KafkaPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError
from kafka.structs import OffsetAndMetadata

WAIT_S = 60


def commit(bootstrap: str, group: str, rounds: int) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    mismatches = []
    for offset in range(1, rounds + 1):
        consumer.commit(offsets=[ConfluentPartition("orders", 0, offset)], asynchronous=False)
        [back] = consumer.committed([ConfluentPartition("orders", 0)], timeout=WAIT_S)
        if back.offset != offset:
            mismatches.append([offset, back.offset])
    consumer.close()
    print(json.dumps({"role": "commit", "rounds": rounds, "mismatches": mismatches}), flush=True)


def delete(bootstrap: str, group: str, rounds: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=WAIT_S * 1000)
    partition = KafkaPartition("orders", 1)
    errors = []
    for offset in range(1, rounds + 1):
        admin.alter_group_offsets(group, {partition: OffsetAndMetadata(offset, "", -1)})
        answer = admin.delete_group_offsets(group, [partition])
        if answer != {partition: NoError}:
            errors.append(repr(answer))
    admin.close()
    print(json.dumps({"role": "delete", "rounds": rounds, "errors": errors}), flush=True)


if __name__ == "__main__":
    role, bootstrap, group, rounds = sys.argv[1:5]
    {"commit": commit, "delete": delete}[role](bootstrap, group, int(rounds))
