"""ListOffsets' lookup (R-03, B-07, KIP-32, KIP-734): the offset for a timestamp or one of
Kafka's sentinels, for ``txnlog serve``'s ListOffsets and ``txnlog get-offsets`` alike.

- EARLIEST (-2): the log start offset;
- LATEST (-1): the end a read at the consumer's isolation level can reach (``end_offset``):
  the high watermark under read_uncommitted, the LSO under read_committed (B-07);
- MAX_TIMESTAMP (-3, KIP-734): the first record holding the partition's largest timestamp,
  with it, if it lies below that end (looked up before the end, which only grows: a record
  appended meanwhile is not the answer, nor does it hide it);
- a timestamp ≥ 0: the first offset whose record timestamp is at least it, through the time
  index (control records never count, F-30), with that record's timestamp; none (-1, -1) at
  or past that end, as Kafka answers (``fetchOffsetForTimestamp`` keeps only offsets below the
  last fetchable one).

Reads only; thread-safe as the consumer and the reader are.
"""

from __future__ import annotations

from txn_log.consumer.consumer import Consumer
from txn_log.storage import replay
from txn_log.storage.partition_reader import PartitionReader
from txn_log.topic_partition import TopicPartition

MAX_TIMESTAMP = -3
EARLIEST = -2
LATEST = -1
NOT_FOUND = (-1, -1)


def list_offset(
    consumer: Consumer, reader: PartitionReader, tp: TopicPartition, timestamp: int
) -> tuple[int, int]:
    """(offset, record timestamp or -1) for ``timestamp`` in ``tp`` (module docstring);
    ``reader`` is ``tp``'s."""
    if timestamp == EARLIEST:
        return reader.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        # the newest record first, then the end: the end only grows (high watermark, LSO), so
        # a record appended in between is neither looked for nor hides the answer; past the
        # end stays only what the isolation level may not read (an open transaction's)
        newest = reader.max_timestamp_offset()
        end = consumer.end_offset(tp)
        return newest if newest is not None and newest[0] < end else NOT_FOUND
    end = consumer.end_offset(tp)
    if timestamp == LATEST:
        return end, -1
    found = reader.offset_for_timestamp(timestamp)
    if found is None or found >= end:
        return NOT_FOUND
    return found, record_timestamp(reader, found)


def record_timestamp(reader: PartitionReader, offset: int) -> int:
    """The timestamp of the record at ``offset``; -1 if no record is there."""
    for _header, batch in reader.read(offset, offset + 1):
        for record_offset, timestamp in replay.record_timestamps(batch):
            if record_offset == offset:
                return int(timestamp)
    return -1
