"""Replaying batches already in the log into a partition's producer state (P-20, P-24, B-01).

What a batch in the log does to producer state, without validation (origin REPLAY): the loader
rebuilds the state from the newest snapshot plus the log after it (``replay_log``), and a
partition reader applies what other processes appended since it last looked (``apply_at``).
Appends validate a new batch before writing it (``PartitionLog``, with ``ProducerAppendInfo``);
nothing here refuses a batch. Callers hold the partition reader's mutex (the state is not
thread-safe).
"""

from __future__ import annotations

from collections.abc import Sequence

from txn_log.errors import CorruptRecordError
from txn_log.record.batch_header import HEADER_SIZE, BatchHeader
from txn_log.record.control import ControlRecord, ControlType, parse_control_record
from txn_log.record.varint import decode_varint, decode_varlong
from txn_log.storage.log_segments import iter_headers
from txn_log.storage.producer_append_info import AppendOrigin
from txn_log.storage.producer_state import ProducerStateManager
from txn_log.storage.segment import LogSegment


def replay_log(
    state: ProducerStateManager,
    segments: Sequence[LogSegment],
    start_offset: int,
    end_offset: int,
) -> None:
    """Rebuild ``state`` from the log in [start_offset, end_offset) (P-24): headers only, plus
    the bytes of control batches (markers); the state then ends at ``end_offset``."""
    for segment, position, header in iter_headers(segments, start_offset, end_offset):
        apply_at(state, segment, position, header)
    state.update_map_end_offset(end_offset)


def apply_at(
    state: ProducerStateManager, segment: LogSegment, position: int, header: BatchHeader
) -> None:
    """Apply the batch at ``position`` of ``segment`` (whose header was read there)."""
    batch = segment.read_bytes(position, header.size_in_bytes) if header.is_control else b""
    apply_batch(state, header, batch)


def apply_batch(
    state: ProducerStateManager, header: BatchHeader, batch: memoryview | bytes
) -> None:
    """Apply a batch already in the log, without validation (origin REPLAY, P-20)."""
    if not header.has_producer_id:
        return
    append_info = state.prepare_update(header.producer_id, AppendOrigin.REPLAY)
    if not header.is_control:
        append_info.append_data_batch(header)
        state.update(append_info)
        return
    marker = read_control_record(header, batch)
    if marker.control_type not in (ControlType.COMMIT, ControlType.ABORT):
        state.update(append_info)
        return
    completed = append_info.append_end_txn_marker(
        marker.control_type is ControlType.COMMIT,
        header.producer_epoch,
        marker.coordinator_epoch,
        header.base_offset,
        header.max_timestamp,
    )
    state.update(append_info)
    if completed is not None:
        state.complete_txn(completed)


def read_control_record(header: BatchHeader, batch: memoryview | bytes) -> ControlRecord:
    """The one control record of an (uncompressed) control batch, parsed from its bytes."""
    if header.records_count != 1 or header.compression != 0:
        raise CorruptRecordError(
            f"control batch at offset {header.base_offset} has {header.records_count} records "
            f"and codec {header.compression.name}; markers are one uncompressed record"
        )
    view = memoryview(batch)
    _, position = decode_varint(view, HEADER_SIZE)  # record length
    position += 1  # record attributes
    _, position = decode_varlong(view, position)  # timestamp delta
    _, position = decode_varint(view, position)  # offset delta
    key_length, position = decode_varint(view, position)
    key = bytes(view[position : position + key_length]) if key_length >= 0 else None
    position += max(key_length, 0)
    value_length, position = decode_varint(view, position)
    value = bytes(view[position : position + value_length]) if value_length >= 0 else None
    return parse_control_record(key, value)


def record_timestamps(batch: memoryview) -> list[tuple[int, int]]:
    """(offset, timestamp ms) of every record of a data batch, for timestamp lookups (T-17)."""
    from txn_log.record.codec import decode_batch

    records = decode_batch(batch, verify_crc=False).records
    offsets = records.column("offset").to_pylist()
    timestamps = records.column("timestamp").to_pylist()
    return list(zip(offsets, timestamps, strict=True))
