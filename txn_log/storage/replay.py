"""How batches in the log change a partition's producer state (P-10, P-24, B-01).

The partition log calls these with its lock held (appends) or its mutex held (catching up with
what other processes appended); they keep the producer-state rules out of the file handling.
"""

from __future__ import annotations

from txn_log.errors import CorruptRecordError
from txn_log.record.batch_header import HEADER_SIZE, BatchHeader
from txn_log.record.control import ControlRecord, ControlType, parse_control_record
from txn_log.record.varint import decode_varint, decode_varlong
from txn_log.storage.producer_append_info import AppendOrigin, CompletedTxn, ProducerAppendInfo
from txn_log.storage.producer_state import ProducerStateManager


def find_duplicate(state: ProducerStateManager, header: BatchHeader) -> tuple[int, int] | None:
    """(first, last) offsets of the batch ``header`` retries, if it is one of the last five."""
    if not header.has_producer_id:
        return None
    cached = state.find_duplicate_batch(header)
    return None if cached is None else (cached.first_offset, cached.last_offset)


def validate_data_batch(
    state: ProducerStateManager,
    header: BatchHeader,
    base_offset: int,
    origin: AppendOrigin = AppendOrigin.CLIENT,
) -> ProducerAppendInfo | None:
    """The validated change a client batch makes (None without a producer id); raises on
    a stale epoch, a sequence gap or a transaction-state error, changing nothing."""
    if not header.has_producer_id:
        return None
    append_info = state.prepare_update(header.producer_id, origin)
    append_info.append_data_batch(header, base_offset=base_offset)
    return append_info


def validate_marker(
    state: ProducerStateManager,
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    marker_offset: int,
    timestamp_ms: int,
) -> tuple[ProducerAppendInfo, CompletedTxn | None]:
    """The validated change a COMMIT/ABORT marker makes (B-01 step 1, C-23)."""
    append_info = state.prepare_update(producer_id, AppendOrigin.COORDINATOR)
    completed = append_info.append_end_txn_marker(
        control_type is ControlType.COMMIT,
        producer_epoch,
        coordinator_epoch,
        marker_offset,
        timestamp_ms,
    )
    return append_info, completed


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
