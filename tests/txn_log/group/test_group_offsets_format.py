"""The records of ``__consumer_offsets`` (``group_offsets_format``): Kafka's OffsetCommitKey v1
and OffsetCommitValue v3, and the typed errors for what does not fit them (STYLE 3, 7)."""

from __future__ import annotations

import struct

import pytest

from txn_log.errors import ConfigError, InvalidGroupIdError, OffsetMetadataTooLargeError
from txn_log.group.group_offsets import OffsetAndMetadata
from txn_log.group.group_offsets_format import decode_record, encode_key, encode_value
from txn_log.topic_partition import TopicPartition

IN0 = TopicPartition("in", 0)


def test_encoding_never_raises_a_raw_struct_error() -> None:
    """Item 13: the record encoders refuse what does not fit with a typed error naming the group
    and partition, whoever calls them."""
    with pytest.raises(InvalidGroupIdError, match="in-0"):
        encode_key("g" * 40_000, IN0)
    with pytest.raises(OffsetMetadataTooLargeError, match="at most 4096"):
        encode_value(OffsetAndMetadata(1, "m" * 40_000), 0)
    with pytest.raises(ConfigError, match="int64"):
        encode_value(OffsetAndMetadata(1 << 63), 0)
    key = encode_key("G", IN0)
    value = encode_value(OffsetAndMetadata(4, "meta", 2), 1_700_000_000_000)
    assert decode_record(key, value) == ("G", IN0, OffsetAndMetadata(4, "meta", 2))
    assert key == struct.pack(">hh1sh2si", 1, 1, b"G", 2, b"in", 0)  # OffsetCommitKey v1
