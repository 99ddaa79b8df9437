"""``txnlog topics alter --partitions`` (kafka-topics --alter --partitions): the engine's
CreatePartitions from the command line, the same operation ``txnlog serve`` answers
CreatePartitions with; safe while another process writes the topic; refusals name the topic
and what would be valid, and write nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import directory_bytes
from tests.txn_log.cli.test_cli import txnlog
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

WRITER = """
import sys, time
from pathlib import Path
from txn_log.log import Log
log = Log.open(Path(sys.argv[1]))
producer = log.producer(transactional_id="writer")
producer.init_transactions()
count = int(sys.argv[2])
for i in range(count):
    producer.begin_transaction()
    producer.send("orders", f"p0-{i}".encode(), partition=0)
    producer.commit_transaction()
    if i == 5:
        print("writing", flush=True)
deadline = time.monotonic() + 60
while len(log.partitions("orders")) < 4 and time.monotonic() < deadline:
    time.sleep(0.05)
producer.begin_transaction()
producer.send("orders", b"p3-new", partition=3)
producer.commit_transaction()
producer.close()
log.close()
"""


def test_partitions_grow_while_another_process_writes_transactions(tmp_path: Path) -> None:
    path = tmp_path / "log"
    assert txnlog("topics", "create", path, "orders", "--partitions", "2").returncode == 0
    count = 60
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(count)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    grown = txnlog("topics", "alter", path, "orders", "--partitions", "4")
    assert grown.returncode == 0, grown.stderr
    assert grown.stdout == "Grew topic orders from 2 to 4 partition(s).\n"
    assert writer.wait(timeout=120) == 0
    with Log.open(path, read_only=True) as log:
        assert len(log.partitions("orders")) == 4
        consumer = log.consumer("read_committed")
        first = [r.value for r in consumer.read(TopicPartition("orders", 0), 0, 10_000)]
        assert first == [f"p0-{i}".encode() for i in range(count)]
        last = [r.value for r in consumer.read(TopicPartition("orders", 3), 0, 10)]
        assert last == [b"p3-new"]
    assert txnlog("verify", path).returncode == 0


def test_refusals_name_the_topic_and_what_is_valid_and_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "log"
    assert txnlog("topics", "create", path, "orders", "--partitions", "2").returncode == 0
    before = directory_bytes(path, content_only=True)
    for topic, partitions, says in (
        ("orders", "2", "topic 'orders' already has 2 partition(s)"),
        ("orders", "1", "1 would not be an increase"),
        ("nope", "3", "topic 'nope' does not exist"),
        ("__consumer_offsets", "60", "is internal to txnlog and cannot grow"),
    ):
        refused = txnlog("topics", "alter", path, topic, "--partitions", partitions)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    dry = txnlog("topics", "alter", path, "orders", "--partitions", "8", "--dry-run")
    assert dry.stdout == "Would grow topic orders from 2 to 8 partition(s).\n"
    assert directory_bytes(path, content_only=True) == before
