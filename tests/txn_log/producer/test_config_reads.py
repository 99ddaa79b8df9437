"""How often a producer's append reads its topic's config (DESIGN §3: topic configs change
while the log is open): once per batch, at the start of its drain, where the batch is sized
against ``max.message.bytes``; the append takes that config instead of reading the file's
identity (and the broker config's) a second time. A batch after the first of one drain reads
it again: a config another process changes meanwhile applies from the next batch on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from txn_log.log import Log
from txn_log.storage.partition_reader import PartitionReader
from txn_log.topic_config import TopicConfig


@contextmanager
def config_reads() -> Iterator[list[str]]:
    """The topic configs read while the block runs (one entry per look at the topic file,
    ``PartitionReader.refresh_config``), by partition."""
    reads: list[str] = []
    original = PartitionReader.refresh_config

    def counted(partition: PartitionReader) -> TopicConfig:
        reads.append(str(partition.topic_partition))
        return original(partition)

    PartitionReader.refresh_config = counted  # type: ignore[method-assign]
    try:
        yield reads
    finally:
        PartitionReader.refresh_config = original  # type: ignore[method-assign]


def test_a_batch_reads_its_topics_config_once(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "log", housekeeping_interval_ms=None)
    log.create_topic("t", 1)
    producer = log.producer()
    producer.send("t", b"first")
    producer.flush()  # the partition opened, the producer id taken
    with config_reads() as reads:
        producer.send("t", b"second")
        producer.flush()
    assert reads == ["t-0"]
    producer.close()
    log.close()


def test_a_drain_of_several_batches_reads_it_once_per_batch(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "log", housekeeping_interval_ms=None)
    log.create_topic("t", 1, {"max.message.bytes": "4096"})
    producer = log.producer()
    producer.send("t", b"first")
    producer.flush()
    with config_reads() as reads:
        for index in range(12):  # about 12 KB: three batches or more
            producer.send("t", b"%04d" % index + b"v" * 1000)
        producer.flush()
    tp = log.partitions("t")[0]
    batches = [header for header, _ in log.partition_log(tp).read(1)]
    assert len(batches) >= 3 and sum(h.records_count for h in batches) == 12
    assert reads == ["t-0"] * len(batches)  # the drain's for its first, then one per append
    producer.close()
    log.close()
