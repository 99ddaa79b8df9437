"""``Consumer``: read a partition at an isolation level, as records or as Arrow batches.

read_committed (the default, as in librdkafka, CFG-05) never reads at or past the last stable
offset, drops aborted transactions batch by batch (see ``read_committed``) and never returns
control records; read_uncommitted reads to the log end and returns aborted data too, but still
no control records (F-32). Delivery is always in offset order (G-05); offsets have gaps where
markers sit.

``ReadPlan`` is the one answer to "where may a read of this partition end now, and which
aborted transactions does it carry" (B-05, B-07, B-12), for every reader of the log: this
consumer, ``txnlog serve``'s Fetch and ListOffsets, and the Spark source's planning. It lets
the coordinator abort timed-out transactions first (C-25), reads the LSO and the high
watermark in that order (so LSO ≤ high watermark), and collects aborted transactions from the
partition it planned on, refusing them (UnknownTopicIdError) when the topic was deleted or
re-created meanwhile, since the index may have gone with it.

A read is stateless: every call re-plans from the files, so seeking (B-14) is simply calling
``read`` with another start offset. Readers take no lock (DESIGN §3).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from txn_log.consumer.read_committed import AbortedTxnFilter, IsolationLevel
from txn_log.coordinator.transaction_coordinator import TransactionCoordinator
from txn_log.errors import ConfigError, UnknownTopicIdError
from txn_log.log_dir.log_manager import LogManager
from txn_log.record.batch_header import BatchHeader, TimestampType
from txn_log.storage.partition_reader import PartitionReader
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_partition import TopicPartition

Headers = tuple[tuple[str, "bytes | None"], ...]


@dataclass(frozen=True)
class ConsumerRecord:
    """One delivered record. ``timestamp_ms`` is ms since the epoch (CreateTime or
    LogAppendTime, per ``timestamp_type``); headers are (str, bytes | None) pairs."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int
    timestamp_type: TimestampType


@dataclass(frozen=True)
class ReadPlan:
    """Where a read of one partition may go, planned once (module docstring). Offsets:
    ``start`` inclusive, ``end`` exclusive (≤ ``last_stable_offset`` under read_committed, ≤
    ``high_watermark`` otherwise); ``last_stable_offset`` ≤ ``high_watermark``."""

    reader: PartitionReader
    isolation_level: IsolationLevel
    start: int
    end: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int

    def aborted_txns(self, start: int | None = None, end: int | None = None) -> list[AbortedTxn]:
        """The aborted transactions intersecting ``[start, end)`` (the plan's range by
        default), which a read_committed reader must filter (B-12 step 4); none under
        read_uncommitted. UnknownTopicIdError when the partition planned on was deleted (or
        re-created) since: its index may be gone, so nothing may be delivered from it."""
        if self.isolation_level is not IsolationLevel.READ_COMMITTED:
            return []
        first = self.start if start is None else start
        last = self.end if end is None else end
        return collect_aborted_txns(self.reader, first, last)


def collect_aborted_txns(reader: PartitionReader, start: int, end: int) -> list[AbortedTxn]:
    """The aborted transactions of ``reader``'s partition intersecting ``[start, end)`` (B-12
    step 4); UnknownTopicIdError when the partition was deleted (or re-created) while they
    were collected: its index may have gone with it."""
    if start >= end:
        return []
    aborted = reader.collect_aborted_txns(start, end)
    if not reader.is_current():
        raise UnknownTopicIdError(
            f"{reader.topic_partition}: the topic was deleted while offsets [{start}, {end}) "
            "were being read"
        )
    return aborted


@dataclass
class ReadStats:
    """What one read went through: records delivered, aborted records skipped, markers."""

    records: int = 0
    aborted_records_skipped: int = 0
    control_records_skipped: int = 0
    batches: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class Consumer:
    """Reads partitions of one log (``log_manager``'s); asks ``coordinator`` to abort timed-out
    transactions before it plans a read_committed read. Thread-safe; holds no position between
    calls."""

    def __init__(
        self,
        log_manager: LogManager,
        coordinator: TransactionCoordinator,
        isolation_level: str | IsolationLevel = IsolationLevel.READ_COMMITTED,
    ) -> None:
        self._log = log_manager
        self._coordinator = coordinator
        self.isolation_level = IsolationLevel.parse(isolation_level)

    # --- offsets ---------------------------------------------------------------------------------

    def end_offset(self, topic_partition: TopicPartition) -> int:
        """Exclusive end a read can reach now: the LSO under read_committed (B-07), else the
        high watermark (``read_plan``)."""
        return self._plan_end(self._log.partition_reader(topic_partition))[0]

    def read_plan(
        self, topic_partition: TopicPartition, start_offset: int, end_offset: int | None = None
    ) -> ReadPlan:
        """The plan of a read from ``start_offset`` (OffsetOutOfRangeError outside the log)
        to ``end_offset`` capped at the end a read can reach (module docstring).

        Under read_committed, transactions past their timeout are aborted first (rate-limited,
        C-25, C-26: planning a read is one of the places expiry happens, DESIGN §4). Whether or
        not this partition shows one open: a transaction whose only batch here was lost to a
        torn tail is open at the coordinator alone, and its ABORT marker must land before the
        end is read, not after a reader planned up to it.
        """
        reader = self._log.partition_reader(topic_partition)
        log_start = reader.log_start_offset  # first: the LSO read after it is not below it
        readable_end, last_stable, high_watermark = self._plan_end(reader)
        reader.check_offset(start_offset)
        end = readable_end if end_offset is None else min(end_offset, readable_end)
        return ReadPlan(
            reader,
            self.isolation_level,
            start_offset,
            end,
            log_start,
            high_watermark,
            last_stable,
        )

    def aborted_txns(
        self, topic_partition: TopicPartition, start_offset: int, end_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions a read of ``[start_offset, end_offset)`` planned now must
        filter (none under read_uncommitted), as ``ReadPlan.aborted_txns``; for a driver that
        planned the range itself (the Spark source), whose executors read it later."""
        if self.isolation_level is not IsolationLevel.READ_COMMITTED:
            return []
        reader = self._log.partition_reader(topic_partition)
        return collect_aborted_txns(reader, start_offset, end_offset)

    def _plan_end(self, reader: PartitionReader) -> tuple[int, int, int]:
        """(readable end, LSO, high watermark), read in that order: LSO ≤ high watermark."""
        committed = self.isolation_level is IsolationLevel.READ_COMMITTED
        if committed:
            self._coordinator.maybe_abort_timed_out()
        last_stable = reader.last_stable_offset
        high_watermark = reader.high_watermark  # after: appends only move both up
        return (last_stable if committed else high_watermark), last_stable, high_watermark

    def start_offset(self, topic_partition: TopicPartition) -> int:
        """First offset still in the log (inclusive)."""
        return self._log.partition_reader(topic_partition).log_start_offset

    def offset_for_timestamp(
        self, topic_partition: TopicPartition, timestamp_ms: int
    ) -> int | None:
        """First offset with a record timestamp ≥ ``timestamp_ms`` (KIP-32), capped at the end
        a read can reach (T-17); None when every record is older."""
        offset = self._log.partition_reader(topic_partition).offset_for_timestamp(timestamp_ms)
        if offset is None:
            return None
        return min(offset, self.end_offset(topic_partition))

    # --- reading ---------------------------------------------------------------------------------

    def read(
        self,
        topic_partition: TopicPartition,
        start_offset: int,
        end_offset: int | None = None,
        max_records: int | None = None,
    ) -> list[ConsumerRecord]:
        """Records in [start_offset, min(end_offset, end a read can reach)), in offset order,
        at most ``max_records`` of them (None: no limit; 0: none, the range still checked).

        A range that ends on a marker or inside an aborted transaction simply yields fewer
        records; it never waits. ConfigError for a ``max_records`` that is not None or an
        int >= 0.
        """
        _check_max_records(max_records)
        out: list[ConsumerRecord] = []
        tp = topic_partition
        if max_records == 0:
            self.read_plan(tp, start_offset, end_offset)  # the same errors as any other read
            return out
        for header, records in self.iter_record_batches(tp, start_offset, end_offset):
            columns = records.to_pydict()
            timestamp_type = header.timestamp_type
            for i, offset in enumerate(columns["offset"]):
                headers = tuple((h["key"], h["value"]) for h in columns["headers"][i] or ())
                out.append(
                    ConsumerRecord(
                        tp.topic,
                        tp.partition,
                        offset,
                        columns["key"][i],
                        columns["value"][i],
                        headers,
                        columns["timestamp"][i],
                        timestamp_type,
                    )
                )
                if max_records is not None and len(out) >= max_records:
                    return out
        return out

    def iter_record_batches(
        self,
        topic_partition: TopicPartition,
        start_offset: int,
        end_offset: int | None = None,
        stats: ReadStats | None = None,
    ) -> Iterator[tuple[BatchHeader, Any]]:
        """(header, Arrow records of the codec's RECORD_SCHEMA) for each deliverable batch,
        sliced to the range. Memory: one decoded log batch at a time."""
        plan = self.read_plan(topic_partition, start_offset, end_offset)
        if plan.start >= plan.end:
            return
        aborted = plan.aborted_txns()
        yield from iter_deliverable_batches(plan.reader, plan.start, plan.end, aborted, stats)


def _check_max_records(max_records: object) -> None:
    if max_records is None:
        return
    if not isinstance(max_records, int) or isinstance(max_records, bool) or max_records < 0:
        raise ConfigError(
            f"max_records must be None or an int >= 0 (0 reads nothing), got {max_records!r}"
        )


def iter_deliverable_batches(
    plog: PartitionReader,
    start: int,
    end: int,
    aborted_txns: Iterable[AbortedTxn],
    stats: ReadStats | None = None,
) -> Iterator[tuple[BatchHeader, Any]]:
    """Decoded data batches of [start, end) minus control batches and the batches of
    ``aborted_txns`` (empty for read_uncommitted), sliced to the range.

    The caller planned ``end`` (≤ LSO for read_committed) and the aborted list; executors call
    this directly with what the driver planned, so they never scan for markers (DESIGN §6).
    """
    from txn_log.record.codec import decode_batch
    from txn_log.record.compression import records_limit

    aborted = AbortedTxnFilter(aborted_txns)
    max_records_bytes = records_limit(plog.refresh_config().max_message_bytes)
    stats = stats if stats is not None else ReadStats()
    for header, data in plog.read(start, end):
        stats.batches += 1
        overlap = min(header.next_offset, end) - max(header.base_offset, start)
        if header.is_control:
            stats.control_records_skipped += overlap
            continue
        if aborted.is_aborted(header):
            stats.aborted_records_skipped += overlap
            continue
        records = decode_batch(data, max_records_bytes=max_records_bytes).records
        if header.base_offset < start or header.next_offset > end:
            records = _slice_offsets(records, start, end)
        stats.records += records.num_rows
        if records.num_rows:
            yield header, records


def _slice_offsets(records: Any, start: int, end: int) -> Any:
    """Rows of ``records`` with start ≤ offset < end (offsets ascend within a batch)."""
    import pyarrow.compute as pc

    offsets = records.column("offset")
    mask = pc.and_(pc.greater_equal(offsets, start), pc.less(offsets, end))
    return records.filter(mask)
