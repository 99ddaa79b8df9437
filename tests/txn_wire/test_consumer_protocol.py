"""The subscription reader of OffsetDelete (``txn_wire.consumer_protocol``) against
ConsumerProtocolSubscription v0-v3 as kio (Kafka's schemas, generated) writes them, and
against metadata that is no subscription: never an exception other than SubscriptionError,
never an allocation beyond the metadata's size, and an unknown subscription counts as every
topic (Kafka's ``isSubscribedToTopic``)."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.static.primitive import i32

from txn_wire.consumer_protocol import (
    SubscriptionError,
    is_subscribed,
    subscribed_topics,
    subscription_topics,
)


def encode_subscription(
    topics: list[str], version: int = 0, user_data: bytes | None = None
) -> bytes:
    """A member's metadata as Kafka's clients write it: int16 version, then the version's
    ConsumerProtocolSubscription (written by kio, owning one partition of the first topic)."""
    package = f"kio.schema.consumer_protocol_subscription.v{version}"
    module: Any = __import__(package, fromlist=["ConsumerProtocolSubscription"])
    schema = module.ConsumerProtocolSubscription
    fields: dict[str, Any] = {"topics": tuple(topics), "user_data": user_data}
    if version >= 1:
        owned = module.data.TopicPartition
        fields["owned_partitions"] = tuple(owned(topic=t, partitions=(i32(0),)) for t in topics[:1])
    if version >= 2:
        fields["generation_id"] = i32(7)
    if version >= 3:
        fields["rack_id"] = "rack-a"
    buffer = io.BytesIO()
    entity_writer(schema)(buffer, schema(**fields))
    return struct.pack(">h", version) + buffer.getvalue()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_is_read_by_its_version_0_prefix(version: int) -> None:
    metadata = encode_subscription(["orders", "other", "orders"], version, b"\x01\x02")
    assert subscription_topics(metadata) == {"orders", "other"}
    assert subscription_topics(encode_subscription([], version)) == frozenset()
    future = struct.pack(">h", 9) + encode_subscription(["x"], 3)[2:] + b"more fields"
    assert subscription_topics(future) == {"x"}


@pytest.mark.parametrize(
    "metadata",
    [
        b"",
        b"\x00",
        b"\x00\x00\x00\x00\x00",  # a topic count cut short
        b"\x00\x00\x00\x00\x00\x00",  # no user data (version 0 has it, null or not)
        b"\x00\x00\x7f\xff\xff\xff",  # 2**31-1 topics in 6 bytes
        b"\x00\x00\xff\xff\xff\xfe\xff\xff\xff\xff",  # a negative count
        b"\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff",  # a null topic name
        b"\x00\x00\x00\x00\x00\x01\x00\x09abc",  # a name longer than what is left
        b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x09ab",  # user data longer than what is left
        b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xfe",  # user data of length -2
    ],
)
def test_metadata_without_a_version_0_prefix_is_refused(metadata: bytes) -> None:
    with pytest.raises(SubscriptionError):
        subscription_topics(metadata)


@given(st.binary(max_size=64))
def test_any_bytes_give_topics_or_a_subscription_error(metadata: bytes) -> None:
    try:
        topics = subscription_topics(metadata)
    except SubscriptionError:
        return
    assert all(isinstance(topic, str) for topic in topics)


def test_a_name_that_is_not_utf8_is_read_with_replacement_characters() -> None:
    metadata = b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe\xff\xff\xff\xff"
    assert subscription_topics(metadata) == {"\ufffd\ufffd"}


def test_a_group_subscribes_to_the_union_or_to_unknown_as_kafka_computes_it() -> None:
    a, b = encode_subscription(["a"]), encode_subscription(["b", "c"], 3)
    assert subscribed_topics("consumer", "range", [a, b]) == {"a", "b", "c"}
    assert subscribed_topics("consumer", None, []) == frozenset()  # empty: nothing
    assert subscribed_topics("consumer", None, [a]) is None  # no protocol chosen yet
    assert subscribed_topics("consumer", "range", [a, b"junk"]) is None  # one member garbled
    assert subscribed_topics("connect", "range", [a]) is None
    assert subscribed_topics("", None, []) is None
    assert is_subscribed("consumer", None, "anything")
    assert not is_subscribed("connect", None, "anything")
    assert is_subscribed("consumer", frozenset({"a"}), "a")
    assert not is_subscribed("consumer", frozenset({"a"}), "b")
