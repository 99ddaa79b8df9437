"""Produce (R-02): client batches appended to the log exactly as they came.

Each partition's records are one or more record batches v2 (magic 2; anything else is
CORRUPT_MESSAGE). This handler decides nothing itself: every batch goes through the engine's
one append of a client batch (``coordinator.transactional_append.append_client_batch``), which
validates it whole as Kafka's ``LogValidator`` does (``log_validator``: CRC-32C, sizes, the
header against the records, codecs, control batches refused, F-31, B-19), checks the
producer's epoch and sequence (P-10: OUT_OF_ORDER_SEQUENCE_NUMBER 45, INVALID_PRODUCER_EPOCH
47), answers a retried batch with its original offsets (E-01: error NONE, the original base
offset, as Kafka answers DUPLICATE_SEQUENCE_NUMBER), and lets a transactional batch start a
transaction in a partition only when the coordinator verified that the producer's ongoing
transaction includes it (KIP-890 part 1, C-16: INVALID_TXN_STATE 48; librdkafka treats a
permanent produce error of a transactional producer that is not a fencing error as abortable,
so the application aborts and retries). The batch is never decoded or re-encoded: only its
base offset (outside the CRC) is rewritten.

A request carrying transactional batches without a transactional id is refused whole with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), before anything is appended, as KafkaApis
refuses it: its batches would otherwise claim any producer id's transaction (B-19).

acks=-1 makes every appended partition durable (one group fsync) before the answer; acks=1
answers once written (the OS has the bytes: a server crash loses nothing, a machine crash may);
acks=0 gets no answer at all.
"""

from __future__ import annotations

import struct
from typing import Any

from txn_log.coordinator.transactional_append import append_client_batch
from txn_log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    TransactionalIdAuthorizationError,
    TxnLogError,
)
from txn_log.record.batch_header import ATTRIBUTES_OFFSET, HEADER_SIZE, BatchAttributes
from txn_log.storage.group_sync import flush_all
from txn_log.storage.log_validator import validate_client_batch
from txn_log.storage.partition_log import PartitionLog
from txn_wire.acl import Operation
from txn_wire.broker import Broker, error_code, topic_partition
from txn_wire.codec import Plain, Request
from txn_wire.guard import topic_access

PRODUCE = 0
_LENGTH_AT_8 = struct.Struct(">i")  # a batch's length field follows its 8-byte base offset
_BATCH_OVERHEAD = 12  # base offset and the length field itself
_ATTRIBUTES = struct.Struct(">h")


def split_batches(records: bytes) -> list[memoryview]:
    """The record batches of a Produce partition's records, by their length fields, as views
    of ``records`` (no copy: the append copies each batch once, into the bytes it writes);
    CorruptRecordError when one is cut short or the data holds none."""
    view = memoryview(records)
    batches = []
    position = 0
    while position < len(records):
        if len(records) - position < _BATCH_OVERHEAD:
            raise CorruptRecordError(f"{len(records) - position} trailing bytes hold no batch")
        (length,) = _LENGTH_AT_8.unpack_from(records, position + 8)
        end = position + _BATCH_OVERHEAD + length
        if length <= 0 or end > len(records):
            raise CorruptRecordError(f"a batch at byte {position} declares {length} bytes")
        batches.append(view[position:end])
        position = end
    if not batches:
        raise CorruptRecordError("the produce request holds no record batch")
    return batches


def handle_produce(broker: Broker, request: Request) -> Plain | None:
    """The Produce response (None for acks=0). Runs on a worker thread."""
    body = request.body
    transactional_id = body.get("transactional_id")
    refusal = _without_transactional_id(body) if transactional_id is None else None
    written: list[PartitionLog] = []
    responses = []
    for topic in body["topic_data"]:
        partitions = []
        for data in topic["partition_data"]:
            partitions.append(
                _refused(data["index"], refusal, request)
                if refusal is not None
                else _produce_partition(broker, request, topic["name"], data, written)
            )
        responses.append({"name": topic["name"], "partition_responses": partitions})
    if body["acks"] == -1 and written:
        flush_all(written)
    if body["acks"] == 0:
        return None
    return {"responses": responses}


def _without_transactional_id(body: Plain) -> TxnLogError | None:
    """TransactionalIdAuthorizationError when a request without a transactional id carries a
    transactional batch anywhere (KafkaApis: ``hasTransactionalRecords``), else None."""
    for topic in body["topic_data"]:
        for data in topic["partition_data"]:
            try:
                batches = split_batches(data["records"] or b"")
            except CorruptRecordError:
                continue  # answered as CORRUPT_MESSAGE by its partition, if the request goes on
            if any(_is_transactional(batch) for batch in batches):
                return TransactionalIdAuthorizationError(
                    f"{topic['name']}-{data['index']}: a produce carrying transactional "
                    "batches without a transactional id; nothing in the request was written"
                )
    return None


def _is_transactional(batch: memoryview) -> bool:
    """The transactional bit of a batch's attributes (F-13), read without judging the rest of
    the header: whatever else is wrong with the batch, its partition answers it."""
    if len(batch) < HEADER_SIZE:
        return False
    (attributes,) = _ATTRIBUTES.unpack_from(batch, ATTRIBUTES_OFFSET)
    return bool(attributes & BatchAttributes.TRANSACTIONAL)


def _refused(index: int, error: TxnLogError, request: Request) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "index": index,
        "error_code": error_code(error, PRODUCE, request.api_version),
        "base_offset": -1,
        "error_message": str(error),
    }
    if isinstance(error, InvalidRecordError) and error.record_errors:  # v8+ reads them
        answer["record_errors"] = [
            {"batch_index": at, "batch_index_error_message": why} for at, why in error.record_errors
        ]
    return answer


def _produce_partition(
    broker: Broker,
    request: Request,
    topic: str,
    data: dict[str, Any],
    written: list[PartitionLog],
) -> dict[str, Any]:
    transactional_id = request.body.get("transactional_id")
    records: bytes | None = data["records"]
    try:
        tp = topic_partition(topic, data["index"])
        plog = broker.partition_log(tp, topic_access(request, Operation.WRITE).creates)
        batches = split_batches(records or b"")  # at least one batch, or it raises
        if len(batches) > 1:  # all of a partition's batches are valid, or none is appended
            for batch in batches:
                validate_client_batch(tp, plog.config, bytearray(batch))
        results = [
            append_client_batch(
                broker.log.coordinator, plog, batch, transactional_id=transactional_id
            )
            for batch in batches
        ]
        written.append(plog)
        first = results[0]
        return {
            "index": tp.partition,
            "error_code": 0,
            "base_offset": first.base_offset,
            "log_append_time": first.log_append_time_ms if first.log_append_time_ms >= 0 else None,
            "log_start_offset": plog.log_start_offset,
        }
    except TxnLogError as error:
        return _refused(data["index"], error, request)
