"""Building compacted partitions for the cleaner tests: keyed batches, transactions, reads."""

from __future__ import annotations

from pathlib import Path

from txn_log.clock import ManualClock
from txn_log.record.codec import encode_records, iter_records
from txn_log.record.control import ControlType
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.partition_reader import PartitionReader
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("compacted", 0)
COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.0"}


def open_compacted(path: Path, clock: ManualClock, **extra: str) -> PartitionLog:
    return PartitionLog.open(path, TP, TopicConfig.from_mapping({**COMPACT, **extra}), clock=clock)


def keyed(
    pairs: list[tuple[bytes, bytes | None]],
    clock: ManualClock,
    *,
    producer_id: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
) -> bytes:
    return encode_records(
        [(key, value, clock.time_ms(), ()) for key, value in pairs],
        now_ms=clock.time_ms(),
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )


def end_txn(log: PartitionLog, producer_id: int, epoch: int, *, commit: bool) -> None:
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    log.append_marker(kind, producer_id=producer_id, producer_epoch=epoch, coordinator_epoch=0)


def committed_records(
    log: PartitionReader, start: int = 0
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record read_committed would deliver from ``start`` (the
    log start if later) to the LSO, in offset order; ``log`` a writer or a lock-free reader."""
    from txn_log.consumer.read_committed import AbortedTxnFilter

    end = log.last_stable_offset
    start = max(start, log.log_start_offset)
    aborted = AbortedTxnFilter(log.collect_aborted_txns(start, end))
    out = []
    for header, batch in log.read(start, end):
        if header.is_control or aborted.is_aborted(header):
            continue
        out += [(r.offset, r.key, r.value) for r in iter_records(batch) if r.offset >= start]
    return out


def latest_per_key(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for offset, key, _ in records:
        if key is not None:
            latest[key] = offset
    return latest
