"""The Kafka backend's ledger: a compacted one-partition topic of the sinks' commits (issue 16
item 3).

Two kinds of record, each keyed so that compaction keeps exactly the newest one per key:

    key ["<sink id>", "task", <task partition id>]   written by a task, inside its own
                                                     transaction, with its rows: "batch
                                                     <value.batch_id> of this task committed"
    key ["<sink id>", "batch"]                       written by the driver once every task of a
                                                     batch committed or skipped, with the
                                                     consumed offsets (in the same transaction
                                                     as those offsets' group commit)

Spark runs a sink's batches in order, so "batch ``b`` committed" is "the newest record of the
key holds a batch id >= ``b``"; the ledger's size is bounded by its live keys (sinks times
task partition ids), whatever the number of batches.

Reading (``LedgerReader``) is read_committed (B-05) and never misses a commit: it first notes
the partition's high watermark, then waits until the last stable offset (B-03, ListOffsets
under read_committed: R-03, B-07) reaches it (an open
transaction of another writer holds the LSO back, and an entry behind it would be invisible
yet), bounded by ``timeout_s`` with an error naming the topic and both offsets. Callers that
must see every earlier attempt's commit (a task after fencing its id) read after the fencing,
so the watermark covers whatever that attempt wrote. A key's newest record is found by scanning
from the tail backwards in growing windows, each read until the consumer's position (not the
last record: markers and aborted records leave gaps) reaches the window's end. One reader per
backend; a lock makes it safe from several threads.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from commit_protocol.kafka_task import ClusterSettings
from txn_log.errors import ConfigError, CorruptRecordError, InvalidTxnStateError

LEDGER_TOPIC = "_txnlog_sink_ledger"
LEDGER_CONFIG = {"cleanup.policy": "compact"}
_NOT_KNOWN_YET = {
    KafkaError._NOENT,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._UNKNOWN_PARTITION,
}
FIRST_WINDOW = 64
"""Records read in the first tail window; each further window is twice as large."""


def ledger_key(sink_id: str, task_id: int | None) -> bytes:
    """The record key of a task's commits, or of the sink's batch commits (``task_id`` None)."""
    parts: list[Any] = [sink_id, "batch"] if task_id is None else [sink_id, "task", task_id]
    return json.dumps(parts, separators=(",", ":")).encode()


@dataclass(frozen=True)
class LedgerRecord:
    """One ledger record (see the module doc). ``transactions`` are the transactional ids a
    batch record covers; a task record names its own."""

    sink_id: str
    batch_id: int
    task_id: int | None
    transactions: tuple[str, ...]
    group_id: str | None = None
    offsets: tuple[tuple[str, int, int], ...] = ()
    timestamp_ms: int = 0

    @property
    def key(self) -> bytes:
        return ledger_key(self.sink_id, self.task_id)

    def value(self) -> bytes:
        return json.dumps(
            {
                "sink_id": self.sink_id,
                "batch_id": self.batch_id,
                "task_id": self.task_id,
                "transactions": list(self.transactions),
                "group_id": self.group_id,
                "offsets": [list(o) for o in self.offsets],
                "timestamp_ms": self.timestamp_ms,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def parse(cls, topic: str, offset: int, value: bytes | None) -> LedgerRecord:
        try:
            data = json.loads(value or b"")
            return cls(
                str(data["sink_id"]),
                int(data["batch_id"]),
                None if data["task_id"] is None else int(data["task_id"]),
                tuple(str(t) for t in data["transactions"]),
                data["group_id"],
                tuple((str(t), int(p), int(o)) for t, p, o in data["offsets"]),
                int(data["timestamp_ms"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptRecordError(
                f"ledger topic {topic!r} offset {offset} is not a txnlog ledger record "
                f"({error}); is another application writing to that topic?"
            ) from None


class LedgerReader:
    """read_committed reads of partition 0 of the ledger topic (see the module doc)."""

    def __init__(
        self, cluster: ClusterSettings, admin: AdminClient, topic: str, timeout_s: float
    ) -> None:
        self.topic = topic
        self._admin = admin
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._consumer = Consumer(
            cluster.client_config(
                group_id="txnlog-ledger-reader",  # never joins: partitions are assigned
                enable_auto_commit=False,
                isolation_level="read_committed",
                enable_partition_eof=False,
            )
        )

    def close(self) -> None:
        self._consumer.close()

    def newest(self, key: bytes, since: int = 0) -> LedgerRecord | None:
        """The newest committed record of ``key`` at offset ``since`` or later (None if the
        ledger has none)."""
        with self._lock:
            start, end = self._stable_range()
            start = max(start, since)
            window = FIRST_WINDOW
            high = end
            while high > start:
                low = max(start, high - window)
                found = [value for k, value in self._read(low, high) if k == key]
                if found:
                    return found[-1]
                high, window = low, window * 2
            return None

    def end(self) -> int:
        """The high watermark (read_uncommitted end) of the ledger partition."""
        with self._lock:
            return self._offset(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)

    def all_newest(self) -> dict[bytes, LedgerRecord]:
        """The newest committed record of every key."""
        with self._lock:
            start, end = self._stable_range()
            return dict(self._read(start, end))

    def _offset(self, spec: OffsetSpec, isolation: IsolationLevel) -> int:
        """ListOffsets, retried while the client's metadata does not know the topic yet (it
        may have been created a moment ago)."""
        partition = KafkaPartition(self.topic, 0)
        deadline = time.monotonic() + self._timeout_s
        while True:
            futures = self._admin.list_offsets(
                {partition: spec}, isolation_level=isolation, request_timeout=self._timeout_s
            )
            try:
                return int(futures[partition].result(self._timeout_s).offset)
            except KafkaException as error:
                code = error.args[0].code()
                if code not in _NOT_KNOWN_YET or time.monotonic() >= deadline:
                    raise ConfigError(
                        f"cannot read the offsets of ledger topic {self.topic!r}: {error.args[0]}"
                    ) from None
            time.sleep(0.05)

    def _stable_range(self) -> tuple[int, int]:
        """``(log start, LSO)`` once the LSO reached the high watermark seen first."""
        high = self._offset(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
        start = self._offset(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
        deadline = time.monotonic() + self._timeout_s
        while True:
            stable = self._offset(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
            if stable >= high:
                return start, stable
            if time.monotonic() >= deadline:
                raise InvalidTxnStateError(
                    f"ledger topic {self.topic!r}: the last stable offset stayed at {stable}, "
                    f"below the high watermark {high}, for {self._timeout_s:.0f} s: a "
                    "transaction writing to the ledger is still open (it ends by commit, abort "
                    "or its transaction.timeout.ms)"
                )
            time.sleep(0.05)

    def _read(self, low: int, high: int) -> Iterator[tuple[bytes, LedgerRecord]]:
        """Committed records in ``[low, high)``, in offset order, until the position >= high."""
        partition = KafkaPartition(self.topic, 0, low)
        self._consumer.assign([partition])
        deadline = time.monotonic() + self._timeout_s
        position = low
        while position < high:
            if time.monotonic() >= deadline:
                raise InvalidTxnStateError(
                    f"ledger topic {self.topic!r}: reading offsets {low}..{high} stopped at "
                    f"{position} for {self._timeout_s:.0f} s"
                )
            for message in self._consumer.consume(500, 0.01):
                error = message.error()
                if error is not None:
                    raise ConfigError(f"reading ledger topic {self.topic!r}: {error}")
                offset = message.offset()
                if offset is not None and offset < high:
                    key = message.key() or b""
                    yield key, LedgerRecord.parse(self.topic, offset, message.value())
            now = self._consumer.position([KafkaPartition(self.topic, 0)])[0].offset
            position = max(position, now)
        self._consumer.unassign()
