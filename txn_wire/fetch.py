"""Fetch (R-01, B-12): whole batches from the log, the LSO and the aborted transactions.

For each partition asked, at ``fetch_offset``, the engine plans the read
(``Consumer.read_plan``, the one plan every reader of the log uses): OFFSET_OUT_OF_RANGE (1)
below the log start or past the high watermark; the end a read may reach (the high watermark
under read_uncommitted, the last stable offset under read_committed: B-05, never at or past
the LSO; LSO ≤ high watermark ≤ log end); the aborted transactions the answer carries (B-12
step 4), from the partition it planned on. Nothing of it is decided here. This module only
fits the plan to Kafka's answer:

- Batches overlapping ``[fetch_offset, end)`` are returned whole and untouched (a fetch from
  the middle of a batch returns that batch; the client skips the records before its offset).
- Sizes follow KIP-74: batches are added while the partition stays within
  ``partition_max_bytes`` and the response within ``max_bytes``, except that the first batch
  of the first partition with data is returned even when larger, so a client always
  progresses.
- read_committed answers list the aborted transactions intersecting the returned range, for
  the consumer's filter (B-13); read_uncommitted answers list none (null).

What a client may ask is bounded as Kafka's broker bounds it (``KafkaApis.handleFetchRequest``):
the response's ``max_bytes`` is capped at ``FETCH_MAX_BYTES`` (Kafka's fetch.max.bytes,
55 MiB) and ``min_bytes`` at that; a partition named twice is read once, at the offset of
its last mention, where it was first named (Kafka keeps a request's partitions in a map), so
no request makes the server read or answer more than the cap; an ``isolation_level`` other
than 0 (read_uncommitted) or 1 (read_committed) is INVALID_REQUEST for every partition, never
read as read_uncommitted.

``read_fetch`` is one pass over the partitions (blocking I/O, run on a worker thread); the
server repeats it until ``min_bytes`` are there or ``max_wait`` passed (long poll, ``server``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from txn_log import TopicPartition
from txn_log.errors import TxnLogError
from txn_wire.broker import Broker, error_code, topic_partition
from txn_wire.codec import Plain, Request
from txn_wire.list_offsets import READ_COMMITTED, READ_UNCOMMITTED

FETCH_MAX_BYTES = 55 * 1024 * 1024
"""The most record bytes one Fetch answer carries, whatever it asks (Kafka's fetch.max.bytes
default, 57,671,680)."""
INVALID_REQUEST = 42


@dataclass(frozen=True)
class FetchResult:
    """One pass's response body, how many record bytes it holds, and whether any partition
    failed (an error answers at once, as Kafka does)."""

    body: Plain
    size: int
    has_error: bool


def fetch_limits(body: Plain) -> tuple[int, int]:
    """The response's ``max_bytes`` and ``min_bytes`` as served: ``max_bytes`` within
    ``[0, FETCH_MAX_BYTES]``, ``min_bytes`` within ``[0, max_bytes]`` (0: answer at once)."""
    max_bytes = min(max(0, body.get("max_bytes", FETCH_MAX_BYTES)), FETCH_MAX_BYTES)
    return max_bytes, min(max(0, body.get("min_bytes", 1)), max_bytes)


def fetch_partitions(body: Plain) -> list[tuple[str, list[Plain]]]:
    """The partitions asked, by topic, each once: a partition (or topic) named again keeps
    its first place and takes the later entry's offsets and limits (Kafka's map)."""
    by_topic: dict[str, dict[int, Plain]] = {}
    for topic in body["topics"]:
        partitions = by_topic.setdefault(topic["topic"], {})
        for asked in topic["partitions"]:
            partitions[asked["partition"]] = asked
    return [(name, list(partitions.values())) for name, partitions in by_topic.items()]


def read_fetch(broker: Broker, request: Request) -> FetchResult:
    body = request.body
    isolation = body.get("isolation_level", READ_UNCOMMITTED)
    if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
        return _refused(body, INVALID_REQUEST)
    committed = isolation == READ_COMMITTED
    budget = _Budget(fetch_limits(body)[0])
    has_error = False
    responses = []
    for name, asked_partitions in fetch_partitions(body):
        partitions = []
        for asked in asked_partitions:
            try:
                tp = topic_partition(name, asked["partition"])
                partitions.append(_read_partition(broker, tp, asked, committed, budget))
            except TxnLogError as error:
                has_error = True
                partitions.append(_partition_error(asked["partition"], error_code(error)))
        responses.append({"topic": name, "partitions": partitions})
    result = {"error_code": 0, "session_id": 0, "responses": responses}
    return FetchResult(result, budget.used, has_error)


def _refused(body: Plain, code: int) -> FetchResult:
    """Every partition asked answered ``code``, and the request too (Fetch v7+)."""
    responses = [
        {"topic": name, "partitions": [_partition_error(p["partition"], code) for p in asked]}
        for name, asked in fetch_partitions(body)
    ]
    return FetchResult({"error_code": code, "session_id": 0, "responses": responses}, 0, True)


def _partition_error(partition: int, code: int) -> Plain:
    return {"partition_index": partition, "error_code": code, "high_watermark": -1, "records": b""}


class _Budget:
    """The response's ``max_bytes``, shared by its partitions (KIP-74)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 0

    def admits(self, size: int, partition_bytes: int, partition_max_bytes: int) -> bool:
        if self.used == 0:  # the first batch of the response always goes (KIP-74)
            return True
        if partition_bytes + size > partition_max_bytes:
            return False
        return self.used + size <= self.max_bytes


def _read_partition(
    broker: Broker,
    tp: TopicPartition,
    asked: dict[str, Any],
    committed: bool,
    budget: _Budget,
) -> dict[str, Any]:
    fetch_offset = asked["fetch_offset"]
    plan = broker.consumer(committed).read_plan(tp, fetch_offset)
    chunks: list[bytes] = []
    size = 0
    last_offset = -1
    if fetch_offset < plan.end:
        for header, batch in plan.reader.read(fetch_offset, plan.end):
            if not budget.admits(len(batch), size, asked["partition_max_bytes"]):
                break
            chunks.append(bytes(batch))
            size += len(batch)
            budget.used += len(batch)
            last_offset = header.last_offset
    aborted: list[dict[str, int]] | None = None
    if committed:
        aborted = [
            {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
            for txn in plan.aborted_txns(fetch_offset, last_offset + 1)
        ]
    return {
        "partition_index": tp.partition,
        "error_code": 0,
        "high_watermark": plan.high_watermark,
        "last_stable_offset": plan.last_stable_offset,
        "log_start_offset": plan.log_start_offset,
        "aborted_transactions": aborted,
        "records": b"".join(chunks),
    }


def end_offsets(broker: Broker, request: Request) -> tuple[int, ...]:
    """The partitions' log ends, to notice cheaply that another process appended."""
    ends = []
    for name, asked_partitions in fetch_partitions(request.body):
        for asked in asked_partitions:
            try:
                tp = topic_partition(name, asked["partition"])
                ends.append(broker.partition_reader(tp).log_end_offset)
            except TxnLogError:
                ends.append(-1)
    return tuple(ends)
