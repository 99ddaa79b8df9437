"""``Consumer.read``'s ``max_records`` (issue 12, item 12): a limit of 0 reads nothing, a
negative or non-integer limit is refused; ``txnlog consume --max-messages`` relies on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.txn_log.cli.test_cli import txnlog
from txn_log.errors import ConfigError, OffsetOutOfRangeError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

TP0 = TopicPartition("t", 0)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log")
    log.create_topic("t", partitions=2)
    producer = log.producer()
    for i in range(6):
        producer.send("t", b"v%d" % i, partition=i % 2)
    producer.flush()
    return log


def test_max_records_limits_the_records_returned(log: Log) -> None:
    """``max_records=n`` returns the first n records in offset order; 0 returns none (it
    returned one record)."""
    consumer = log.consumer()
    assert consumer.read(TP0, 0, max_records=0) == []
    assert [r.value for r in consumer.read(TP0, 0, max_records=1)] == [b"v0"]
    assert [r.value for r in consumer.read(TP0, 1, max_records=5)] == [b"v2", b"v4"]
    assert [r.value for r in consumer.read(TP0, 0, max_records=None)] == [b"v0", b"v2", b"v4"]


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_a_bad_max_records_is_refused_naming_it(log: Log, bad: object) -> None:
    with pytest.raises(ConfigError, match=r"max_records must be None or an int >= 0 .*, got"):
        log.consumer().read(TP0, 0, max_records=bad)  # type: ignore[arg-type]


def test_a_zero_limit_still_checks_the_start_offset(log: Log) -> None:
    """Reading nothing is not a way around the range check: a start past the log end is
    refused whatever the limit."""
    with pytest.raises(OffsetOutOfRangeError, match="outside the log"):
        log.consumer().read(TP0, 99, max_records=0)


def test_consume_prints_at_most_max_messages_across_partitions(log: Log) -> None:
    """The CLI asks each partition for the messages still wanted; once none are, reading the
    next partition must print nothing (it printed one more per partition)."""
    log.close()
    consumed = txnlog("consume", log.path, "t", "--from-beginning", "--max-messages", "1")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["v0"]


@pytest.mark.parametrize("offset", [-1, 4, 99])
def test_every_read_refuses_an_offset_outside_the_log_with_one_message(
    log: Log, offset: int
) -> None:
    """One "offset outside the log" rule (issue 13 item 5): the partition log's read, its
    ``check_offset`` (``txnlog dump --from``) and the consumer's read refuse the same offsets
    with the same message, naming the partition and the valid range [log start, log end]."""
    expected = rf"^t-0: offset {offset} is outside the log \[0, 3\]$"
    plog = log.partition_log(TP0)
    with pytest.raises(OffsetOutOfRangeError, match=expected):
        plog.check_offset(offset)
    with pytest.raises(OffsetOutOfRangeError, match=expected):
        plog.read(offset)
    with pytest.raises(OffsetOutOfRangeError, match=expected):
        log.consumer().read(TP0, offset)
    with pytest.raises(OffsetOutOfRangeError, match=expected):
        log.consumer("read_uncommitted").read(TP0, offset, max_records=0)
    assert [r.offset for r in log.consumer().read(TP0, 3)] == []  # the log end is a valid start
