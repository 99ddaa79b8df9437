"""OffsetDelete (47, v0): Kafka's AdminClient ``deleteConsumerGroupOffsets``, the group's
committed offsets of some partitions deleted by the engine (``GroupOffsetStore.delete_offsets``,
the operation ``txnlog groups delete-offsets`` runs), answered as Kafka's ``KafkaApis`` and
group coordinator answer it, in this order:

    not Delete on the group (``authorize_groups``)  GROUP_AUTHORIZATION_FAILED (30), alone
    an empty group id                               INVALID_GROUP_ID (24), alone
    not Read on the topic (``authorize_groups``)    TOPIC_AUTHORIZATION_FAILED (29), each of
                                                    its partitions
    a topic or partition that does not exist       UNKNOWN_TOPIC_OR_PARTITION (3), that one
    a group without members here and without       GROUP_ID_NOT_FOUND (69), alone
      committed offsets (Kafka's Dead)
    members here, of a protocol type other than    NON_EMPTY_GROUP (68), alone
      ``consumer``
    members in another ``txnlog serve`` of the     NON_EMPTY_GROUP (68), alone: this server
      log (``group_activity``)                     cannot see what they subscribe to
    members here subscribing to the topic          GROUP_SUBSCRIBED_TO_TOPIC (86), each of its
      (``consumer_protocol``; unknown               partitions, offsets kept
      subscriptions count as every topic)
    otherwise                                       NONE (0): the offset deleted, or there was
                                                    none

"Alone": the answer has that top-level error and no topics, as Kafka's error response, the
refusals of the ACL rule included. A group with members is decided on the event loop, where
the group coordinator lives (its subscriptions are those of its current generation, as
Kafka's), and its offsets deleted on a worker thread (the engine appends and fsyncs) while the
group stays active (``live``); a group without members here is held inactive by the engine for
its check and write, so no member joins meanwhile in any process. A member that joins here
between the two steps makes the engine refuse, and the decision is taken again once. A
rebalance that completes between the decision and the write may subscribe to a topic whose
offsets are then deleted, as in Kafka's coordinator before 4.0, which decided and wrote under
two separate group locks.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from txn_log.errors import (
    GroupNotEmptyError,
    InvalidTopicError,
    TxnLogError,
    UnknownTopicOrPartitionError,
)
from txn_log.topic_partition import TopicPartition
from txn_wire.broker import NONE, UNKNOWN_TOPIC_OR_PARTITION, Broker, error_code
from txn_wire.codec import Plain, Request
from txn_wire.consumer_protocol import CONSUMER_PROTOCOL_TYPE, is_subscribed
from txn_wire.group_coordinator import GroupCoordinator, GroupState

OFFSET_DELETE = 47
INVALID_GROUP_ID = 24
NON_EMPTY_GROUP = 68
GROUP_SUBSCRIBED_TO_TOPIC = 86
_ATTEMPTS = 2  # a decision taken without members, refused because one joined here meanwhile


@dataclass(frozen=True)
class Decision:
    """What the group coordinator decided for one request: a whole-answer ``error``, or which
    asked-for topics its members subscribe to and whether it holds members (``live``)."""

    error: int = NONE
    live: bool = False
    subscribed: frozenset[str] = frozenset()


def decide(groups: GroupCoordinator, group_id: str, topics: set[str]) -> Decision:
    """The coordinator's part (Kafka's ``validateOffsetDelete`` and ``isSubscribedToTopic``),
    from the group as the event loop holds it now. Run on the event loop."""
    group = groups.groups.get(group_id)
    if group is None or not group.members:
        return Decision()
    if group.state is GroupState.EMPTY:  # members still waiting for their id (KIP-394)
        return Decision(live=True)
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return Decision(error=NON_EMPTY_GROUP)
    subscribed = {
        topic
        for topic in topics
        if is_subscribed(group.protocol_type, group.subscribed_topics, topic)
    }
    return Decision(live=True, subscribed=frozenset(subscribed))


async def handle_offset_delete(broker: Broker, groups: GroupCoordinator, request: Request) -> Plain:
    group_id = request.body["group_id"]
    if not group_id:
        return _alone(INVALID_GROUP_ID)
    asked = [
        (topic["name"], partition["partition_index"])
        for topic in request.body["topics"]
        for partition in topic["partitions"]
    ]
    codes = await asyncio.to_thread(_unknown_partitions, broker, asked)
    known = {TopicPartition(name, index) for name, index in asked if (name, index) not in codes}
    for _ in range(_ATTEMPTS):
        decision = decide(groups, group_id, {tp.topic for tp in known})
        if decision.error:
            return _alone(decision.error)
        eligible = {tp for tp in known if tp.topic not in decision.subscribed}
        try:
            await asyncio.to_thread(
                broker.log.group_offsets.delete_offsets, group_id, eligible, live=decision.live
            )
        except GroupNotEmptyError:
            continue  # a member joined meanwhile: here (decide again) or elsewhere (68)
        except TxnLogError as error:
            return _alone(error_code(error, OFFSET_DELETE, request.api_version))
        for tp in known:
            codes[(tp.topic, tp.partition)] = NONE if tp in eligible else GROUP_SUBSCRIBED_TO_TOPIC
        return {"error_code": NONE, "topics": _by_topic(request, codes)}
    return _alone(NON_EMPTY_GROUP)


def _unknown_partitions(broker: Broker, asked: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """UNKNOWN_TOPIC_OR_PARTITION for each asked-for partition that does not exist now (Kafka
    looks in its metadata cache before asking the coordinator). Reads topic files: a worker
    thread."""
    counts: dict[str, int] = {}
    for name in {name for name, _ in asked}:
        try:
            counts[name] = len(broker.log.partitions(name))
        except (UnknownTopicOrPartitionError, InvalidTopicError):  # no such topic, or name
            counts[name] = 0
    return {
        (name, index): UNKNOWN_TOPIC_OR_PARTITION
        for name, index in asked
        if not 0 <= index < counts.get(name, 0)
    }


def _by_topic(request: Request, codes: dict[tuple[str, int], int]) -> list[Plain]:
    return [
        {
            "name": topic["name"],
            "partitions": [
                {
                    "partition_index": partition["partition_index"],
                    "error_code": codes[(topic["name"], partition["partition_index"])],
                }
                for partition in topic["partitions"]
            ],
        }
        for topic in request.body["topics"]
    ]


def _alone(code: int) -> Plain:
    return {"error_code": code, "topics": []}
