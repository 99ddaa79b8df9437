"""The exactly-once verdict of the main job, the fault suite and the soak run (demo.pipeline)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from demo.pipeline import (
    INPUT,
    OUTPUT,
    create_topics,
    delivery_errors,
    holds_so_far,
    order_violations,
    verify_so_far,
)
from txn_log.log import Log
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


def _log_with(tmp_path: Path, inputs: list[bytes], outputs: list[bytes]) -> Path:
    """A real log: ``inputs`` committed to ``orders``, ``outputs`` to ``orders_clean``."""
    log_dir = tmp_path / "log"
    create_topics(log_dir)
    with Log.open(log_dir) as log:
        producer = log.producer("feed")
        producer.init_transactions()
        for topic, values in ((INPUT, inputs), (OUTPUT, outputs)):
            producer.begin_transaction()
            for value in values:
                producer.send(topic, value, key=b"k")
            producer.commit_transaction()
    return log_dir


def test_the_live_check_allows_a_lagging_output_and_nothing_else(tmp_path: Path) -> None:
    """The soak's check after every kill: output may lag, never repeat or invent a record."""
    cases = {
        "lagging": ([b"a", b"b", b"c"], [b"A", b"B"], True),
        "duplicate": ([b"a", b"b"], [b"A", b"A"], False),
        "stranger": ([b"a"], [b"A", b"X"], False),
        "reordered": ([b"a", b"b"], [b"B", b"A"], False),
    }
    for name, (inputs, outputs, holds) in cases.items():
        report = verify_so_far(_log_with(tmp_path / name, inputs, outputs))
        assert holds_so_far(report) is holds, (name, report)
        assert report.missing == len(inputs) - len(set(outputs) & {v.upper() for v in inputs})
