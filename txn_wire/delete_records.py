"""DeleteRecords (21): an AdminClient deletes the records of partitions below an offset
(``Log.delete_records``; ``kafka-delete-records``).

Per partition, as Kafka's ``KafkaApis.handleDeleteRecordsRequest`` and
``ReplicaManager.deleteRecordsOnLocalLog`` answer it (the engine decides everything past the
partition's existence: ``txn_log.storage.delete_records``), with the low watermark -1 on every
error:

    no Delete on the topic (``authorize``)          TOPIC_AUTHORIZATION_FAILED (29)
    topic or partition unknown, a negative index    UNKNOWN_TOPIC_OR_PARTITION (3)
      or a name no topic can have
    an internal topic                               INVALID_TOPIC_EXCEPTION (17)
    cleanup.policy without delete                   POLICY_VIOLATION (44)
    an offset above the high watermark, or below    OFFSET_OUT_OF_RANGE (1)
      0 other than -1 (the high watermark)
    done                                            NONE, the new log start as low watermark

A partition named twice is answered once, for the last offset given (Kafka builds a map from
the request). Each topic's partitions are looked up once, whatever the number of partitions a
request names, so a huge array costs one dictionary step per element. The start is moved and
synced when the answer goes out, so ``timeout_ms`` is met and nothing is waited for; throttle
0. Thread-safe: runs on worker threads.
"""

from __future__ import annotations

from txn_log import TopicPartition
from txn_log.errors import ConfigError
from txn_log.storage.delete_records import INVALID_LOW_WATERMARK
from txn_wire.broker import UNKNOWN_TOPIC_OR_PARTITION, Broker, error_code
from txn_wire.codec import Plain, Request

DELETE_RECORDS = 21


def handle_delete_records(broker: Broker, request: Request) -> Plain:
    requested: dict[TopicPartition, int] = {}
    answers: dict[str, dict[int, Plain]] = {}  # topic -> partition index -> its answer
    counts: dict[str, int | None] = {}
    for topic in request.body.get("topics") or []:
        name = topic["name"]
        if name not in counts:
            counts[name] = _partition_count(broker, name)
        for partition in topic.get("partitions") or []:
            index = partition["partition_index"]
            count = counts[name]
            answers.setdefault(name, {})[index] = _answer(index, UNKNOWN_TOPIC_OR_PARTITION)
            if count is not None and 0 <= index < count:
                requested[TopicPartition(name, index)] = partition["offset"]
    results = broker.log.delete_records(requested)
    for tp, result in results.items():
        code = 0 if result.error is None else error_code(result.error, DELETE_RECORDS)
        answers[tp.topic][tp.partition] = {
            "partition_index": tp.partition,
            "low_watermark": result.low_watermark,
            "error_code": code,
        }
    return {
        "topics": [
            {"name": name, "partitions": list(partitions.values())}
            for name, partitions in answers.items()
        ],
    }


def _partition_count(broker: Broker, name: str) -> int | None:
    """How many partitions topic ``name`` has, None when there is no such topic (or no topic
    could have the name)."""
    try:
        return len(broker.log.partitions(name))
    except ConfigError:  # UnknownTopicOrPartitionError, InvalidTopicError: a hostile name
        return None


def _answer(index: int, code: int) -> Plain:
    return {"partition_index": index, "low_watermark": INVALID_LOW_WATERMARK, "error_code": code}
