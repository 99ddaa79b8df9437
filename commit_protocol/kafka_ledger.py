"""The Kafka backend's ledger: a compacted one-partition topic of the sinks' commits
(DESIGN §5).

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

Reading (``LedgerReader``) is read_committed (B-05), never misses a commit, and never waits on
a transaction that cannot hold the answer (DESIGN §5). Every sink of the cluster shares
this one partition, so an open transaction of ANY sink (a task SIGKILLed between its ledger
record and its commit stays open until its ``transaction.timeout.ms``, 900 s by default) holds
the partition's last stable offset (LSO, B-03) back. A lookup of one key therefore:

1. notes the high watermark and the LSO (ListOffsets at both isolation levels: R-03, B-07),
   asked together in one round trip: in either order the lookup is right (an LSO taken first
   is at most the high watermark taken after it, and every record of a transaction open then
   lies between the two; an LSO taken after may pass that high watermark, and then nothing is
   pending);
2. if the LSO is below the high watermark, reads the unstable range ``[LSO, high watermark)``
   read_uncommitted and looks for records of ITS OWN key that could change the answer (for
   ``task_committed``/``is_batch_committed``: a batch id at or past the one asked about).
   Every record of every open transaction lies in that range (the LSO is the first offset of
   the earliest open transaction), so when none of them is of this key, the committed records
   below the LSO are the whole answer, whatever other sinks have open;
3. only when one is, waits until the LSO passes it (its transaction is decided: a task reads
   after fencing its own id, C-24, so an earlier attempt's transaction is committed or aborted
   by then, but read_committed cannot tell which before the LSO passes it). If the LSO stays
   at one transaction for ``ZOMBIE_AFTER_S``, that transaction's first record in the ledger
   (the record at the LSO: a task or driver writes its ledger record last, right before
   ``commit_transaction``) names its writer's transactional id, and the reader fences that id
   (``init_transactions``: its open transaction is aborted, C-24), as a transaction timeout
   would. A live writer never holds its ledger record open that long (it commits right
   after sending it); a fenced writer's rows and ledger record abort together, so a re-run
   writes them once. Records of another application (not ledger records) are never fenced:
   then the wait is bounded by ``timeout_s`` and fails with an error naming the topic and
   both offsets;
4. finds the key's newest committed record below the LSO by scanning from the tail backwards
   in growing windows, each read until the consumer's position (not the last record: markers
   and aborted records leave gaps) reaches the window's end.

So a sink's lookups wait on another sink's open transaction only in case 3: a retry of a task
(or driver) of its own whose earlier attempt wrote its ledger record behind that transaction,
and then for at most ``ZOMBIE_AFTER_S`` when the other transaction's writer is gone.
Callers that must see every earlier attempt's commit (a task after fencing its id) read after
the fencing, so the watermark covers whatever that attempt wrote. One reader per backend; a
lock makes it safe from several threads.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from commit_protocol.kafka_cluster import ClusterSettings
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
FETCH_WAIT_MAX_MS = 0
"""How long the broker may hold a ledger consumer's fetch that has nothing new. A read stops on
the consumer's position, never on an empty fetch, but librdkafka sends the next fetch (at the
log end) as soon as a read's records arrive, and a connection carries one fetch at a time: the
next lookup's first fetch waited for that one, up to librdkafka's default of 500 ms (measured:
about 500 ms per lookup against ``txnlog serve``, whose long poll also waits at least its 10 ms
poll interval for any wait above 0). A consumer is assigned only while it reads a range that
holds records, so an answer at once costs at most a few empty fetches."""
CONSUME_WAIT_S = 0.002
"""One ``consume`` call's wait in a ledger read: short, as the read stops once the position
reaches its end, which a call that waited for more records would only delay."""
ZOMBIE_AFTER_S = 10.0
"""How long a transaction may hold the ledger's LSO with its ledger record sent before a
lookup that needs to see past it fences its writer (see the module doc, step 3)."""

logger = logging.getLogger(__name__)


def ledger_key(sink_id: str, task_id: int | None) -> bytes:
    """The record key of a task's commits, or of the sink's batch commits (``task_id`` None)."""
    parts: list[Any] = [sink_id, "batch"] if task_id is None else [sink_id, "task", task_id]
    return json.dumps(parts, separators=(",", ":")).encode()


@dataclass(frozen=True)
class LedgerRecord:
    """One ledger record (see the module doc). ``transactions`` are the transactional ids a
    batch record covers; a task record names its own. ``writer`` is the transactional id whose
    transaction wrote the record (None in records of versions that did not write the field:
    then a task record's writer is its one transaction, a batch record's is unknown)."""

    sink_id: str
    batch_id: int
    task_id: int | None
    transactions: tuple[str, ...]
    group_id: str | None = None
    offsets: tuple[tuple[str, int, int], ...] = ()
    timestamp_ms: int = 0
    writer: str | None = None

    @property
    def key(self) -> bytes:
        return ledger_key(self.sink_id, self.task_id)

    @property
    def writer_id(self) -> str | None:
        """The transactional id that wrote the record, where it is known."""
        if self.writer is not None:
            return self.writer
        if self.task_id is not None and len(self.transactions) == 1:
            return self.transactions[0]
        return None

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
                "writer": self.writer,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def parse(cls, topic: str, offset: int, value: bytes | None) -> LedgerRecord:
        try:
            data = json.loads(value or b"")
            writer = data.get("writer")
            return cls(
                str(data["sink_id"]),
                int(data["batch_id"]),
                None if data["task_id"] is None else int(data["task_id"]),
                tuple(str(t) for t in data["transactions"]),
                data["group_id"],
                tuple((str(t), int(p), int(o)) for t, p, o in data["offsets"]),
                int(data["timestamp_ms"]),
                None if writer is None else str(writer),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CorruptRecordError(
                f"ledger topic {topic!r} offset {offset} is not a txnlog ledger record "
                f"({error}); is another application writing to that topic?"
            ) from None


@dataclass(frozen=True)
class _Offsets:
    """One look at the ledger partition: log start, last stable offset, high watermark."""

    start: int
    stable: int
    high: int


class LedgerReader:
    """read_committed reads of partition 0 of the ledger topic (see the module doc).
    ``fence(transactional_id)`` aborts the open transaction of an id (the backend's)."""

    def __init__(
        self,
        cluster: ClusterSettings,
        admin: AdminClient,
        topic: str,
        timeout_s: float,
        fence: Callable[[str], object] | None = None,
        zombie_after_s: float = ZOMBIE_AFTER_S,
    ) -> None:
        self.topic = topic
        self._admin = admin
        self._timeout_s = timeout_s
        self._fence = fence
        self._zombie_after_s = zombie_after_s
        self._lock = threading.Lock()
        self._consumer = self._new_consumer(cluster, "read_committed")
        self._uncommitted = self._new_consumer(cluster, "read_uncommitted")
        for consumer in (self._consumer, self._uncommitted):
            self._know_topic(consumer)

    @staticmethod
    def _new_consumer(cluster: ClusterSettings, isolation_level: str) -> Consumer:
        return Consumer(
            cluster.client_config(
                group_id="txnlog-ledger-reader",  # never joins: partitions are assigned
                enable_auto_commit=False,
                isolation_level=isolation_level,
                enable_partition_eof=True,  # the end reached: ``_read``
                fetch_wait_max_ms=FETCH_WAIT_MAX_MS,  # the ledger's own: no user setting
            )
        )

    def _know_topic(self, consumer: Consumer) -> None:
        """Fetch the ledger topic's metadata into ``consumer``, twice (as
        ``kafka_cluster.fenced_producer`` does, the second time over a broker's own
        connection): a new consumer's first read otherwise found the topic unknown when its
        first metadata answer was lost with the bootstrap connection, and waited for
        librdkafka's refresh of unknown topics, once a second (measured: one new reader in
        two took 1 s for its first lookup, 500 ms per consumer)."""
        try:
            for _ in range(2):
                consumer.list_topics(self.topic, timeout=self._timeout_s)
        except KafkaException as error:
            raise ConfigError(
                f"cannot read the metadata of ledger topic {self.topic!r}: {error.args[0]}"
            ) from None

    def close(self) -> None:
        self._consumer.close()
        self._uncommitted.close()

    def newest(
        self, key: bytes, since: int = 0, at_least: int | None = None
    ) -> LedgerRecord | None:
        """The newest committed record of ``key`` at offset ``since`` or later (None if the
        ledger has none). ``at_least``: only whether a record with that batch id or a later
        one committed matters (records of older batches of the key, committed or not, cannot
        change the answer, so they are never waited for)."""
        with self._lock:
            offsets = self._offsets()
            start = max(offsets.start, since)
            end = offsets.stable
            if offsets.stable < offsets.high:
                pending = self._pending(key, max(start, offsets.stable), offsets.high, at_least)
                if pending is not None:
                    end = self._wait_past(pending)
            return self._newest_committed(key, start, end)

    def end(self) -> int:
        """The high watermark (read_uncommitted end) of the ledger partition."""
        with self._lock:
            return self._offset(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)

    def all_newest(self) -> dict[bytes, LedgerRecord]:
        """The newest committed record of every key (every key may be pending: this waits
        until the LSO reaches the high watermark seen first)."""
        with self._lock:
            offsets = self._offsets()
            end = offsets.stable
            if offsets.stable < offsets.high:
                end = self._wait_past(offsets.high - 1)
            return {
                k: LedgerRecord.parse(self.topic, o, v)
                for o, k, v in self._read(self._consumer, offsets.start, end)
            }

    def _newest_committed(self, key: bytes, start: int, end: int) -> LedgerRecord | None:
        """The newest committed record of ``key`` in ``[start, end)`` (``end`` <= the LSO)."""
        window = FIRST_WINDOW
        high = end
        while high > start:
            low = max(start, high - window)
            found = [
                (offset, value)
                for offset, k, value in self._read(self._consumer, low, high)
                if k == key
            ]
            if found:
                offset, value = found[-1]
                return LedgerRecord.parse(self.topic, offset, value)
            high, window = low, window * 2
        return None

    def _pending(self, key: bytes, low: int, high: int, at_least: int | None) -> int | None:
        """The offset of the last record of ``key`` in the unstable range ``[low, high)``
        (read read_uncommitted: committed, aborted or open alike) that could change the
        answer; None when there is none."""
        last = None
        for offset, k, value in self._read(self._uncommitted, low, high):
            if k != key:
                continue  # another key's record: never parsed, never waited for
            if at_least is None or LedgerRecord.parse(self.topic, offset, value).batch_id >= (
                at_least
            ):
                last = offset
        return last

    def _offset(self, spec: OffsetSpec, isolation: IsolationLevel) -> int:
        """One ListOffsets (see ``_offsets_of``)."""
        return self._offsets_of((spec, isolation))[0]

    def _offsets_of(self, *asked: tuple[OffsetSpec, IsolationLevel]) -> list[int]:
        """ListOffsets of partition 0 for each ``(spec, isolation)``, the answers in that
        order: the requests leave together and are awaited together (one round trip, not one
        each; the cluster may answer them in any order, which a lookup allows: module doc,
        step 1); retried while the client's metadata does not know the topic yet (it may
        have been created a moment ago)."""
        partition = KafkaPartition(self.topic, 0)
        deadline = time.monotonic() + self._timeout_s
        while True:
            futures = [
                self._admin.list_offsets(
                    {partition: spec}, isolation_level=isolation, request_timeout=self._timeout_s
                )[partition]
                for spec, isolation in asked
            ]
            try:
                return [int(future.result(self._timeout_s).offset) for future in futures]
            except KafkaException as error:
                code = error.args[0].code()
                if code not in _NOT_KNOWN_YET or time.monotonic() >= deadline:
                    raise ConfigError(
                        f"cannot read the offsets of ledger topic {self.topic!r}: {error.args[0]}"
                    ) from None
            time.sleep(0.05)

    def _offsets(self) -> _Offsets:
        """The high watermark, the log start and the LSO, asked after whatever the caller did
        before (a task's fencing), in one round trip."""
        high, start, stable = self._offsets_of(
            (OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED),
            (OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
            (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED),
        )
        return _Offsets(start, stable, high)

    def _wait_past(self, offset: int) -> int:
        """The LSO once it passed ``offset``, fencing the writer of a transaction that holds
        it for ``zombie_after_s`` (see the module doc, step 3); InvalidTxnStateError after
        ``timeout_s``."""
        deadline = time.monotonic() + self._timeout_s
        held_at, since = -1, time.monotonic()
        while True:
            stable = self._offset(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
            if stable > offset:
                return stable
            now = time.monotonic()
            if stable != held_at:
                held_at, since = stable, now
            elif now - since >= self._zombie_after_s and self._maybe_fence_holder(stable):
                held_at, since = -1, now
                continue
            if now >= deadline:
                raise InvalidTxnStateError(
                    f"ledger topic {self.topic!r}: the last stable offset stayed at {stable}, "
                    f"at or below offset {offset}, a record of the key looked up, for "
                    f"{self._timeout_s:.0f} s: a transaction writing to the ledger is still "
                    "open (it ends by commit, abort or its transaction.timeout.ms)"
                )
            time.sleep(0.05)

    def _maybe_fence_holder(self, stable: int) -> bool:
        """Fence the writer of the ledger record at the LSO ``stable`` (the first record of
        the open transaction holding it); False when it is no ledger record of ours."""
        if self._fence is None:
            return False
        held = list(self._read(self._uncommitted, stable, stable + 1))
        if not held:
            return False
        offset, _key, value = held[0]
        try:
            writer = LedgerRecord.parse(self.topic, offset, value).writer_id
        except CorruptRecordError:
            return False
        if writer is None:
            return False
        logger.warning(
            "ledger topic %r: the transaction of %r has held the last stable offset at %d "
            "for %.0f s with its ledger record sent; its writer is gone: fencing it (its "
            "open transaction aborts)",
            self.topic,
            writer,
            stable,
            self._zombie_after_s,
        )
        self._fence(writer)
        return True

    def _read(
        self, consumer: Consumer, low: int, high: int
    ) -> Iterator[tuple[int, bytes, bytes | None]]:
        """``(offset, key, value)`` of the records ``consumer`` delivers in ``[low, high)``,
        in offset order, until its position >= high. The end-of-partition event counts as a
        position too: librdkafka moves the position past control markers but not past the
        aborted batches a read_committed read skips, so a window ending in one (an aborted
        ledger record just below a transaction still open, which holds the last stable offset
        there) never moved the position to ``high``, and every lookup of every sink waited
        ``timeout_s`` and failed; the event carries the offset the fetch reached."""
        partition = KafkaPartition(self.topic, 0, low)
        consumer.assign([partition])
        deadline = time.monotonic() + self._timeout_s
        position = low
        while position < high:
            if time.monotonic() >= deadline:
                raise InvalidTxnStateError(
                    f"ledger topic {self.topic!r}: reading offsets {low}..{high} stopped at "
                    f"{position} for {self._timeout_s:.0f} s"
                )
            for message in consumer.consume(500, CONSUME_WAIT_S):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    position = max(position, message.offset() or 0)
                    continue
                if error is not None:
                    raise ConfigError(f"reading ledger topic {self.topic!r}: {error}")
                offset = message.offset()
                if offset is not None and offset < high:
                    yield offset, message.key() or b"", message.value()
            now = consumer.position([KafkaPartition(self.topic, 0)])[0].offset
            position = max(position, now)
        consumer.unassign()
