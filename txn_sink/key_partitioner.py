"""Kafka's default partitioner over whole Arrow key columns (DESIGN §5).

``partition = (murmur2(key) & 0x7fffffff) % partitions``, computed for every key of a column
at once with numpy uint32 arithmetic (which wraps like Java's int): one pass per 4-byte word
of the longest key, then the tail bytes and the final mix. Keys of one length (the common
case) are read as a ``(rows, words)`` matrix without any gather. Equal to the scalar
``txn_log.partitioner.murmur2`` for every key (tested); pure and thread-safe.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)
NO_PARTITION = -1


def _binary_parts(keys: Any) -> tuple[Any, Any, Any]:
    """``(data uint8, int64 starts, int64 lengths)`` of a binary or string array."""
    if keys.type != pa.binary():
        keys = keys.cast(pa.binary())
    count = len(keys)
    offsets = np.frombuffer(
        keys.buffers()[1], dtype=np.int32, count=count + 1, offset=4 * keys.offset
    )
    data_buffer = keys.buffers()[2]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, np.uint8)
    )
    starts = offsets[:-1].astype(np.int64)
    return data, starts, np.diff(offsets).astype(np.int64)


def _mix_word(h: Any, k: Any) -> Any:
    k = k * _M
    k ^= k >> np.uint32(24)
    k = k * _M
    return (h * _M) ^ k


def _words_uniform(data: Any, start: int, count: int, length: int) -> Any:
    """``(count, length // 4)`` little-endian words of ``count`` back-to-back keys."""
    words = length // 4
    block = data[start : start + count * length].reshape(count, length)
    return np.ascontiguousarray(block[:, : 4 * words]).view("<u4")


def _word_at(data: Any, positions: Any) -> Any:
    """The little-endian uint32 at each byte position."""
    out = data[positions].astype(np.uint32)
    for shift in (1, 2, 3):
        out |= data[positions + shift].astype(np.uint32) << np.uint32(8 * shift)
    return out


def _body(h: Any, data: Any, starts: Any, lengths: Any) -> Any:
    count = len(lengths)
    uniform = count and lengths.min() == lengths.max()
    if uniform and (np.diff(starts) == lengths[0]).all():
        words = _words_uniform(data, int(starts[0]), count, int(lengths[0]))
        for word in range(words.shape[1]):
            h = _mix_word(h, words[:, word])
        return h
    word_counts = lengths >> 2
    for word in range(int(word_counts.max()) if count else 0):
        active = np.flatnonzero(word_counts > word)
        h[active] = _mix_word(h[active], _word_at(data, starts[active] + 4 * word))
    return h


def murmur2_array(keys: Any) -> Any:
    """Kafka's ``Utils.murmur2`` of every key, as uint32 (nulls hash as empty keys)."""
    data, starts, lengths = _binary_parts(keys)
    h = _SEED ^ lengths.astype(np.uint32)
    h = _body(h, data, starts, lengths)
    tail = lengths & 3
    tail_start = starts + (lengths & ~3)
    for extra, shift in ((3, 16), (2, 8)):
        rows = np.flatnonzero(tail >= extra)
        h[rows] ^= data[tail_start[rows] + extra - 1].astype(np.uint32) << np.uint32(shift)
    rows = np.flatnonzero(tail >= 1)
    h[rows] = (h[rows] ^ data[tail_start[rows]].astype(np.uint32)) * _M
    h ^= h >> np.uint32(13)
    h = h * _M
    h ^= h >> np.uint32(15)
    return h


def partitions_for_keys(keys: Any, partitions: int) -> Any:
    """int64 partition of each key (Kafka's default partitioner); ``NO_PARTITION`` for nulls."""
    hashes = murmur2_array(keys)
    out = ((hashes & np.uint32(0x7FFFFFFF)) % np.uint32(partitions)).astype(np.int64)
    if keys.null_count:
        out[np.asarray(keys.is_null())] = NO_PARTITION
    return out
