"""The transactional RPCs (R-05..R-10) over the engine's ``TransactionCoordinator`` and group
offset store, and plain OffsetCommit / OffsetFetch.

Each handler only translates, one engine call each: the coordinator decides (epoch, producer
id mapping, state, the partitions of a transaction) and raises the engine's typed errors,
which carry Kafka's codes (``broker.error_code``). No transaction rule is decided here.

- InitProducerId (C-14, C-15): a null (or empty) transactional id gets a fresh producer id;
  otherwise the coordinator bumps the epoch, fencing older instances and aborting their open
  transaction. With v3+ a client may name its current producer id and epoch (KIP-360, to
  recover from an abortable error): the coordinator checks them under its lock
  (``init_producer_id(expected=...)``), PRODUCER_FENCED unless they are the current ones.
- AddPartitionsToTxn (C-16): all partitions or none; an unknown one is
  UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka answers.
- AddOffsetsToTxn (C-17), EndTxn (C-18).
- TxnOffsetCommit (O-02, O-03): the engine's transactional offset commit
  (``transactional_append.txn_offset_commit``): inside the producer's ongoing transaction,
  after AddOffsetsToTxn (INVALID_TXN_STATE otherwise), and only from a current member of the
  group's current generation when the request names one (KIP-447: ILLEGAL_GENERATION,
  UNKNOWN_MEMBER_ID), which the server's group coordinator decides (``group_membership``).
- OffsetCommit / OffsetFetch: plain group offsets in the same store (``txnlog groups``); the
  server checks the committing member against its group first (``server``).
- Both offset commits answer a partition that does not exist UNKNOWN_TOPIC_OR_PARTITION and
  commit the others, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from txn_log import TopicPartition
from txn_log.coordinator.transactional_append import txn_offset_commit
from txn_log.errors import ConfigError, TxnLogError
from txn_log.group.group_membership import GroupMember, GroupMembership
from txn_log.group.group_offsets import OFFSETS_PARTITION, OffsetAndMetadata
from txn_log.group.group_offsets_format import validate_offset
from txn_wire.broker import (
    OPERATION_NOT_ATTEMPTED,
    UNKNOWN_TOPIC_OR_PARTITION,
    Broker,
    error_code,
    topic_partition,
)
from txn_wire.codec import Plain, Request

INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28
UNSTABLE_OFFSET_COMMIT = 88
INVALID_REQUEST = 42


def _code(error: TxnLogError, request: Request) -> int:
    return error_code(error, request.api_key, request.api_version)


def handle_init_producer_id(broker: Broker, request: Request) -> Plain:
    body = request.body
    transactional_id = body.get("transactional_id") or None
    coordinator = broker.log.coordinator
    expected = None
    if transactional_id is not None and body.get("producer_id", -1) >= 0:
        expected = (body["producer_id"], body["producer_epoch"])
    try:
        producer_id, epoch = coordinator.init_producer_id(
            transactional_id, body["transaction_timeout"], expected=expected
        )
    except TxnLogError as error:
        return {"error_code": _code(error, request), "producer_id": -1, "producer_epoch": -1}
    return {"error_code": 0, "producer_id": producer_id, "producer_epoch": epoch}


def handle_add_partitions_to_txn(broker: Broker, request: Request) -> Plain:
    body = request.body
    topics = body["v3_and_below_topics"]
    wanted = [(t["name"], p) for t in topics for p in t["partitions"]]
    unknown = {key for key in wanted if not _exists(broker, *key)}
    codes: dict[tuple[str, int], int] = {}
    if unknown:
        codes = {
            key: UNKNOWN_TOPIC_OR_PARTITION if key in unknown else OPERATION_NOT_ATTEMPTED
            for key in wanted
        }
    else:
        try:
            broker.log.coordinator.add_partitions(
                body["v3_and_below_transactional_id"],
                body["v3_and_below_producer_id"],
                body["v3_and_below_producer_epoch"],
                [TopicPartition(*key) for key in wanted],
            )
        except TxnLogError as error:
            codes = dict.fromkeys(wanted, _code(error, request))
    return {
        "results_by_topic_v3_and_below": [
            {
                "name": t["name"],
                "results_by_partition": [
                    {
                        "partition_index": p,
                        "partition_error_code": codes.get((t["name"], p), 0),
                    }
                    for p in t["partitions"]
                ],
            }
            for t in topics
        ]
    }


def _exists(broker: Broker, topic: str, partition: int) -> bool:
    try:
        broker.partition_reader(topic_partition(topic, partition))
    except TxnLogError:
        return False
    return True


def _transaction_call(request: Request, call: Callable[..., object], last: str) -> Plain:
    """A coordinator call on the request's transactional id, producer id and epoch, plus the
    field ``last``; its error as the request version's Kafka code."""
    body = request.body
    try:
        call(body["transactional_id"], body["producer_id"], body["producer_epoch"], body[last])
    except TxnLogError as error:
        return {"error_code": _code(error, request)}
    return {"error_code": 0}


def handle_add_offsets_to_txn(broker: Broker, request: Request) -> Plain:
    return _transaction_call(request, broker.log.coordinator.add_offsets, "group_id")


def handle_end_txn(broker: Broker, request: Request) -> Plain:
    return _transaction_call(request, broker.log.coordinator.end_txn, "committed")


def handle_txn_offset_commit(
    broker: Broker, request: Request, membership: GroupMembership | None = None
) -> Plain:
    body = request.body
    member = GroupMember(
        body.get("member_id") or "",
        body.get("generation_id", -1),
        body.get("group_instance_id"),
    )
    transaction = (body["transactional_id"], body["producer_id"], body["producer_epoch"])
    known, refused = _known_partitions(broker, body["topics"])
    code = 0
    try:
        if known:
            txn_offset_commit(
                broker.log.coordinator,
                broker.log.group_offsets,
                broker.log.partition_log(OFFSETS_PARTITION),
                transaction,
                body["group_id"],
                _offsets(known),
                member=member,
                membership=membership,
            )
    except TxnLogError as error:
        code = _code(error, request)
    return {"topics": _partition_codes(known, code) + refused}


def handle_offset_commit(broker: Broker, request: Request) -> Plain:
    body = request.body
    known, refused = _known_partitions(broker, body["topics"])
    code = 0
    try:
        if known:
            broker.log.group_offsets.commit(body["group_id"], _offsets(known))
    except TxnLogError as error:
        code = _code(error, request)
    return {"topics": _partition_codes(known, code) + refused}


def _known_partitions(
    broker: Broker, topics: list[dict[str, Any]]
) -> tuple[list[Plain], list[Plain]]:
    """The request's topics narrowed to the partitions that exist and whose offsets are valid,
    and the answers of the others (``_offset_refusal``): UNKNOWN_TOPIC_OR_PARTITION for a
    partition that does not exist, as Kafka's ``handleOffsetCommitRequest`` and
    ``handleTxnOffsetCommitRequest`` answer a partition their metadata does not hold
    (committing the others); an offset for a partition that does not exist is never stored."""
    known: list[Plain] = []
    refused: list[Plain] = []
    for topic in topics:
        try:
            count = len(broker.log.partitions(topic["name"]))
        except TxnLogError:  # no such topic (or deleted this moment by a peer), or a bad name
            count = 0
        here: list[Plain] = []
        codes: dict[int, list[Plain]] = {}
        for asked in topic["partitions"]:
            code = _offset_refusal(topic["name"], asked, count)
            if code:
                codes.setdefault(code, []).append(asked)
            else:
                here.append(asked)
        if here:
            known.append({**topic, "partitions": here})
        for code, partitions in codes.items():
            refused += _partition_codes([{"name": topic["name"], "partitions": partitions}], code)
    return known, refused


def _offset_refusal(topic: str, asked: Plain, partition_count: int) -> int:
    """Why one partition's offset cannot be committed, or 0: UNKNOWN_TOPIC_OR_PARTITION for a
    partition that does not exist, else the engine's own check of the offset
    (``validate_offset``): OFFSET_METADATA_TOO_LARGE (12), INVALID_REQUEST for an offset or
    leader epoch out of range. Each partition is answered alone and the others are committed,
    as Kafka's ``OffsetMetadataManager`` does (one bad partition failed the whole commit)."""
    index = asked["partition_index"]
    if not 0 <= index < partition_count:
        return UNKNOWN_TOPIC_OR_PARTITION
    try:
        validate_offset(TopicPartition(topic, index), _offset_and_metadata(asked))
    except ConfigError as error:
        return error.code if error.code is not None else INVALID_REQUEST
    return 0


def handle_offset_fetch(broker: Broker, request: Request) -> Plain:
    """The group's committed offsets (O-04). With ``require_stable`` (v7, KIP-447: what
    read_committed consumers send) a partition whose offset the group has committed in a
    transaction still open is UNSTABLE_OFFSET_COMMIT (88) with offset -1, which the client
    retries until the transaction ends: a new owner after a rebalance never starts from the
    offset before a commit its previous owner is making. The open commits are read first, so
    an offset returned is one no open transaction was about to replace at that moment."""
    body = request.body
    group_id = body["group_id"]
    try:
        unstable = broker.log.unstable_offsets(group_id) if body.get("require_stable") else ()
        if body.get("topics") is None:
            committed: dict[TopicPartition, OffsetAndMetadata | None] = dict(
                broker.log.group_offsets.groups().get(group_id, {})
            )
        else:
            wanted = [
                TopicPartition(t["name"], p) for t in body["topics"] for p in t["partition_indexes"]
            ]
            committed = broker.log.committed(group_id, wanted)
    except TxnLogError as error:
        return {"topics": [], "error_code": _code(error, request)}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, om in sorted(committed.items()):
        if tp in unstable:
            om = None
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "committed_offset": om.offset if om else -1,
                "committed_leader_epoch": om.leader_epoch if om else -1,
                "metadata": om.metadata if om else "",
                "error_code": UNSTABLE_OFFSET_COMMIT if tp in unstable else 0,
            }
        )
    topics = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
    return {"topics": topics, "error_code": 0}


def _offsets(topics: list[dict[str, Any]]) -> dict[TopicPartition, OffsetAndMetadata]:
    return {
        TopicPartition(t["name"], p["partition_index"]): _offset_and_metadata(p)
        for t in topics
        for p in t["partitions"]
    }


def _offset_and_metadata(asked: Plain) -> OffsetAndMetadata:
    return OffsetAndMetadata(
        asked["committed_offset"],
        asked.get("committed_metadata") or "",
        asked.get("committed_leader_epoch", -1),
    )


def _partition_codes(topics: list[dict[str, Any]], code: int) -> list[dict[str, Any]]:
    return [
        {
            "name": t["name"],
            "partitions": [
                {"partition_index": p["partition_index"], "error_code": code}
                for p in t["partitions"]
            ],
        }
        for t in topics
    ]
