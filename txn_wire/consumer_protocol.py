"""The topics a classic consumer group's members subscribe to, read from their JoinGroup
metadata (Kafka's ``ConsumerProtocolSubscription``), for OffsetDelete's
GROUP_SUBSCRIBED_TO_TOPIC rule (``offset_delete``).

Layout of a member's metadata for the group's protocol (Kafka's
ConsumerProtocolSubscription.json; not a flexible version, big-endian)::

    version           int16     0..3 from Kafka's clients (any value is accepted)
    topics            int32 N, then N x (int16 length L >= 0, L bytes of UTF-8)
    user_data         int32 length L (-1: null), then L bytes
    owned_partitions  v1+, generation_id v2+, rack_id v3+: not read

Every version starts with version 0's fields, and the coordinator reads only those, as Kafka's
``computeSubscribedTopics`` does (it parses each member "with V0, which is the base prefix of
all versions"), so versions 0 to 3 and any later one read alike. What does not hold that
prefix (too short, a negative or impossible count or length: the bytes are the client's)
raises ``SubscriptionError``, and the group's subscriptions are then unknown (None), which
Kafka's ``ClassicGroup.isSubscribedToTopic`` counts as every topic for a consumer group: the
coordinator "is not aware of the subscribed topics", so no live group's offsets are deleted on
a guess. A topic name that is not UTF-8 is read with replacement characters, as Java's decoder
does (it names no topic of this log, whose names are ASCII).

Pure functions; thread-safe. Every length is checked against the bytes left before anything
is read, so a hostile count costs no more than the metadata's own size.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

CONSUMER_PROTOCOL_TYPE = "consumer"
"""The protocol type of Kafka's consumers (``ConsumerProtocol.PROTOCOL_TYPE``)."""

_VERSION = struct.Struct(">h")  # version: int16, read and ignored (v0's prefix is read)
_COUNT = struct.Struct(">i")  # topics: int32 element count; user_data: int32 length (-1 null)
_STRING_LENGTH = struct.Struct(">h")  # a topic name: int16 length, then its UTF-8 bytes


class SubscriptionError(ValueError):
    """Metadata that does not start with a version-0 ConsumerProtocolSubscription."""


def subscription_topics(metadata: bytes) -> frozenset[str]:
    """The topics one member's metadata subscribes to; SubscriptionError if it holds no
    version-0 prefix (see the module docstring)."""
    view = memoryview(metadata)
    position = _take(view, 0, _VERSION.size, "version")
    end = _take(view, position, _COUNT.size, "topic count")
    (count,) = _COUNT.unpack_from(view, position)
    position = end
    if count < 0 or count * _STRING_LENGTH.size > len(view) - position:
        raise SubscriptionError(f"topic count {count} does not fit the {len(view)} bytes")
    topics = []
    for _ in range(count):
        end = _take(view, position, _STRING_LENGTH.size, "topic name length")
        (length,) = _STRING_LENGTH.unpack_from(view, position)
        if length < 0:
            raise SubscriptionError(f"topic name of length {length} (a null name)")
        position = _take(view, end, length, "topic name")
        topics.append(bytes(view[end:position]).decode("utf-8", errors="replace"))
    end = _take(view, position, _COUNT.size, "user data length")
    (user_data,) = _COUNT.unpack_from(view, position)
    if user_data < -1:
        raise SubscriptionError(f"user data of length {user_data}")
    _take(view, end, max(user_data, 0), "user data")
    return frozenset(topics)


def _take(view: memoryview, position: int, size: int, what: str) -> int:
    """The position after ``size`` bytes at ``position``; SubscriptionError if they are not
    all there."""
    if size > len(view) - position:
        raise SubscriptionError(
            f"the {what} needs {size} bytes at byte {position}, but the metadata has "
            f"{len(view)} bytes"
        )
    return position + size


def subscribed_topics(
    protocol_type: str, protocol_name: str | None, metadata: Iterable[bytes]
) -> frozenset[str] | None:
    """What a classic group's members subscribe to, as Kafka computes it at each new
    generation (``ClassicGroup.computeSubscribedTopics``): None (unknown) for a group whose
    protocol type is not ``consumer``, or that has no protocol yet, or one of whose members'
    ``metadata`` (for the group's protocol) is no subscription; an empty set for a consumer
    group without members; else the union of every member's topics."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    members = list(metadata)
    if not members:
        return frozenset()
    if protocol_name is None:
        return None
    try:
        return frozenset().union(*(subscription_topics(one) for one in members))
    except SubscriptionError:
        return None


def is_subscribed(protocol_type: str, subscribed: frozenset[str] | None, topic: str) -> bool:
    """Whether a group counts as subscribed to ``topic`` (Kafka's ``isSubscribedToTopic``):
    it is in the known subscriptions, or they are unknown and the group is a consumer group."""
    if subscribed is None:
        return protocol_type == CONSUMER_PROTOCOL_TYPE
    return topic in subscribed
