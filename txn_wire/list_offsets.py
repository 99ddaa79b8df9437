"""ListOffsets (R-03, B-07): earliest (-2), latest (-1), the newest timestamp (-3, KIP-734,
v7+) and by timestamp (KIP-32, T-17).

Latest is the end the engine's read plan gives (``Consumer.end_offset``): the high watermark
under read_uncommitted, the last stable offset under read_committed (B-07: a read_committed
consumer's end is the LSO, after the coordinator aborted timed-out transactions). By
timestamp: the first offset whose record timestamp is at least the one asked, through the
time index, with that record's timestamp; none (-1, -1) at or past that end, as Kafka answers
(``fetchOffsetForTimestamp`` keeps only offsets below the last fetchable one). The newest
timestamp: the first record holding the log's largest timestamp, with it, under the same end.
"""

from __future__ import annotations

from txn_log import TopicPartition
from txn_log.errors import TxnLogError
from txn_log.storage import replay
from txn_log.storage.partition_reader import PartitionReader
from txn_wire.broker import Broker, error_code, topic_partition
from txn_wire.codec import Plain, Request

MAX_TIMESTAMP = -3
EARLIEST = -2
LATEST = -1
READ_COMMITTED = 1


def handle_list_offsets(broker: Broker, request: Request) -> Plain:
    body = request.body
    committed = body.get("isolation_level", 0) == READ_COMMITTED
    topics = []
    for topic in body["topics"]:
        partitions = []
        for asked in topic["partitions"]:
            try:
                tp = topic_partition(topic["name"], asked["partition_index"])
                offset, timestamp = _lookup(broker, tp, asked["timestamp"], committed)
                partitions.append(
                    {
                        "partition_index": tp.partition,
                        "error_code": 0,
                        "offset": offset,
                        "timestamp": timestamp,
                    }
                )
            except TxnLogError as error:
                partitions.append(
                    {"partition_index": asked["partition_index"], "error_code": error_code(error)}
                )
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"topics": topics}


def _lookup(broker: Broker, tp: TopicPartition, timestamp: int, committed: bool) -> tuple[int, int]:
    reader = broker.partition_reader(tp)
    if timestamp == EARLIEST:
        return reader.log_start_offset, -1
    end = broker.consumer(committed).end_offset(tp)
    if timestamp == LATEST:
        return end, -1
    if timestamp == MAX_TIMESTAMP:
        newest = reader.max_timestamp_offset()
        return newest if newest is not None and newest[0] < end else (-1, -1)
    found = reader.offset_for_timestamp(timestamp)
    if found is None or found >= end:
        return -1, -1
    return found, _record_timestamp(reader, found)


def _record_timestamp(reader: PartitionReader, offset: int) -> int:
    for _header, batch in reader.read(offset, offset + 1):
        for record_offset, timestamp in replay.record_timestamps(batch):
            if record_offset == offset:
                return int(timestamp)
    return -1
