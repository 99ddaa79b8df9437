"""The ``embedded`` backend: the commit protocol on a txnlog directory (DESIGN §3-5).

Writes skip the per-record producer: a task registers each partition with the coordinator
before its first write (C-16), encodes whole Arrow batches with the columnar codec, appends
them with its producer id, epoch and the partition's next sequence, and fsyncs the partitions
it wrote before it returns. The data stays invisible to read_committed readers until the
driver's ``commit_batch`` commits the micro-batch as one atomic commit of the coordinator
(``TransactionCoordinator.commit_transactions``: the ledger key is the sink id, the sequence
the batch id), whose single PREPARE record is the commit point (DESIGN §4).

The protocol's value types (``TxnRef``, ``LedgerEntry``) are its own: this module is the only
place they meet the engine's, and the engine knows nothing of sinks or batches.

Every process that opens a log directory is a peer (DESIGN §3): ``EmbeddedBackend.open``
keeps one ``Log`` per directory per process, so that a reused Spark Python worker does not
recover the partitions again for every task.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from commit_protocol.messages import LedgerEntry, PartitionWrite, TxnRef
from txn_log.errors import (
    ConcurrentTransactionsError,
    ConfigError,
    RecordTooLargeError,
    TopicAlreadyExistsError,
    TxnLogError,
)
from txn_log.log import FORMAT_FILE, Log
from txn_log.record.batch_header import Compression
from txn_log.storage.partition_log import PartitionLog
from txn_log.topic_partition import TopicPartition

_SEQUENCE_MODULUS = 1 << 31
_INIT_ATTEMPTS = 20
_INIT_BACKOFF_S = 0.05
_FLUSH_THREADS = 8
_LOGS: OrderedDict[Path, Log] = OrderedDict()
_LOGS_LOCK = threading.Lock()
_MAX_OPEN_LOGS = 16
"""Logs kept open per process; the least recently opened beyond this are closed (a reused
Python worker may write to many logs over its life, each holding file descriptors)."""


def ledger_key(sink_id: str) -> str:
    """The coordinator's ledger key of a sink: its id, unchanged (see ``EmbeddedBackend``)."""
    return sink_id


def missing_log_message(path: Path) -> str:
    return (
        f"no txnlog directory at {str(path)!r}; create the log and its topic with "
        f"`txnlog topics create {path} <topic> --partitions <n>`, or set the option "
        "createTopic=true"
    )


class EmbeddedTaskTransaction:
    """One task attempt's open transaction on an embedded log (see ``TaskTransaction``)."""

    def __init__(self, log: Log, ref: TxnRef, compression: Compression) -> None:
        self._log = log
        self._ref = ref
        self._compression = compression
        self._sequences: dict[TopicPartition, int] = {}
        self._counts: dict[TopicPartition, tuple[int, int]] = {}

    @property
    def transactional_id(self) -> str:
        return self._ref.transactional_id

    @property
    def producer_id(self) -> int:
        return self._ref.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._ref.producer_epoch

    def register(self, partitions: Iterable[TopicPartition]) -> None:
        """Add the partitions new to the transaction, in one coordinator request (C-16)."""
        new = sorted(set(partitions) - self._sequences.keys())
        if new:
            ref = self._ref
            self._log.coordinator.add_partitions(
                ref.transactional_id, ref.producer_id, ref.producer_epoch, new
            )
            self._sequences.update(dict.fromkeys(new, 0))

    def write(self, topic_partition: TopicPartition, records: Any) -> None:
        """Encode ``records`` into batches of at most the topic's ``max.message.bytes`` and
        append them; a partition not registered yet is registered first (C-16, C-38)."""
        if records.num_rows == 0:
            return
        self.register([topic_partition])
        plog = self._log.partition_log(topic_partition)
        self._append(plog, topic_partition, records, plog.config.max_message_bytes)

    def _append(self, plog: PartitionLog, tp: TopicPartition, records: Any, limit: int) -> None:
        """One batch, or several when the encoded batch would exceed ``limit`` bytes (F-09)."""
        from txn_log.record.codec import encode_batch

        batch = encode_batch(
            records,
            producer_id=self._ref.producer_id,
            producer_epoch=self._ref.producer_epoch,
            base_sequence=self._sequences[tp],
            transactional=True,
            compression=self._compression,
            now_ms=self._log.clock.time_ms(),
        )
        count = records.num_rows
        if len(batch) > limit:
            if count == 1:
                raise RecordTooLargeError(
                    f"{tp}: one record encodes to {len(batch)} bytes, more than the topic's "
                    f"max.message.bytes of {limit} (F-09)"
                )
            step = math.ceil(count / min(count, math.ceil(len(batch) * 1.1 / limit)))
            for start in range(0, count, step):
                self._append(plog, tp, records.slice(start, step), limit)
            return
        plog.append(batch)
        self._sequences[tp] = (self._sequences[tp] + count) % _SEQUENCE_MODULUS
        rows, batches = self._counts.get(tp, (0, 0))
        self._counts[tp] = (rows + count, batches + 1)

    def flush(self) -> None:
        """fdatasync every partition written, in parallel (fsync releases the GIL); then
        confirm this attempt still owns its transactional id (ProducerFencedError otherwise:
        a newer attempt or a timeout fenced it, and its message could never commit)."""
        logs = [self._log.partition_log(tp) for tp in self._counts]
        if len(logs) <= 1:
            for plog in logs:
                plog.flush()
        else:
            with ThreadPoolExecutor(max_workers=min(len(logs), _FLUSH_THREADS)) as pool:
                for future in [pool.submit(plog.flush) for plog in logs]:
                    future.result()
        ref = self._ref
        self._log.coordinator.check_producer(
            ref.transactional_id, ref.producer_id, ref.producer_epoch
        )

    def written(self) -> tuple[PartitionWrite, ...]:
        return tuple(
            PartitionWrite(tp.topic, tp.partition, rows, batches)
            for tp, (rows, batches) in sorted(self._counts.items())
        )

    def abort(self) -> None:
        if not self._sequences:  # nothing registered: the coordinator holds nothing open
            return
        ref = self._ref
        # fenced or timed out meanwhile: the newer owner or the timeout aborts it
        with contextlib.suppress(TxnLogError):
            self._log.coordinator.end_txn(
                ref.transactional_id, ref.producer_id, ref.producer_epoch, commit=False
            )


class EmbeddedBackend:
    """``LogBackend`` on one txnlog directory. Thread-safe; one per directory per process."""

    def __init__(self, log: Log) -> None:
        self.log = log

    @classmethod
    def open(cls, path: str | Path, *, create: bool = False) -> EmbeddedBackend:
        """The backend of the log at ``path`` (cached per process). Without ``create`` a
        missing log raises ConfigError saying how to create it."""
        root = Path(path).expanduser().resolve()
        with _LOGS_LOCK:
            log = _LOGS.get(root)
            if log is None:
                if not create and not (root / FORMAT_FILE).is_file():
                    raise ConfigError(missing_log_message(root))
                log = _LOGS[root] = Log.open(root)
                while len(_LOGS) > _MAX_OPEN_LOGS:
                    _LOGS.popitem(last=False)[1].close()
            _LOGS.move_to_end(root)
            return cls(log)

    # --- topics --------------------------------------------------------------------------------

    def partition_count(self, topic: str) -> int:
        return len(self.log.partitions(topic))

    def topic_exists(self, topic: str) -> bool:
        return topic in self.log.topics()

    def create_topic(self, topic: str, partitions: int) -> None:
        with contextlib.suppress(TopicAlreadyExistsError):  # created concurrently: fine
            self.log.create_topic(topic, partitions)

    def max_batch_bytes(self, topic: str) -> int:
        return self.log.topic_config(topic).max_message_bytes

    # --- tasks ---------------------------------------------------------------------------------

    def begin_transaction(
        self, transactional_id: str, timeout_ms: int, compression: str
    ) -> EmbeddedTaskTransaction:
        codec = Compression.parse(compression)
        producer_id, epoch = self._init_producer_id(transactional_id, timeout_ms)
        ref = TxnRef(transactional_id, producer_id, epoch)
        return EmbeddedTaskTransaction(self.log, ref, codec)

    def _init_producer_id(self, transactional_id: str, timeout_ms: int) -> tuple[int, int]:
        for _ in range(_INIT_ATTEMPTS - 1):
            try:
                return self.log.coordinator.init_producer_id(transactional_id, timeout_ms)
            except ConcurrentTransactionsError:  # a peer is completing it: retry (T10)
                time.sleep(_INIT_BACKOFF_S)
        return self.log.coordinator.init_producer_id(transactional_id, timeout_ms)

    # --- the ledger and the batch commit -------------------------------------------------------
    # A sink's micro-batches are atomic commits of the log's coordinator (DESIGN §4): the
    # ledger key is the sink id itself and the sequence is Spark's batch id, which only grows
    # per sink as the coordinator requires. The sink id must stay the key as it is: logs
    # written before carry it so, and a restarted query must find its ledger.

    def is_batch_committed(self, sink_id: str, batch_id: int) -> bool:
        return self.log.coordinator.ledger_has(ledger_key(sink_id), batch_id)

    def last_committed_batch(self, sink_id: str) -> int | None:
        entry = self.log.coordinator.ledger_entry(ledger_key(sink_id))
        return None if entry is None else entry.sequence

    def ledgers(self) -> tuple[LedgerEntry, ...]:
        return tuple(
            LedgerEntry(
                entry.ledger_key,
                entry.sequence,
                tuple(
                    TxnRef(t.transactional_id, t.producer_id, t.producer_epoch)
                    for t in entry.transactions
                ),
                entry.group_id,
                entry.offsets,
                entry.timestamp_ms,
            )
            for entry in self.log.coordinator.ledgers()
        )

    def commit_batch(
        self,
        sink_id: str,
        batch_id: int,
        transactions: Sequence[TxnRef],
        group_id: str | None,
        offsets: Sequence[tuple[str, int, int]],
    ) -> bool:
        return self.log.coordinator.commit_transactions(
            ledger_key(sink_id),
            batch_id,
            list(transactions),
            group_id=group_id,
            offsets=list(offsets),
        )

    def open_transactions(self, prefix: str) -> list[str]:
        return [md.transactional_id for md in self.log.coordinator.open_transactions(prefix)]

    def abort_transaction(self, transactional_id: str) -> bool:
        return self.log.coordinator.abort_transaction(transactional_id)

    def committed_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        committed = self.log.committed(group_id, partitions)
        return {tp: None if om is None else om.offset for tp, om in committed.items()}
