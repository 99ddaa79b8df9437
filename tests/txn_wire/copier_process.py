"""A consume-transform-produce copier, as a confluent-kafka user writes one: a read_committed
consumer using ``subscribe()`` in a group, copying each batch of input records to the output
topic inside a transaction that also carries the consumed positions
(``send_offsets_to_transaction(consumer.position(...), consumer.consumer_group_metadata())``,
KIP-98/KIP-447, R-06..R-10). Every third transaction is aborted on purpose and its input
re-read from where the batch began (the consumer seeks back), as after an abortable error.

Run as ``python -m tests.txn_wire.copier_process BOOTSTRAP NAME STOP_FILE [CRASH_FILE]``: one
OS process per group member. It prints ``assigned <partitions>`` on each assignment and ``done
committed=N aborted=M`` when ``STOP_FILE`` appears, then closes (the consumer leaves the
group). With CRASH_FILE, once that file exists the copier SIGKILLs itself inside its next
transaction, after its records are acked and its offsets sent, before the commit."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Message, Producer
from confluent_kafka import TopicPartition as KafkaPartition

INPUT, OUTPUT, GROUP = "input", "output", "copiers"
OUTPUT_PARTITIONS = 2
BATCH = 10
TIMEOUT_S = 30


def main(bootstrap: str, name: str, stop_file: Path, crash_file: Path | None) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "partition.assignment.strategy": "range",
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"copier-{name}", "linger.ms": 5}
    )
    producer.init_transactions(TIMEOUT_S)

    def on_assign(_consumer: Consumer, partitions: list[KafkaPartition]) -> None:
        print("assigned", ",".join(str(p.partition) for p in partitions), flush=True)

    consumer.subscribe([INPUT], on_assign=on_assign)
    committed = aborted = 0
    while not stop_file.exists():
        messages = consumer.consume(num_messages=BATCH, timeout=0.2)
        if not messages:
            continue
        abort = (committed + aborted) % 3 == 2
        if copy_in_transaction(consumer, producer, messages, abort=abort, crash_file=crash_file):
            committed += 1
        else:
            aborted += 1
        time.sleep(0.02)  # leaves the other members room to take part
    consumer.close()
    producer.flush(TIMEOUT_S)
    print(f"done committed={committed} aborted={aborted}", flush=True)


def copy_in_transaction(
    consumer: Consumer,
    producer: Producer,
    messages: list[Message],
    *,
    abort: bool,
    crash_file: Path | None = None,
) -> bool:
    """Copy ``messages`` and send the consumer's positions in one transaction; commit it, or
    abort it (when asked, or when the client says the transaction must abort) and seek the
    consumer back to each partition's first record of the batch. True when committed."""
    first: dict[int, int] = {}
    producer.begin_transaction()
    try:
        for message in messages:
            if message.error():
                raise KafkaException(message.error())
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None  # a record, not an event
            first.setdefault(partition, offset)
            producer.produce(
                OUTPUT,
                key=message.key(),
                value=message.value(),
                partition=partition % OUTPUT_PARTITIONS,
            )
        positions = consumer.position([KafkaPartition(INPUT, p) for p in sorted(first)])
        producer.send_offsets_to_transaction(
            positions, consumer.consumer_group_metadata(), TIMEOUT_S
        )
        if crash_file is not None and crash_file.exists():
            producer.flush(TIMEOUT_S)
            print("crashing inside a transaction", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if not abort:
            producer.commit_transaction(TIMEOUT_S)
            return True
    except KafkaException as raised:
        if not raised.args[0].txn_requires_abort():
            raise
    producer.abort_transaction(TIMEOUT_S)
    for partition, offset in first.items():
        consumer.seek(KafkaPartition(INPUT, partition, offset))
    return False


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]) if sys.argv[4:] else None)
