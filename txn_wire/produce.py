"""Produce (R-02): client batches appended to the log exactly as they came.

Each partition's records are one or more record batches v2 (magic 2; anything else is
CORRUPT_MESSAGE). Every batch goes through the engine's partition append
(``PartitionLog.append``), which checks CRC-32C (CORRUPT_MESSAGE 2), size (MESSAGE_TOO_LARGE
10), refuses control batches (F-31, B-19), checks the producer's epoch and sequence (P-10:
OUT_OF_ORDER_SEQUENCE_NUMBER 45, INVALID_PRODUCER_EPOCH 47) and answers a retried batch with
its original offsets (E-01: error NONE, the original base offset, as Kafka answers
DUPLICATE_SEQUENCE_NUMBER). The batch is never decoded or re-encoded: only its base offset
(outside the CRC) is rewritten.

A transactional produce is refused unless its partition was added to the producer's ongoing
transaction (KIP-890 part 1, C-16): INVALID_TXN_STATE (48). librdkafka treats a permanent
produce error of a transactional producer that is not a fencing error as an abortable
transaction error, so the application aborts and retries; a fencing code would instead make
the producer fatal, which is wrong for what is a missing AddPartitionsToTxn, not a zombie.

acks=-1 makes every appended partition durable (one group fsync) before the answer; acks=1
answers once written (the OS has the bytes: a server crash loses nothing, a machine crash may);
acks=0 gets no answer at all.
"""

from __future__ import annotations

import struct
from typing import Any

from txn_log import TopicPartition
from txn_log.coordinator.transaction_state import TransactionState
from txn_log.errors import CorruptRecordError, InvalidTxnStateError, TxnLogError
from txn_log.record.batch_header import BatchHeader, parse_header
from txn_log.storage.group_sync import flush_all
from txn_log.storage.partition_log import PartitionLog
from txn_wire.broker import Broker, error_code
from txn_wire.codec import Plain, Request

PRODUCE = 0
_LENGTH_AT_8 = struct.Struct(">i")  # a batch's length field follows its 8-byte base offset
_BATCH_OVERHEAD = 12  # base offset and the length field itself


def split_batches(records: bytes) -> list[bytes]:
    """The record batches of a Produce partition's records, by their length fields;
    CorruptRecordError when one is cut short or the data holds none."""
    batches = []
    position = 0
    while position < len(records):
        if len(records) - position < _BATCH_OVERHEAD:
            raise CorruptRecordError(f"{len(records) - position} trailing bytes hold no batch")
        (length,) = _LENGTH_AT_8.unpack_from(records, position + 8)
        end = position + _BATCH_OVERHEAD + length
        if length <= 0 or end > len(records):
            raise CorruptRecordError(f"a batch at byte {position} declares {length} bytes")
        batches.append(records[position:end])
        position = end
    if not batches:
        raise CorruptRecordError("the produce request holds no record batch")
    return batches


class _TxnCheck:
    """KIP-890 part 1 for one request: the producer's transaction, fetched once."""

    def __init__(self, broker: Broker, transactional_id: str) -> None:
        self._broker = broker
        self._transactional_id = transactional_id
        self._partitions: frozenset[tuple[str, int]] | None = None

    def check(self, tp: TopicPartition, header: BatchHeader) -> None:
        if not header.is_transactional:
            raise InvalidTxnStateError(
                f"{tp}: a produce with transactional id {self._transactional_id!r} carries a "
                "batch that is not transactional"
            )
        if self._partitions is None:
            metadata = self._broker.log.coordinator.check_producer(
                self._transactional_id, header.producer_id, header.producer_epoch
            )
            ongoing = metadata.state is TransactionState.ONGOING
            self._partitions = metadata.topic_partitions if ongoing else frozenset()
        if (tp.topic, tp.partition) not in self._partitions:
            raise InvalidTxnStateError(
                f"{tp} is not part of transactional id {self._transactional_id!r}'s ongoing "
                "transaction: AddPartitionsToTxn must come first (KIP-890)"
            )


def handle_produce(broker: Broker, request: Request) -> Plain | None:
    """The Produce response (None for acks=0). Runs on a worker thread."""
    body = request.body
    transactional_id = body.get("transactional_id")
    txn_check = _TxnCheck(broker, transactional_id) if transactional_id else None
    written: list[PartitionLog] = []
    responses = []
    for topic in body["topic_data"]:
        partitions = []
        for data in topic["partition_data"]:
            tp = TopicPartition(topic["name"], data["index"])
            partitions.append(
                _produce_partition(broker, request, tp, data["records"], txn_check, written)
            )
        responses.append({"name": topic["name"], "partition_responses": partitions})
    if body["acks"] == -1 and written:
        flush_all(written)
    if body["acks"] == 0:
        return None
    return {"responses": responses}


def _produce_partition(
    broker: Broker,
    request: Request,
    tp: TopicPartition,
    records: bytes | None,
    txn_check: _TxnCheck | None,
    written: list[PartitionLog],
) -> dict[str, Any]:
    try:
        plog = broker.partition_log(tp)
        results = []
        for batch in split_batches(records or b""):  # at least one batch, or it raises
            if txn_check is not None:
                txn_check.check(tp, parse_header(batch))
            results.append(plog.append(batch))
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
        return {
            "index": tp.partition,
            "error_code": error_code(error, PRODUCE, request.api_version),
            "base_offset": -1,
            "error_message": str(error),
        }
