"""A partition this process still holds after another process deleted its topic answers from
what it had read or with a typed error, never a raw OSError (issue 12 item 2's read side;
found by the adversarial suite, seed 31: ``FileNotFoundError`` naming ``scratch-0``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txn_log.errors import UnknownTopicIdError, UnknownTopicOrPartitionError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def test_a_partition_held_across_its_topics_deletion_reads_what_it_had(tmp_path: Path) -> None:
    holder = Log.open(tmp_path / "log")
    holder.create_topic("t", 1)
    producer = holder.producer()
    producer.send("t", b"kept", partition=0)
    producer.flush()
    plog = holder.partition_log(TP)
    with Log.open(tmp_path / "log") as other:
        other.delete_topic("t")
    assert plog.log_end_offset == 1  # its own view of the deleted files
    assert [h.base_offset for h, _ in plog.read(0)] == [0]
    with pytest.raises(UnknownTopicOrPartitionError):
        holder.consumer().read(TP, 0)  # a new read finds the topic gone
    holder.close()


def test_a_partition_held_across_its_topics_deletion_keeps_its_aborted_index(
    tmp_path: Path,
) -> None:
    """The aborted-transaction index is read through the same open files as the data: a view
    of a deleted partition never pairs the aborted data with an empty index (found by the
    adversarial suite, seed 61: aborted records of a just-deleted topic were delivered)."""
    holder = Log.open(tmp_path / "log")
    holder.create_topic("t", 1)
    producer = holder.producer("aborter")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"aborted", partition=0)
    producer.flush()
    producer.abort_transaction()
    plog = holder.partition_log(TP)
    assert [txn.first_offset for txn in plog.collect_aborted_txns(0, 2)] == [0]
    with Log.open(tmp_path / "log") as other:
        other.delete_topic("t")
    assert [txn.first_offset for txn in plog.collect_aborted_txns(0, 2)] == [0]
    holder.close()


def test_deleting_by_topic_id_deletes_only_the_topic_of_that_id(tmp_path: Path) -> None:
    """Kafka's DeleteTopics by topic id: a name deleted and re-created since its id was read
    belongs to another topic, which stays (UnknownTopicIdError); the id's own topic goes."""
    log = Log.open(tmp_path / "log")
    log.create_topic("t", 2)
    old_id = log.topic_id("t")
    assert old_id is not None
    with Log.open(tmp_path / "log") as other:
        other.delete_topic("t")
        other.create_topic("t", 1)
    new_id = log.topic_id("t")
    assert new_id not in (None, old_id)
    with pytest.raises(UnknownTopicIdError, match=f"no topic has id {old_id}"):
        log.delete_topic("t", topic_id=old_id)
    assert log.topics() == ["t"]
    assert log.topic_id("t") == new_id
    assert log.delete_topic("t", topic_id=new_id) == 1
    with pytest.raises(UnknownTopicIdError, match=f"no topic has id {new_id}"):
        log.delete_topic("t", topic_id=new_id)
    with pytest.raises(UnknownTopicOrPartitionError) as unknown:
        log.delete_topic("t")
    assert not isinstance(unknown.value, UnknownTopicIdError)
    log.close()
