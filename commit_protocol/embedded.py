"""The ``embedded`` backend: the commit protocol on a txnlog directory (DESIGN §3-5).

A task writes through the engine's transactional producer (``Producer.send_batch``: whole
Arrow batches, the producer's buffers, partition registration (C-16), sequences, the split
rule) and prepares its transaction before it returns (``Producer.prepare_transaction``: every
batch appended and fsynced, the instance still the owner). The data stays invisible to
read_committed readers until the driver's ``commit_batch`` commits the micro-batch as one
atomic commit of the coordinator (``TransactionCoordinator.commit_transactions``: the ledger
key is the sink id, the sequence the batch id), whose single PREPARE record is the commit
point (DESIGN §4).

The driver commits the tasks by the engine's own ``TxnRef``s; this module is the only place
the protocol's sinks and batches meet the engine's ledger keys and sequences, and the engine
knows nothing of sinks or batches.

Every process that opens a log directory is a peer (DESIGN §3): ``EmbeddedBackend.open``
keeps one ``Log`` per directory per process, so that a reused Spark Python worker does not
recover the partitions again for every task.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from commit_protocol.backend import AtomicCommitBackend
from commit_protocol.messages import LedgerEntry, PartitionWrite
from txn_log.coordinator.txn_ref import TxnRef
from txn_log.errors import ConfigError, TopicAlreadyExistsError, TxnLogError
from txn_log.log import FORMAT_FILE, Log
from txn_log.producer.producer import DEFAULT_BATCH_SIZE, DEFAULT_BUFFER_MEMORY, Producer
from txn_log.topic_partition import TopicPartition

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
    """One task attempt's open transaction on an embedded log (see ``TaskTransaction``): a
    thin adapter over the engine's transactional ``Producer``, which buffers the task's Arrow
    batches, registers partitions, numbers and appends the batches, and prepares (KIP-939)
    without committing."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    @property
    def transactional_id(self) -> str:
        return self._producer.transactional_id or ""

    @property
    def producer_id(self) -> int:
        return self._producer.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer.producer_epoch

    @property
    def peak_buffered_bytes(self) -> int:
        return self._producer.peak_buffered_bytes

    def register(self, partitions: Iterable[TopicPartition]) -> None:
        """Add ``partitions`` to the transaction now, in one coordinator request (C-16)."""
        self._producer.register_partitions(partitions)

    def write(self, topic_partition: TopicPartition, records: Any) -> None:
        """Register the partition if it is new to the transaction (as Kafka's producer adds a
        partition when a record is sent to it, whatever it buffers), then send."""
        self._producer.register_partitions([topic_partition])
        self._producer.send_batch(topic_partition, records)

    def flush(self) -> None:
        self._producer.prepare_transaction()

    def written(self) -> tuple[PartitionWrite, ...]:
        return tuple(
            PartitionWrite(tp.topic, tp.partition, done.records, done.batches)
            for tp, done in self._producer.transaction_writes().items()
        )

    def abort(self) -> None:
        # fenced or timed out meanwhile: the newer owner or the timeout aborts it
        with contextlib.suppress(TxnLogError):
            self._producer.abort_transaction()


class EmbeddedBackend(AtomicCommitBackend):
    """The ``AtomicCommitBackend`` of one txnlog directory: tasks leave their transaction
    open, the driver commits the batch atomically. Thread-safe; one per directory per
    process."""

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
        self,
        transactional_id: str,
        timeout_ms: int,
        compression: str,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        buffer_memory: int = DEFAULT_BUFFER_MEMORY,
    ) -> EmbeddedTaskTransaction:
        producer = self.log.producer(
            transactional_id,
            transaction_timeout_ms=timeout_ms,
            compression=compression,
            batch_size=batch_size,
            buffer_memory=buffer_memory,
        )
        producer.init_transactions()  # fences every earlier attempt (C-24)
        producer.begin_transaction()
        return EmbeddedTaskTransaction(producer)

    def ledger_end(self) -> int:
        """0: the coordinator's ledger is looked up by key, never scanned."""
        return 0

    # --- the ledger and the batch commit -------------------------------------------------------
    # A sink's micro-batches are atomic commits of the log's coordinator (DESIGN §4): the
    # ledger key is the sink id itself and the sequence is Spark's batch id, which only grows
    # per sink as the coordinator requires. The sink id must stay the key as it is: logs
    # written before carry it so, and a restarted query must find its ledger.

    def is_batch_committed(self, sink_id: str, batch_id: int) -> bool:
        return self.log.coordinator.ledger_has(ledger_key(sink_id), batch_id)

    def last_batch(self, sink_id: str) -> LedgerEntry | None:
        entry = self.log.coordinator.ledger_entry(ledger_key(sink_id))
        return None if entry is None else _ledger_entry(entry)

    def ledgers(self) -> tuple[LedgerEntry, ...]:
        return tuple(_ledger_entry(entry) for entry in self.log.coordinator.ledgers())

    def commit_batch(
        self,
        sink_id: str,
        batch_id: int,
        transactions: Sequence[TxnRef],
        group_id: str | None,
        offsets: Sequence[tuple[str, int, int]],
    ) -> bool:
        """One atomic commit of the coordinator."""
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


def _ledger_entry(entry: Any) -> LedgerEntry:
    """The coordinator's ledger entry (``txn_log``'s own record type, which this package does
    not import: tests/test_layering.py) as the backends report it."""
    return LedgerEntry(
        entry.ledger_key,
        entry.sequence,
        tuple(t.transactional_id for t in entry.transactions),
        entry.group_id,
        entry.offsets,
        entry.timestamp_ms,
    )
