"""ListOffsets (R-03, B-07): earliest (-2), latest (-1), the newest timestamp (-3, KIP-734,
v7+) and by timestamp (KIP-32, T-17).

The lookup is the engine's (``txn_log.consumer.offset_lookup``, shared with ``txnlog
get-offsets``): latest is the end the engine's read plan gives, the LSO under read_committed
(B-07); by timestamp the first offset whose record timestamp is at least the one asked, none
(-1, -1) at or past that end, as Kafka answers.
"""

from __future__ import annotations

from txn_log.consumer.offset_lookup import list_offset
from txn_log.errors import TxnLogError
from txn_wire.broker import Broker, error_code, topic_partition
from txn_wire.codec import Plain, Request

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
                consumer = broker.consumer(committed)
                reader = broker.partition_reader(tp)
                offset, timestamp = list_offset(consumer, reader, tp, asked["timestamp"])
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
