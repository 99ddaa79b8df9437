"""One Spark-like write task of the Kafka backend as a real OS process, for the SIGKILL tests:

    python -m tests.commit_protocol.kafka_task_process [--sink=NAME] BOOTSTRAP LEDGER TOPIC \
        BATCH TASK V...

writes the values to partition 0 of TOPIC as task TASK of batch BATCH of the contract's sink
(or of sink ``spark-query-NAME`` with prefix ``NAME``) and prints ``committed`` or
``skipped``. Armed with ``TXNLOG_CRASH_POINT`` it SIGKILLs itself
at that step (``kafka_task.before_commit``, ``kafka_task.after_commit``)."""

from __future__ import annotations

import sys

import pyarrow as pa

from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity
from commit_protocol.kafka_backend import KafkaBackend
from datasource_options.location import KafkaCluster
from txn_log.topic_partition import TopicPartition

SINK = SinkIdentity("spark-query-killed", "killed", "group-killed")


def sink_named(name: str) -> SinkIdentity:
    """Another sink of the same cluster: its own sink id, prefix and group."""
    return SinkIdentity(f"spark-query-{name}", name, f"group-{name}")


def main(argv: list[str]) -> None:
    sink = SINK
    if argv and argv[0].startswith("--sink="):
        sink = sink_named(argv.pop(0).removeprefix("--sink="))
    bootstrap, ledger, topic, batch, task, *values = argv
    cluster = KafkaCluster.at(bootstrap)
    backend = KafkaBackend(cluster, ledger_topic=ledger, timeout_s=30)
    protocol = SinkCommitProtocol(backend, sink)
    transaction = protocol.begin_task(int(batch), int(task))
    if transaction is None:
        print("skipped", flush=True)
        return
    rows = pa.record_batch([pa.array([v.encode() for v in values], pa.binary())], ["value"])
    transaction.write(TopicPartition(topic, 0), rows)
    protocol.prepare_task(transaction, int(batch), int(task), 0)
    print("committed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
