"""Kafka's default partitioner for keyed records: murmur2 of the key bytes (DESIGN §5).

``partition = (murmur2(key) & 0x7fffffff) % partitions``, so keyed records land where a Kafka
producer would put them. Records without a key are spread round-robin by the caller.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit hash of ``data``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    body = length & ~3
    for i in range(0, body, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail == 3:
        h ^= data[body + 2] << 16
    if tail >= 2:
        h ^= data[body + 1] << 8
    if tail >= 1:
        h ^= data[body]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


_HASHES: dict[bytes, int] = {}
_HASHES_MAX = 1 << 16
"""Keys hashed lately (``murmur2(key) & 0x7fffffff``): keys repeat (a user, an order id), and
murmur2 in Python costs more than the rest of a send. Emptied when full, so it holds at most
65,536 keys; a dict's get and set are atomic under the GIL, so threads may share it."""


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``partitions``."""
    if type(key) is not bytes:  # a bytearray or memoryview: not hashable, not remembered
        return (murmur2(key) & 0x7FFFFFFF) % partitions
    positive = _HASHES.get(key)
    if positive is None:
        if len(_HASHES) >= _HASHES_MAX:
            _HASHES.clear()
        positive = _HASHES[key] = murmur2(key) & 0x7FFFFFFF
    return positive % partitions
