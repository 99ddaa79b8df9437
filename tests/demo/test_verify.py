"""The exactly-once verdict of the main job, the fault suite and the soak run (demo.pipeline)."""

from __future__ import annotations

from collections import Counter

from demo.pipeline import delivery_errors, order_violations
from txn_log.topic_partition import TopicPartition


def test_a_record_committed_twice_upstream_is_expected_twice() -> None:
    """The soak's first report counted 103 "duplicates" that were records its workload had
    committed twice (same key and value from two producer generations), delivered twice."""
    expected = Counter({"a": 2, "b": 1})
    assert delivery_errors(expected, Counter({"a": 2, "b": 1})) == (0, 0, 0)


def test_extra_copies_missing_records_and_strangers_are_told_apart() -> None:
    expected = Counter({"a": 2, "b": 1, "c": 1})
    produced = Counter({"a": 3, "b": 1, "x": 2})  # one extra "a", no "c", two never committed
    assert delivery_errors(expected, produced) == (1, 1, 2)


def test_order_is_checked_per_key_with_repeated_records() -> None:
    tp_in, tp_out = TopicPartition("orders", 0), TopicPartition("orders_clean", 0)
    committed_in = {tp_in: [(b"k", b"a", 0), (b"k", b"b", 1), (b"k", b"a", 2), (b"j", b"z", 3)]}
    in_order = {tp_out: [(b"k", b"A", 0), (b"j", b"Z", 1), (b"k", b"B", 2), (b"k", b"A", 3)]}
    swapped = {tp_out: [(b"k", b"B", 0), (b"k", b"A", 1), (b"k", b"A", 2)]}
    assert order_violations(committed_in, in_order) == 0
    assert order_violations(committed_in, swapped) == 1
