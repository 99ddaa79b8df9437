"""Group offsets in ``__consumer_offsets`` (§5 of the checklist: O-01..O-07).

Records use Kafka's own offset-commit layout, so its tools can read them:

    key   (OffsetCommitKey v1):   version int16 = 1 | group string | topic string | partition int32
    value (OffsetCommitValue v3): version int16 = 3 | offset int64 | leader_epoch int32
                                  | metadata string | commit_timestamp int64
    a null value deletes the offset; strings are int16 length + UTF-8

Plain commits are ordinary appends. Transactional commits (``send_offsets_to_transaction``)
are appended as *transactional* batches of the committing producer (origin COORDINATOR: epoch
checked, no sequence, O-03), so they become visible exactly when the transaction's COMMIT
marker lands and never after an ABORT (O-04, O-05): ``committed`` reads the partition with
read_committed, which gives that for free. Each process caches what it has read.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from txn_log.errors import ConfigError, CorruptRecordError
from txn_log.read_committed import IsolationLevel
from txn_log.storage.producer_append_info import AppendOrigin
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC
from txn_log.topic_partition import TopicPartition

if TYPE_CHECKING:
    from txn_log.log import Log

OFFSETS_PARTITION = TopicPartition(CONSUMER_OFFSETS_TOPIC, 0)
KEY_VERSION = 1
VALUE_VERSION = 3
_INT16 = struct.Struct(">h")
_PARTITION = struct.Struct(">i")
_VALUE_FIXED = struct.Struct(
    ">"
    "h"  # version
    "q"  # offset
    "i"  # leader_epoch
)
_TIMESTAMP = struct.Struct(">q")  # commit_timestamp


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed position: ``offset`` is the *next* offset to read (exclusive end)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def _read_string(buf: bytes, position: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(buf, position)
    position += _INT16.size
    if length < 0 or position + length > len(buf):
        raise CorruptRecordError(f"offset commit record: bad string length {length}")
    return buf[position : position + length].decode(), position + length


def encode_key(group_id: str, topic_partition: TopicPartition) -> bytes:
    return (
        _INT16.pack(KEY_VERSION)
        + _string(group_id)
        + _string(topic_partition.topic)
        + _PARTITION.pack(topic_partition.partition)
    )


def encode_value(committed: OffsetAndMetadata, commit_timestamp_ms: int) -> bytes:
    return (
        _VALUE_FIXED.pack(VALUE_VERSION, committed.offset, committed.leader_epoch)
        + _string(committed.metadata)
        + _TIMESTAMP.pack(commit_timestamp_ms)
    )


def decode_record(
    key: bytes | None, value: bytes | None
) -> tuple[str, TopicPartition, OffsetAndMetadata | None] | None:
    """(group, partition, offset or None for a deletion); None for other record kinds (Kafka
    keeps group metadata, key version 2, in the same topic)."""
    if key is None or len(key) < _INT16.size:
        raise CorruptRecordError("offset commit record without a key")
    (version,) = _INT16.unpack_from(key, 0)
    if version not in (0, 1):
        return None
    try:
        group_id, position = _read_string(key, _INT16.size)
        topic, position = _read_string(key, position)
        (partition,) = _PARTITION.unpack_from(key, position)
        tp = TopicPartition(topic, partition)
        if value is None:
            return group_id, tp, None
        _, offset, leader_epoch = _VALUE_FIXED.unpack_from(value, 0)
        metadata, _ = _read_string(value, _VALUE_FIXED.size)
    except struct.error as error:
        raise CorruptRecordError(f"truncated offset commit record: {error}") from None
    return group_id, tp, OffsetAndMetadata(offset, metadata, leader_epoch)


def normalize_offsets(
    offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Accept plain ints or OffsetAndMetadata; refuse negative offsets naming the partition."""
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, committed in offsets.items():
        om = committed if isinstance(committed, OffsetAndMetadata) else OffsetAndMetadata(committed)
        if not isinstance(om.offset, int) or om.offset < 0:
            raise ConfigError(f"offset {om.offset!r} for {tp} must be an integer ≥ 0")
        out[tp] = om
    return out


def validate_group_id(group_id: object) -> str:
    if not isinstance(group_id, str) or not group_id:
        raise ConfigError(f"group id must be a non-empty string, got {group_id!r}")
    return group_id


class GroupOffsetStore:
    """Reads and writes group offsets of one log. Thread-safe."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self._mutex = threading.Lock()
        self._applied = 0  # offsets partition position read so far (exclusive)
        self._cache: dict[tuple[str, TopicPartition], OffsetAndMetadata] = {}

    def encode_batch(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        transactional: bool = False,
    ) -> bytes:
        """One batch holding an offset-commit record per partition."""
        from txn_log.record.codec import encode_records

        now = self._log.clock.time_ms()
        records = [
            (encode_key(group_id, tp), encode_value(om, now), now, ())
            for tp, om in sorted(offsets.items())
        ]
        return encode_records(
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=transactional,
            now_ms=now,
        )

    def commit(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        """Commit outside any transaction: visible at once (durable before returning)."""
        validate_group_id(group_id)
        normalized = normalize_offsets(offsets)
        if normalized:
            plog = self._log.partition_log(OFFSETS_PARTITION)
            plog.append(
                self.encode_batch(group_id, normalized), sync=True, origin=AppendOrigin.COORDINATOR
            )

    def committed(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where it has none), read_committed."""
        validate_group_id(group_id)
        with self._mutex:
            self._catch_up()
            return {tp: self._cache.get((group_id, tp)) for tp in partitions}

    def groups(self) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """Every group with its committed offsets."""
        with self._mutex:
            self._catch_up()
            out: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
            for (group_id, tp), om in sorted(self._cache.items()):
                out.setdefault(group_id, {})[tp] = om
            return out

    def _catch_up(self) -> None:
        consumer = self._log.consumer(IsolationLevel.READ_COMMITTED)
        end = consumer.end_offset(OFFSETS_PARTITION)
        if end <= self._applied:
            return
        for _, records in consumer.iter_record_batches(OFFSETS_PARTITION, self._applied, end):
            for key, value in zip(
                records.column("key").to_pylist(), records.column("value").to_pylist(), strict=True
            ):
                decoded = decode_record(key, value)
                if decoded is None:
                    continue
                group_id, tp, om = decoded
                if om is None:
                    self._cache.pop((group_id, tp), None)
                else:
                    self._cache[(group_id, tp)] = om
        self._applied = end
