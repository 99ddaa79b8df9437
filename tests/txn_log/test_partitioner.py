"""Kafka's murmur2 partitioner, checked against Kafka's own test vectors and kafka-python."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from txn_log.partitioner import murmur2, partition_for_key


@pytest.mark.parametrize(
    ("data", "expected"),
    [  # Kafka's UtilsTest.testMurmur2
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_kafka_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_matches_kafka_python(data: bytes, partitions: int) -> None:
    assert (
        partition_for_key(data, partitions)
        == (kafka_python_murmur2(data) & 0x7FFFFFFF) % partitions
    )
