"""A ``create_topic`` SIGKILLed after it made the partition directories but before the topic
file named them leaves directories no topic owns. Nothing may be written to them, read from
them, or acknowledged in them (found by the adversarial suite, seed 1059203999: a deleter
killed while re-creating ``scratch``; a transactional producer whose process still had the
old topic's file cached wrote three records into the orphan ``scratch-0`` and committed them,
and the next ``create_topic("scratch")`` removed them: acknowledged records lost).

The same for a ``delete_topic`` killed after it removed the topic file but before the
partitions (crash point ``topic.after_meta_unlink``): a process that has a partition open must
stop acknowledging writes there.

Real processes: the creation is killed at its crash point ``topic.after_partition_dirs``
(``txn_log/fault_points.py``); the holder is this process, whose producers wrote partition 1
of the old topic (their metadata and the ``Log``'s topic file cached) and never partition 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from txn_log.errors import UnknownTopicOrPartitionError
from txn_log.log import Log
from txn_log.producer.producer import Producer
from txn_log.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parents[3]
TOPIC = "scratch"
TP = TopicPartition(TOPIC, 0)


def run(code: str, log_dir: Path, crash_point: str | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNLOG_CRASH")}
    if crash_point is not None:
        env["TXNLOG_CRASH_POINT"] = crash_point
    script = f"from txn_log.log import Log\nwith Log.open({str(log_dir)!r}) as log:\n    {code}\n"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, timeout=60, capture_output=True
    )
    return done.returncode


@dataclass
class Orphaned:
    holder: Log
    log_dir: Path
    idempotent: Producer
    transactional: Producer


@pytest.fixture
def orphaned(tmp_path: Path) -> Iterator[Orphaned]:
    """A holder whose producers know the old topic; the topic deleted and its re-creation
    killed."""
    log_dir = tmp_path / "log"
    assert run(f"log.create_topic({TOPIC!r}, 2)", log_dir) == 0
    holder = Log.open(log_dir)
    idempotent = holder.producer()
    idempotent.send(TOPIC, b"old", partition=1)
    idempotent.flush()
    transactional = holder.producer("t2")
    transactional.init_transactions()
    transactional.begin_transaction()
    transactional.send(TOPIC, b"old", partition=1)
    transactional.commit_transaction()
    assert run(f"log.delete_topic({TOPIC!r})", log_dir) == 0
    killed = run(f"log.create_topic({TOPIC!r}, 2)", log_dir, "topic.after_partition_dirs")
    assert killed == -signal.SIGKILL
    assert (log_dir / TP.directory_name).is_dir()  # the orphan the killed creation left
    assert TOPIC not in holder.topics()
    yield Orphaned(holder, log_dir, idempotent, transactional)
    holder.close()


def test_no_idempotent_write_into_the_orphan_of_a_killed_creation(orphaned: Orphaned) -> None:
    orphaned.idempotent.send(TOPIC, b"lost?", partition=0)
    with pytest.raises(UnknownTopicOrPartitionError, match="scratch"):
        orphaned.idempotent.flush()


def test_no_transaction_commits_into_the_orphan_of_a_killed_creation(orphaned: Orphaned) -> None:
    producer = orphaned.transactional
    producer.begin_transaction()
    with pytest.raises(UnknownTopicOrPartitionError, match="scratch"):
        producer.send(TOPIC, b"lost?", partition=0)
        producer.commit_transaction()
    producer.abort_transaction()


def test_no_read_from_the_orphan_of_a_killed_creation(orphaned: Orphaned) -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match="scratch"):
        orphaned.holder.consumer("read_committed").read(TP, 0)


def test_the_next_creation_gives_an_empty_usable_topic_that_every_process_sees(
    orphaned: Orphaned,
) -> None:
    assert run(f"log.create_topic({TOPIC!r}, 2)", orphaned.log_dir) == 0
    producer = orphaned.transactional
    producer.begin_transaction()
    producer.send(TOPIC, b"kept", partition=0)
    producer.commit_transaction()
    consumer = orphaned.holder.consumer("read_committed")
    assert [r.value for r in consumer.read(TP, 0)] == [b"kept"]
    with Log.open(orphaned.log_dir) as other:
        assert [r.value for r in other.consumer("read_committed").read(TP, 0)] == [b"kept"]
        assert list(other.consumer("read_committed").read(TopicPartition(TOPIC, 1), 0)) == []


def test_nothing_is_acknowledged_in_a_topic_whose_deletion_was_interrupted(tmp_path: Path) -> None:
    """``delete_topic`` SIGKILLed after it removed the topic file, before the partitions: a
    process that has the partition open (cached, its identity unchanged) must not go on
    appending and acknowledging there, for the next creation of the name removes it all."""
    log_dir = tmp_path / "log"
    assert run(f"log.create_topic({TOPIC!r}, 2)", log_dir) == 0
    with Log.open(log_dir) as holder:
        idempotent, transactional = holder.producer(), holder.producer("t2")
        transactional.init_transactions()
        idempotent.send(TOPIC, b"before", partition=0)
        idempotent.flush()
        killed = run(f"log.delete_topic({TOPIC!r})", log_dir, "topic.after_meta_unlink")
        assert killed == -signal.SIGKILL
        assert (log_dir / TP.directory_name).is_dir() and TOPIC not in holder.topics()
        idempotent.send(TOPIC, b"lost?", partition=0)
        with pytest.raises(UnknownTopicOrPartitionError, match="scratch"):
            idempotent.flush()
        transactional.begin_transaction()
        with pytest.raises(UnknownTopicOrPartitionError, match="scratch"):
            transactional.send(TOPIC, b"lost?", partition=0)
            transactional.commit_transaction()
        transactional.abort_transaction()
        with pytest.raises(UnknownTopicOrPartitionError, match="scratch"):
            holder.consumer("read_committed").read(TP, 0)
