"""The one canonical offset JSON: sorted, compact, validated, errors with an example."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offsets.partition_offsets import (
    OFFSETS_EXAMPLE,
    PartitionOffsets,
    parse_topic_partitions,
)
from txn_log.errors import ConfigError
from txn_log.topic_partition import TopicPartition

T0, T1, T10 = TopicPartition("b", 0), TopicPartition("a", 1), TopicPartition("a", 10)


def test_canonical_json_is_sorted_and_compact() -> None:
    offsets = PartitionOffsets.of({T0: 5, T10: 7, T1: 3})
    assert offsets.to_json() == '{"a":{"1":3,"10":7},"b":{"0":5}}'


def test_to_dict_dumps_to_the_same_text_without_sort_keys() -> None:
    """Spark's worker dumps the dict without sort_keys: insertion order must be canonical."""
    offsets = PartitionOffsets.of({T0: 5, T10: 7, T1: 3, TopicPartition("a", 2): 1})
    assert json.dumps(offsets.to_dict()) == json.dumps(offsets.to_dict(), sort_keys=True)


def test_round_trip_through_json_and_dict() -> None:
    offsets = PartitionOffsets.of({T0: 5, T1: 0})
    assert PartitionOffsets.from_json(offsets.to_json()) == offsets
    assert PartitionOffsets.from_dict(json.loads(json.dumps(offsets.to_dict()))) == offsets
    assert offsets[T0] == 5 and T1 in offsets and offsets.get(T10, -3) == -3
    assert len(offsets) == 2 and list(offsets) == [T1, T0] and offsets.total() == 5


@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["a", "b.c", "x_y-z"]), st.integers(0, 200)),
        st.integers(0, 2**62),
        max_size=20,
    )
)
def test_any_position_round_trips_to_one_text(raw: dict[tuple[str, int], int]) -> None:
    offsets = PartitionOffsets.of({TopicPartition(t, p): o for (t, p), o in raw.items()})
    text = offsets.to_json()
    again = PartitionOffsets.from_json(text)
    assert again == offsets and again.to_json() == text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": {"0": 1', "malformed JSON"),
        ("[1, 2]", "top level must be an object"),
        ('{"a": [0, 1]}', "must map to an object of partitions"),
        ('{"a": {"x": 1}}', "is not a partition number"),
        ('{"a": {"-1": 1}}', "is not a partition number"),
        ('{"a": {"0": "1"}}', "must map to an integer"),
        ('{"a": {"0": true}}', "must map to an integer"),
        ('{"a": {"0": -1}}', "must map to an integer ≥ 0"),
        ('{"bad/topic": {"0": 1}}', "contains"),
    ],
)
def test_malformed_positions_are_refused_with_an_example(text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        PartitionOffsets.from_json(text, what="option 'startingOffsets'", example=OFFSETS_EXAMPLE)
    assert OFFSETS_EXAMPLE in str(info.value)
    assert "option 'startingOffsets'" in str(info.value)


def test_special_values_allowed_only_when_asked() -> None:
    text = '{"a": {"0": -2, "1": -1}}'
    assert PartitionOffsets.from_json(text, min_value=-2)[TopicPartition("a", 0)] == -2
    with pytest.raises(ConfigError):
        PartitionOffsets.from_json('{"a": {"0": -3}}', min_value=-2)


def test_assign_json() -> None:
    assert parse_topic_partitions('{"b": [1, 0], "a": [2, 2]}') == (
        TopicPartition("a", 2),
        TopicPartition("b", 0),
        TopicPartition("b", 1),
    )
    for bad in ("{}", '{"a": []}', '{"a": [-1]}', '{"a": {"0": 1}}', "nope"):
        with pytest.raises(ConfigError, match="expected"):
            parse_topic_partitions(bad)
