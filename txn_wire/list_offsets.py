"""ListOffsets (R-03, B-07): earliest (-2), latest (-1), the newest timestamp (-3, KIP-734,
v7+) and by timestamp (KIP-32, T-17).

The lookup is the engine's (``txn_log.consumer.offset_lookup``, shared with ``txnlog
get-offsets``): latest is the end the engine's read plan gives, the LSO under read_committed
(B-07); by timestamp the first offset whose record timestamp is at least the one asked, none
(-1, -1) at or past that end, as Kafka answers.

Asked what this version cannot say, it says so rather than answering something else: an
``isolation_level`` other than 0 or 1 is INVALID_REQUEST (42) for every partition (never
read_uncommitted's high watermark), -3 below v7 and -4 / -5 (KIP-405's, v8 and v9, not
served) UNSUPPORTED_VERSION (35), and any other negative timestamp INVALID_REQUEST, as
Kafka's ``ReplicaManager.fetchOffset`` (they were searched as timestamps: the first record).
"""

from __future__ import annotations

from txn_log.consumer.offset_lookup import list_offset
from txn_log.errors import TxnLogError
from txn_wire.broker import Broker, error_code, topic_partition
from txn_wire.codec import Plain, Request

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
UNSUPPORTED_VERSION, INVALID_REQUEST = 35, 42
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def handle_list_offsets(broker: Broker, request: Request) -> Plain:
    body = request.body
    isolation = body.get("isolation_level", READ_UNCOMMITTED)
    committed = isolation == READ_COMMITTED
    topics = []
    for topic in body["topics"]:
        partitions = []
        for asked in topic["partitions"]:
            refused = _refusal(request, isolation, asked["timestamp"])
            if refused:
                partitions.append(
                    {"partition_index": asked["partition_index"], "error_code": refused}
                )
                continue
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


def _refusal(request: Request, isolation: int, timestamp: int) -> int:
    """Why this request version cannot answer ``timestamp`` (module docstring), or 0."""
    if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
        return INVALID_REQUEST
    if timestamp >= 0 or timestamp in (LATEST, EARLIEST):
        return 0
    if timestamp == MAX_TIMESTAMP and request.api_version >= 7:
        return 0
    if timestamp in (MAX_TIMESTAMP, -4, -5):
        return UNSUPPORTED_VERSION
    return INVALID_REQUEST
