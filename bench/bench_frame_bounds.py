"""What checking a request frame's bounds (``txn_wire.frame_bounds``, issue 24) costs on the
hot path, beside decoding it with kio as ``codec.decode_request`` did before the check.

For typical Produce and Fetch requests (librdkafka's flexible versions and the legacy ones
kafka-python and aiokafka send) and a Metadata request, prints microseconds per call of: the
walk alone, kio's decode alone (header, body, plain data: the old ``decode_request``), and
the new ``decode_request`` (both), and the walk's share. Measured in one run, best of 5
repeats. Never asserts.

    .venv/bin/python bench/bench_frame_bounds.py
"""

from __future__ import annotations

import timeit
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema
from kio.serial import entity_reader

from txn_log.record.codec import encode_records
from txn_wire.codec import LENGTH, decode_request, encode_request, to_plain
from txn_wire.frame_bounds import check_request

NOW = 1_700_000_000_000
BATCH = encode_records([(None, b"v" * 100, NOW, ()) for _ in range(150)], now_ms=NOW)  # ~16 KiB


def produce(version: int, topics: int, partitions: int) -> bytes:
    data = [
        {
            "name": f"topic-{t}",
            "partition_data": [{"index": p, "records": BATCH} for p in range(partitions)],
        }
        for t in range(topics)
    ]
    body = {"transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": data}
    return encode_request(0, version, 1, body)


def fetch(version: int, topics: int, partitions: int) -> bytes:
    wanted = [
        {
            "topic": f"topic-{t}",
            "partitions": [
                {"partition": p, "fetch_offset": 1000, "partition_max_bytes": 1 << 20}
                for p in range(partitions)
            ],
        }
        for t in range(topics)
    ]
    body = {"max_wait": 500, "min_bytes": 1, "isolation_level": 1, "topics": wanted}
    return encode_request(1, version, 1, body)


CASES: dict[str, bytes] = {
    "Produce v9, 1 topic x 1 partition, 16 KiB": produce(9, 1, 1),
    "Produce v9, 2 topics x 8 partitions, 256 KiB": produce(9, 2, 8),
    "Produce v7 (legacy), 1 x 1, 16 KiB": produce(7, 1, 1),
    "Fetch v12, 1 topic x 2 partitions": fetch(12, 1, 2),
    "Fetch v12, 10 topics x 10 partitions": fetch(12, 10, 10),
    "Fetch v11 (legacy), 1 x 2": fetch(11, 1, 2),
    "Metadata v12, 1 topic": encode_request(3, 12, 1, {"topics": [{"name": "topic-0"}]}),
}


def old_decode(frame: bytes) -> Any:
    """``decode_request`` before the bounds check: kio's readers, then plain data."""
    api_key, api_version = int.from_bytes(frame[:2], "big"), int.from_bytes(frame[2:4], "big")
    schema = load_request_schema(api_key, api_version)
    header, size = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, size)
    return header.client_id, to_plain(body)


def best_us(call: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6


def main() -> None:
    print(f"{'request':46} {'bytes':>7} {'walk us':>8} {'kio us':>8} {'new us':>8} {'walk %':>7}")
    for name, prefixed in CASES.items():
        frame = prefixed[LENGTH.size :]
        schema = load_request_schema(
            int.from_bytes(frame[:2], "big"), int.from_bytes(frame[2:4], "big")
        )
        number = 2000
        walk = best_us(lambda f=frame, s=schema: check_request(s, f), number)
        old = best_us(lambda f=frame: old_decode(f), number)
        new = best_us(lambda f=frame: decode_request(f), number)
        share = 100 * walk / old
        print(f"{name:46} {len(frame):7} {walk:8.1f} {old:8.1f} {new:8.1f} {share:6.0f}%")


if __name__ == "__main__":
    main()
