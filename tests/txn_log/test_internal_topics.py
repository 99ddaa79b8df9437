"""Internal topics are written by the coordinators only (C-03, issue 12 item 5).

``__transaction_state`` and ``__consumer_offsets`` hold records that every process decodes
(init_transactions, read_committed reads, committed()); one foreign record in them would break
all of those. A client append to either is refused with InvalidTopicError (Kafka's
INVALID_TOPIC_EXCEPTION, code 17: "Cannot append to internal topic") before anything is
written, while the coordinators' own writes (origin COORDINATOR) still go through.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import directory_bytes
from txn_log.errors import InvalidTopicError
from txn_log.log import Log
from txn_log.record.codec import encode_records
from txn_log.topic_config import INTERNAL_TOPICS
from txn_log.topic_partition import TopicPartition


@pytest.mark.parametrize("topic", sorted(INTERNAL_TOPICS))
def test_a_client_append_to_an_internal_topic_is_refused_and_writes_nothing(
    tmp_path: Path, topic: str
) -> None:
    log = Log.open(tmp_path / "log")
    plog = log.partition_log(TopicPartition(topic, 0))
    before = directory_bytes(tmp_path / "log")
    junk = encode_records([(None, b"oops", None, ())], now_ms=1_700_000_000_000)
    with pytest.raises(
        InvalidTopicError, match=f"Cannot append to internal topic '{topic}'"
    ) as info:
        plog.append(junk, sync=True)
    assert info.value.code == 17
    assert plog.log_end_offset == 0
    assert directory_bytes(tmp_path / "log") == before
    log.close()


def test_the_coordinators_still_write_internal_topics(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "log")
    log.create_topic("orders")
    log.group_offsets.commit("plain", {TopicPartition("orders", 0): 7})  # a plain commit
    producer = log.producer("txn")
    producer.init_transactions()  # a state-log write
    producer.begin_transaction()
    producer.send("orders", b"v", partition=0)
    producer.send_offsets_to_transaction({TopicPartition("orders", 0): 1}, "txn-group")
    producer.commit_transaction()
    committed = log.committed("plain", [TopicPartition("orders", 0)])
    assert committed[TopicPartition("orders", 0)] is not None
    assert committed[TopicPartition("orders", 0)].offset == 7  # type: ignore[union-attr]
    txn_group = log.committed("txn-group", [TopicPartition("orders", 0)])
    assert txn_group[TopicPartition("orders", 0)].offset == 1  # type: ignore[union-attr]
    log.close()
