"""ListOffsets' lookup against a log that grows while it answers (R-03, KIP-734; issue 27's
CI failure of ``test_get_offsets_by_time_while_a_peer_appends_and_a_transaction_is_open``)."""

from __future__ import annotations

from pathlib import Path

from txn_log.consumer.consumer import Consumer
from txn_log.consumer.offset_lookup import MAX_TIMESTAMP, list_offset
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("orders", 0)


class AppendsAfterItsEnd:
    """A consumer whose every ``end_offset`` is followed at once by a peer's append of a
    newer record: the window between the lookup's two looks at the log, made certain."""

    def __init__(self, consumer: Consumer, log: Log, stamp: int) -> None:
        self._consumer = consumer
        self._log = log
        self._stamp = stamp

    def end_offset(self, tp: TopicPartition) -> int:
        end = self._consumer.end_offset(tp)
        self._stamp += 1000
        producer = self._log.producer()
        producer.send(tp.topic, b"newer", partition=tp.partition, timestamp_ms=self._stamp)
        producer.flush()
        producer.close()
        return end


def test_max_timestamp_is_the_newest_record_below_the_end_it_answers_with(
    tmp_path: Path,
) -> None:
    """MAX_TIMESTAMP answers the first record holding the largest timestamp among the records
    a consumer can read; a record appended meanwhile neither hides the answer (it did: the
    newest record was looked for after the end, found past it, and answered as none) nor is
    answered past the end."""
    with Log.open(tmp_path / "log") as log:
        log.create_topic("orders", 1)
        producer = log.producer()
        for i in range(5):  # offsets 0..4 stamped 1..5 s after the epoch
            producer.send("orders", b"old", partition=0, timestamp_ms=(i + 1) * 1000)
        producer.flush()
        producer.close()
        consumer = AppendsAfterItsEnd(log.consumer("read_uncommitted"), log, 5000)
        for round_ in range(3):
            answered = list_offset(consumer, log.partition_reader(TP), TP, MAX_TIMESTAMP)  # type: ignore[arg-type]
            assert answered == (4 + round_, 5000 + 1000 * round_)
