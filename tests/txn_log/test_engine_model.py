"""Model-based test of the engine: a Hypothesis state machine against an in-memory model.

STYLE item 10 and TESTING scenario 8. The machine drives one ``Log`` (2 topics x 2 partitions)
with three transactional ids and one idempotent producer:

* ``t0`` and ``t1`` are protocol-level clients: they talk to the coordinator directly
  (InitPid, AddPartitionsToTxn, EndTxn; C-14, C-16, C-18) and append batches with explicit
  sequence numbers through ``PartitionLog.append`` (P-08..P-11);
* ``t2`` is the high-level ``Producer`` (init_transactions, send + flush, send_offsets,
  commit, abort; C-33..C-38);
* one idempotent session (C-15) appends non-transactional batches with explicit sequences.

Two ``Log`` objects over the same directory stand for two processes (DESIGN §3): steps go
through one of them, ``switch_process`` swaps them, and the other must have caught up.

Steps: init/fence (C-14 step 2, C-24), begin, send, retry a written batch (P-10 step 5, §15.1),
send with a sequence gap (P-10 steps 3/5/6, P-11), send with a stale epoch (P-10 step 4, E-03),
commit, abort (C-18, C-19), zombie sends and EndTxn after a fence or timeout (§15.6), expire
(C-25, P-18), transactional offsets (O-04), crash + recover, with or without dropping the bytes
written since the last fdatasync (P-24, X-20), and read_committed / read_uncommitted reads from
any offset (B-13, B-14).

The model is a list of records and markers per partition plus the transactions they belong to;
everything it checks is derived from that list. After every step, for every data partition:
``LSO <= high watermark <= log end`` (B-03, B-04), log end and LSO equal the model's,
read_committed from offset 0 returns exactly the committed and non-transactional records below
the LSO in offset order (B-05, B-13), read_uncommitted returns every data record, no record is
returned twice and no control record is returned (F-32), the aborted-transaction index equals
the model's (B-10), and the group's committed offsets are those of committed transactions only
(O-04).

After a crash: recovering twice gives the same files (segments, indexes, snapshots, the
coordinator's state log), offsets, LSO, aborted index and producer state as recovering once
(TESTING, first paragraph); what opening left equals a full recovery of the active segment
(TESTING scenario 4); after a clean crash the producer state is what it was, as far as a
snapshot keeps it (P-21, P-24). A power failure loses the bytes written since each segment's
last fdatasync (found by wrapping ``LogSegment.flush``): unsynced idempotent data, data of open
transactions, and a COMPLETE_* record (written unsynced, C-19), whose markers the next
coordinator touch writes again (C-20).

A failing run prints the steps as a replayable program (and a ``@reproduce_failure`` blob).
``TXNLOG_MODEL_EXAMPLES`` raises the example count for long runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.support import directory_bytes
from txn_log.clock import ManualClock
from txn_log.coordinator.transaction_coordinator import STATE_PARTITION
from txn_log.coordinator.transactional_append import append_client_batch
from txn_log.errors import (
    DuplicateSequenceError,
    FencedError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from txn_log.group.group_offsets import OFFSETS_PARTITION
from txn_log.log import Log
from txn_log.producer.producer import Producer
from txn_log.record.codec import encode_records
from txn_log.storage.file_names import LOG_SUFFIX, parse_offset_file_name
from txn_log.storage.partition_log import AppendResult, PartitionLog
from txn_log.storage.producer_state_entry import NUM_BATCHES_TO_RETAIN
from txn_log.storage.segment import LogSegment
from txn_log.storage.txn_index import AbortedTxn
from txn_log.topic_partition import TopicPartition

TIMEOUT_MS = 1_000
TOPIC_CONFIGS: dict[str, dict[str, int]] = {
    # tiny segments and an index entry per batch: rolls, producer snapshots, index lookups
    "alpha": {"segment.bytes": 256, "index.interval.bytes": 1},
    "beta": {},
}
DATA_PARTITIONS = tuple(TopicPartition(t, p) for t in TOPIC_CONFIGS for p in (0, 1))
RAW_TXN_IDS = ("t0", "t1")
PRODUCER_TXN_ID = "t2"
TXN_IDS = (*RAW_TXN_IDS, PRODUCER_TXN_ID)
GROUP = "model-group"
Headers = tuple[tuple[str, bytes | None], ...]

# .log path -> (file size, segment next offset) at the segment's last fdatasync
_DURABLE: dict[Path, tuple[int, int]] = {}
_ORIGINAL_FLUSH = LogSegment.flush


def _tracking_flush(self: LogSegment) -> None:
    """LogSegment.flush that also records how much of the file is now durable."""
    _ORIGINAL_FLUSH(self)
    _DURABLE[self.log_path] = (self.log_path.stat().st_size, self.next_offset)


# --- the model ----------------------------------------------------------------------------------


class Status(Enum):
    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(eq=False)
class ModelTxn:
    """One transaction as the coordinator sees it: started by the first AddPartitions (T3)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    start_ms: int
    partitions: set[TopicPartition] = field(default_factory=set)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    status: Status = Status.OPEN


@dataclass(frozen=True)
class ModelRecord:
    offset: int
    key: bytes | None
    value: bytes
    headers: Headers
    timestamp_ms: int
    producer_id: int
    producer_epoch: int
    txn: ModelTxn | None  # None: an idempotent, non-transactional record


@dataclass(frozen=True)
class ModelMarker:
    offset: int
    producer_id: int
    producer_epoch: int
    commit: bool
    aborted_entry: AbortedTxn | None  # what the .txnindex holds for it (B-10)


@dataclass(eq=False)
class ModelBatch:
    """A written data batch, kept so that it can be retried byte for byte."""

    producer_id: int
    producer_epoch: int
    base_offset: int
    count: int
    payload: bytes
    generation: int  # crash count when it was written: recovery may shrink the dedup cache
    writer: Client


@dataclass
class ModelPartition:
    entries: list[ModelRecord | ModelMarker] = field(default_factory=list)
    batches: list[ModelBatch] = field(default_factory=list)

    @property
    def end_offset(self) -> int:
        return self.entries[-1].offset + 1 if self.entries else 0

    def records(self) -> list[ModelRecord]:
        return [e for e in self.entries if isinstance(e, ModelRecord)]

    def records_of(self, txn: ModelTxn) -> list[ModelRecord]:
        return [r for r in self.records() if r.txn is txn]

    def open_first_offsets(self) -> dict[ModelTxn, int]:
        """First offset here of every open transaction with data here (B-03)."""
        firsts: dict[ModelTxn, int] = {}
        for r in self.records():
            if r.txn is not None and r.txn.status is Status.OPEN:
                firsts.setdefault(r.txn, r.offset)
        return firsts

    def last_stable_offset(self) -> int:
        return min(self.open_first_offsets().values(), default=self.end_offset)

    def stored_epoch(self, producer_id: int) -> int | None:
        """The newest epoch this partition saw from ``producer_id`` (data or marker)."""
        epochs = [e.producer_epoch for e in self.entries if e.producer_id == producer_id]
        return max(epochs, default=None)

    def committed_view(self) -> list[ModelRecord]:
        lso = self.last_stable_offset()
        return [
            r
            for r in self.records()
            if r.offset < lso and (r.txn is None or r.txn.status is Status.COMMITTED)
        ]

    def aborted_txns(self) -> list[AbortedTxn]:
        return [
            e.aborted_entry
            for e in self.entries
            if isinstance(e, ModelMarker) and e.aborted_entry is not None
        ]

    def drop_from(self, offset: int) -> None:
        """Forget everything at or after ``offset`` (bytes lost in a power failure)."""
        lost = [e for e in self.entries if e.offset >= offset]
        for entry in lost:
            # markers are fsynced, so only data of open transactions or idempotent sends go
            assert isinstance(entry, ModelRecord), f"a synced marker was lost: {entry}"
            assert entry.txn is None or entry.txn.status is Status.OPEN, entry
        self.entries = [e for e in self.entries if e.offset < offset]
        self.batches = [b for b in self.batches if b.base_offset < offset]


@dataclass(eq=False)
class Client:
    """One producer instance: raw (explicit sequences) or a high-level ``Producer``."""

    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    producer: Producer | None = None
    process: Log | None = None  # the Log a high-level producer is bound to
    next_sequence: dict[TopicPartition, int] = field(default_factory=dict)
    in_txn: bool = False
    txn_partitions: set[TopicPartition] = field(default_factory=set)
    fatal: bool = False  # a high-level Producer that raised a fenced error (P-13)


def _encode(
    records: list[tuple[bytes | None, bytes, Headers]],
    client: Client,
    *,
    base_sequence: int,
    now_ms: int,
) -> bytes:
    return encode_records(
        [(key, value, now_ms, headers) for key, value, headers in records],
        producer_id=client.producer_id,
        producer_epoch=client.producer_epoch,
        base_sequence=base_sequence,
        transactional=client.transactional_id is not None,
        now_ms=now_ms,
    )


def _view(records: Any) -> list[tuple[int, bytes | None, bytes | None, Headers, int]]:
    return [(r.offset, r.key, r.value, tuple(r.headers), r.timestamp_ms) for r in records]


# --- strategies ---------------------------------------------------------------------------------

keys = st.sampled_from([None, b"k0", b"k1"])
header_sets = st.sampled_from([(), (("h", b"v"),), (("h", None), ("trace", b"1"))])
record_shapes = st.lists(st.tuples(keys, header_sets), min_size=1, max_size=3)
partitions = st.sampled_from(DATA_PARTITIONS)


class EngineModel(RuleBasedStateMachine):
    """The engine against the model; see the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="txnlog-model-"))
        self.clock = ManualClock()
        self.log = Log.open(self.directory, clock=self.clock)
        for topic, config in TOPIC_CONFIGS.items():
            self.log.create_topic(topic, partitions=2, config=config)
        # a second process over the same directory (DESIGN §3); ``switch_process`` swaps them
        self.peer = Log.open(self.directory, clock=self.clock)
        self.parts = {tp: ModelPartition() for tp in DATA_PARTITIONS}
        self.live: dict[str, Client | None] = dict.fromkeys(TXN_IDS)
        self.zombies: list[Client] = []
        self.idempotent: Client | None = None
        self.open_txn: dict[str, ModelTxn | None] = dict.fromkeys(TXN_IDS)
        self.last_epoch: dict[str, int] = {}
        self.group_offsets: dict[TopicPartition, int] = {}
        # the last completion, while its COMPLETE_* record is not fsynced yet (C-19): a power
        # failure loses it and the next coordinator touch writes its markers again (C-20)
        self.unsynced_completion: tuple[ModelTxn, bool, int] | None = None
        self.generation = 0
        self.values = 0

    def teardown(self) -> None:
        self.log.close()
        self.peer.close()
        for path in [p for p in _DURABLE if self.directory in p.parents]:
            del _DURABLE[path]
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- helpers --------------------------------------------------------------------------

    def _new_records(
        self, shapes: list[tuple[bytes | None, Headers]]
    ) -> list[tuple[bytes | None, bytes, Headers]]:
        out = []
        for key, headers in shapes:
            self.values += 1
            out.append((key, f"v{self.values}".encode(), headers))
        return out

    def _alive(self) -> list[Client]:
        clients = [c for c in self.live.values() if c is not None] + self.zombies
        return clients + ([self.idempotent] if self.idempotent is not None else [])

    def _live_clients(self, *, in_txn: bool) -> list[Client]:
        return [c for c in self.live.values() if c is not None and c.in_txn == in_txn]

    def _register(self, client: Client, tp: TopicPartition) -> None:
        """Model of a successful AddPartitionsToTxn / AddOffsetsToTxn (T3, T4)."""
        assert client.transactional_id is not None
        txn = self.open_txn[client.transactional_id]
        if txn is None or tp not in txn.partitions:  # a state-log write, fsynced
            self.unsynced_completion = None
        if txn is None:
            txn = ModelTxn(
                client.transactional_id,
                client.producer_id,
                client.producer_epoch,
                self.clock.time_ms(),
            )
            self.open_txn[client.transactional_id] = txn
        txn.partitions.add(tp)
        client.txn_partitions.add(tp)

    def _record_append(
        self,
        client: Client,
        tp: TopicPartition,
        records: list[tuple[bytes | None, bytes, Headers]],
        base_offset: int,
        last_offset: int,
        payload: bytes,
    ) -> None:
        """Check where a batch landed and add it to the model."""
        part = self.parts[tp]
        assert (base_offset, last_offset) == (
            part.end_offset,
            part.end_offset + len(records) - 1,
        ), f"{tp}: batch of {len(records)} at {base_offset}..{last_offset}"
        txn = None
        if client.transactional_id is not None:
            txn = self.open_txn[client.transactional_id]
            assert txn is not None
        pid, epoch, now = client.producer_id, client.producer_epoch, self.clock.time_ms()
        part.entries += [
            ModelRecord(base_offset + i, key, value, headers, now, pid, epoch, txn)
            for i, (key, value, headers) in enumerate(records)
        ]
        batch = ModelBatch(pid, epoch, base_offset, len(records), payload, self.generation, client)
        part.batches.append(batch)
        client.next_sequence[tp] = client.next_sequence.get(tp, 0) + len(records)

    def _complete(self, txn: ModelTxn, *, commit: bool, marker_epoch: int) -> None:
        """Model of C-19: a marker on every partition of the transaction, in order."""
        for tp in sorted(txn.partitions):
            part = self.parts.get(tp)
            if part is None:  # __consumer_offsets: its effect is checked through committed()
                continue
            offset = part.end_offset
            records = part.records_of(txn)
            aborted = None
            if not commit and records:
                others = [
                    first
                    for other, first in part.open_first_offsets().items()
                    if other.producer_id != txn.producer_id
                ]
                lso = min(others, default=offset + 1)
                aborted = AbortedTxn(txn.producer_id, records[0].offset, offset, lso)
            part.entries.append(ModelMarker(offset, txn.producer_id, marker_epoch, commit, aborted))
        txn.status = Status.COMMITTED if commit else Status.ABORTED
        self.unsynced_completion = (txn, commit, marker_epoch)  # PREPARE_* synced what came before
        if commit:
            self.group_offsets.update(txn.offsets)
        self.open_txn[txn.transactional_id] = None

    def _fence(self, transactional_id: str) -> None:
        """The live instance of ``transactional_id`` became a zombie."""
        client = self.live[transactional_id]
        if client is not None:
            self.zombies = [z for z in self.zombies if z.transactional_id != transactional_id]
            self.zombies.append(client)
            self.live[transactional_id] = None

    def _plog(self, tp: TopicPartition) -> PartitionLog:
        return self.log.partition_log(tp)

    # --- producer life cycle ----------------------------------------------------------------

    @rule(transactional_id=st.sampled_from(TXN_IDS))
    def init_or_fence(self, transactional_id: str) -> None:
        """InitPid: bumps the epoch, aborts the open transaction with a bumped epoch (C-14, T9),
        and makes the previous instance a zombie (C-24)."""
        self._init(transactional_id)

    def _init(self, transactional_id: str) -> Client:
        producer = None
        if transactional_id == PRODUCER_TXN_ID:
            producer = self.log.producer(transactional_id, transaction_timeout_ms=TIMEOUT_MS)
            producer.init_transactions()
            producer_id, epoch = producer.producer_id, producer.producer_epoch
        else:
            producer_id, epoch = self.log.coordinator.init_producer_id(transactional_id, TIMEOUT_MS)
        txn = self.open_txn[transactional_id]
        if txn is not None:
            self._complete(txn, commit=False, marker_epoch=txn.producer_epoch + 1)
        self.unsynced_completion = None  # the new mapping record is fsynced
        assert epoch > self.last_epoch.get(transactional_id, -1), "P-17: epoch must grow"
        self.last_epoch[transactional_id] = epoch
        self._fence(transactional_id)
        client = Client(
            transactional_id, producer_id, epoch, producer, self.log if producer else None
        )
        self.live[transactional_id] = client
        return client

    @precondition(lambda self: bool(self._live_clients(in_txn=False)))
    @rule(data=st.data())
    def begin(self, data: st.DataObject) -> None:
        self._begin(data.draw(st.sampled_from(self._live_clients(in_txn=False))))

    def _begin(self, client: Client) -> None:
        if client.producer is not None:
            client.producer.begin_transaction()
        client.in_txn = True
        client.txn_partitions = set()

    @rule(
        transactional_id=st.sampled_from(TXN_IDS),
        tp=partitions,
        shapes=record_shapes,
        sync=st.booleans(),
    )
    def send(
        self,
        transactional_id: str,
        tp: TopicPartition,
        shapes: list[tuple[bytes | None, Headers]],
        sync: bool,
    ) -> None:
        """A transactional send (initialising and beginning first if needed); the first write
        to ``tp`` registers it with AddPartitionsToTxn (C-16, C-38)."""
        client = self.live[transactional_id] or self._init(transactional_id)
        if not client.in_txn:
            self._begin(client)
        records = self._new_records(shapes)
        seq = client.next_sequence.get(tp, 0)
        payload = _encode(records, client, base_sequence=seq, now_ms=self.clock.time_ms())
        if client.producer is not None:
            for key, value, headers in records:
                client.producer.send(
                    tp.topic, value, key=key, partition=tp.partition, headers=headers
                )
            (metadata,) = client.producer.flush()
            self._register(client, tp)
            self._record_append(
                client, tp, records, metadata.base_offset, metadata.last_offset, payload
            )
            return
        assert client.transactional_id is not None
        if tp not in client.txn_partitions:
            self.log.coordinator.add_partitions(
                client.transactional_id, client.producer_id, client.producer_epoch, [tp]
            )
            self._register(client, tp)
        result = append_client_batch(  # KIP-890: the coordinator verifies a transaction's start
            self.log.coordinator,
            self._plog(tp),
            payload,
            transactional_id=client.transactional_id,
            sync=sync,
        )
        assert not result.duplicate
        self._record_append(client, tp, records, result.base_offset, result.last_offset, payload)

    @rule(tp=partitions, shapes=record_shapes, sync=st.booleans())
    def send_idempotent(
        self, tp: TopicPartition, shapes: list[tuple[bytes | None, Headers]], sync: bool
    ) -> None:
        """A non-transactional send of the idempotent session (a new session if none, C-15)."""
        if self.idempotent is None:
            producer_id, epoch = self.log.coordinator.init_producer_id(None, 0)
            self.idempotent = Client(None, producer_id, epoch)
        client = self.idempotent
        records = self._new_records(shapes)
        seq = client.next_sequence.get(tp, 0)
        payload = _encode(records, client, base_sequence=seq, now_ms=self.clock.time_ms())
        result = self._plog(tp).append(payload, sync=sync)
        assert not result.duplicate
        self._record_append(client, tp, records, result.base_offset, result.last_offset, payload)

    def _end(self, client: Client, *, commit: bool) -> None:
        assert client.transactional_id is not None
        if client.producer is not None:
            if commit:
                client.producer.commit_transaction()
            else:
                client.producer.abort_transaction()
        elif client.txn_partitions:
            self.log.coordinator.end_txn(
                client.transactional_id, client.producer_id, client.producer_epoch, commit
            )
        txn = self.open_txn[client.transactional_id]
        assert (txn is not None) == bool(client.txn_partitions)
        if txn is not None:
            self._complete(txn, commit=commit, marker_epoch=client.producer_epoch)
        client.in_txn = False
        client.txn_partitions = set()

    @precondition(lambda self: bool(self._live_clients(in_txn=True)))
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        self._end(data.draw(st.sampled_from(self._live_clients(in_txn=True))), commit=True)

    @precondition(lambda self: bool(self._live_clients(in_txn=True)))
    @rule(data=st.data())
    def abort(self, data: st.DataObject) -> None:
        self._end(data.draw(st.sampled_from(self._live_clients(in_txn=True))), commit=False)

    @precondition(
        lambda self: (c := self.live[PRODUCER_TXN_ID]) is not None and c.in_txn and not c.fatal
    )
    @rule(tp=partitions, position=st.integers(0, 50))
    def send_offsets(self, tp: TopicPartition, position: int) -> None:
        """send_offsets_to_transaction: visible only if the transaction commits (O-04)."""
        client = self.live[PRODUCER_TXN_ID]
        assert client is not None and client.producer is not None
        client.producer.send_offsets_to_transaction({tp: position}, GROUP)
        self._register(client, OFFSETS_PARTITION)
        txn = self.open_txn[PRODUCER_TXN_ID]
        assert txn is not None
        txn.offsets[tp] = position

    # --- retries, gaps and stale epochs (P-10) ---------------------------------------------

    def _retry_candidates(self) -> list[tuple[TopicPartition, ModelBatch]]:
        alive = set(self._alive())
        return [
            (tp, b) for tp, part in self.parts.items() for b in part.batches if b.writer in alive
        ]

    @precondition(lambda self: bool(self._retry_candidates()))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        """Re-append a written batch: answered with its original offsets, never written twice."""
        tp, batch = data.draw(st.sampled_from(self._retry_candidates()))
        part = self.parts[tp]
        stored = part.stored_epoch(batch.producer_id)
        assert stored is not None and stored >= batch.producer_epoch
        same_epoch = [
            b
            for b in part.batches
            if b.producer_id == batch.producer_id and b.producer_epoch == batch.producer_epoch
        ]
        age = len(same_epoch) - 1 - same_epoch.index(batch)  # 0: the newest batch
        try:
            result: AppendResult | Exception = self._plog(tp).append(batch.payload)
        except (InvalidProducerEpochError, DuplicateSequenceError) as error:
            result = error
        original = (batch.base_offset, batch.base_offset + batch.count - 1)
        if batch.producer_epoch < stored:
            assert isinstance(result, InvalidProducerEpochError), result  # P-10 step 4
        elif age == 0 or (age < NUM_BATCHES_TO_RETAIN and batch.generation == self.generation):
            assert isinstance(result, AppendResult), result
            assert result.duplicate and (result.base_offset, result.last_offset) == original
        elif age < NUM_BATCHES_TO_RETAIN:  # cached unless recovery loaded a snapshot (P-21)
            assert isinstance(result, DuplicateSequenceError) or (
                isinstance(result, AppendResult)
                and result.duplicate
                and (result.base_offset, result.last_offset) == original
            ), result
        else:
            assert isinstance(result, DuplicateSequenceError), result  # older than the cache

    def _gap_targets(self) -> list[tuple[Client, TopicPartition]]:
        targets = []
        for client in self._live_clients(in_txn=True):
            # the high-level producer must know every partition it registered: only its own
            chosen = client.txn_partitions if client.producer is not None else DATA_PARTITIONS
            targets += [(client, tp) for tp in chosen if tp in self.parts]
        if self.idempotent is not None:
            targets += [(self.idempotent, tp) for tp in DATA_PARTITIONS]
        return targets

    @precondition(lambda self: bool(self._gap_targets()))
    @rule(data=st.data(), gap=st.integers(1, 3), shapes=record_shapes)
    def send_with_gap(
        self, data: st.DataObject, gap: int, shapes: list[tuple[bytes | None, Headers]]
    ) -> None:
        """A sequence ahead of the expected one is OutOfOrderSequence, nothing written (P-11)."""
        client, tp = data.draw(st.sampled_from(self._gap_targets()))
        if client.transactional_id is not None and tp not in client.txn_partitions:
            self.log.coordinator.add_partitions(
                client.transactional_id, client.producer_id, client.producer_epoch, [tp]
            )
            self._register(client, tp)
        seq = client.next_sequence.get(tp, 0) + gap
        payload = _encode(
            self._new_records(shapes), client, base_sequence=seq, now_ms=self.clock.time_ms()
        )
        with pytest.raises(OutOfOrderSequenceError):
            self._plog(tp).append(payload, sync=True)

    def _stale_targets(self) -> list[tuple[TopicPartition, int, int]]:
        targets = []
        for tp, part in self.parts.items():
            for pid in sorted({r.producer_id for r in part.records() if r.txn is not None}):
                stored = part.stored_epoch(pid)
                if stored is not None and stored >= 1:
                    targets.append((tp, pid, stored))
        return targets

    @precondition(lambda self: bool(self._stale_targets()))
    @rule(data=st.data(), shapes=record_shapes)
    def send_stale_epoch(
        self, data: st.DataObject, shapes: list[tuple[bytes | None, Headers]]
    ) -> None:
        """An epoch older than the partition's is InvalidProducerEpoch, nothing written."""
        tp, producer_id, stored = data.draw(st.sampled_from(self._stale_targets()))
        ghost = Client("ghost", producer_id, stored - 1)
        payload = _encode(
            self._new_records(shapes), ghost, base_sequence=0, now_ms=self.clock.time_ms()
        )
        with pytest.raises(InvalidProducerEpochError):
            self._plog(tp).append(payload, sync=True)

    # --- zombies (§15.6, C-25) ---------------------------------------------------------------

    @precondition(lambda self: bool(self.zombies))
    @rule(data=st.data(), tp=partitions, shapes=record_shapes)
    def zombie_send(
        self, data: st.DataObject, tp: TopicPartition, shapes: list[tuple[bytes | None, Headers]]
    ) -> None:
        """Every later write of a fenced or timed-out instance fails; nothing is written."""
        zombie = data.draw(st.sampled_from(self.zombies))
        assert zombie.transactional_id is not None
        records = self._new_records(shapes)
        if zombie.producer is not None:
            with pytest.raises(FencedError):
                if not zombie.in_txn and not zombie.fatal:
                    zombie.producer.begin_transaction()
                    zombie.in_txn, zombie.txn_partitions = True, set()
                for key, value, headers in records:
                    zombie.producer.send(
                        tp.topic, value, key=key, partition=tp.partition, headers=headers
                    )
                zombie.producer.flush()
            zombie.fatal = True
            return
        if not zombie.in_txn:
            zombie.in_txn, zombie.txn_partitions = True, set()
        with pytest.raises(FencedError):
            if tp not in zombie.txn_partitions:
                self.log.coordinator.add_partitions(
                    zombie.transactional_id, zombie.producer_id, zombie.producer_epoch, [tp]
                )
            seq = zombie.next_sequence.get(tp, 0)
            self._plog(tp).append(
                _encode(records, zombie, base_sequence=seq, now_ms=self.clock.time_ms())
            )

    @precondition(lambda self: any(z.in_txn or z.fatal for z in self.zombies))
    @rule(data=st.data(), commit=st.booleans())
    def zombie_end(self, data: st.DataObject, commit: bool) -> None:
        """A zombie's EndTxn is fenced (when it has partitions to end); nothing changes."""
        zombie = data.draw(st.sampled_from([z for z in self.zombies if z.in_txn or z.fatal]))
        assert zombie.transactional_id is not None
        if zombie.producer is not None:
            end = (
                zombie.producer.commit_transaction if commit else zombie.producer.abort_transaction
            )
            if zombie.fatal or zombie.txn_partitions:
                with pytest.raises(FencedError):
                    end()
                zombie.fatal = True
            else:
                end()
        elif zombie.txn_partitions:
            with pytest.raises(FencedError):
                self.log.coordinator.end_txn(
                    zombie.transactional_id, zombie.producer_id, zombie.producer_epoch, commit
                )
        zombie.in_txn, zombie.txn_partitions = False, set()

    @rule(
        advance_ms=st.sampled_from([TIMEOUT_MS // 2, TIMEOUT_MS + 1]),
        touch=st.sampled_from(["maybe_abort_timed_out", "committed", "transactions"]),
    )
    def expire(self, advance_ms: int, touch: str) -> None:
        """Past its timeout an open transaction is aborted with a bumped epoch at the next
        coordinator touch (C-25, P-18); its instance becomes a zombie."""
        self.clock.advance(advance_ms)
        if touch == "maybe_abort_timed_out":
            self.log.coordinator.maybe_abort_timed_out()
        elif touch == "committed":
            self.log.committed(GROUP, DATA_PARTITIONS)
        else:
            self.log.coordinator.transactions()
        now = self.clock.time_ms()
        for transactional_id in sorted(TXN_IDS):
            txn = self.open_txn[transactional_id]
            if txn is not None and txn.start_ms + TIMEOUT_MS < now:
                self._complete(txn, commit=False, marker_epoch=txn.producer_epoch + 1)
                self._fence(transactional_id)

    # --- crash and recovery (P-24, X-20) ------------------------------------------------------

    @rule(tp=partitions)
    def switch_process(self, tp: TopicPartition) -> None:
        """Carry on in the other process, which must have caught up on what this one wrote
        (DESIGN §3), starting with ``tp``."""
        self.log, self.peer = self.peer, self.log
        records = self.log.consumer("read_uncommitted").read(tp, 0)
        assert _view(records) == _view(self.parts[tp].records()), f"after the switch: {tp}"

    @rule(drop_unflushed=st.booleans(), clients_survive=st.booleans())
    def crash_and_recover(self, drop_unflushed: bool, clients_survive: bool) -> None:
        """Close and reopen the log (a new process; the peer process lives on), or, losing
        every byte written since the last fdatasync, both (power failure); recovering twice
        must equal recovering once."""
        before = self._producer_summary()
        dead = self.log
        self.log.close()
        if drop_unflushed:
            self.peer.close()
            self._drop_unflushed()
            self.peer = Log.open(self.directory, clock=self.clock)
        self.log = Log.open(self.directory, clock=self.clock)
        once = self._recovered_state()
        self.log.close()
        self.log = Log.open(self.directory, clock=self.clock)
        twice = self._recovered_state()
        assert once == twice, "recovering twice differs from recovering once"
        self._assert_open_equals_full_recovery()
        if not drop_unflushed:
            self._assert_producer_state_survived(before, self._producer_summary())
        self.generation += 1
        self._kill_clients(dead, everyone=drop_unflushed or not clients_survive)
        # the new process's first coordinator touch finishes what is past its commit point
        self.log.coordinator.transactions()
        if drop_unflushed and self.unsynced_completion is not None:
            self._redo_markers(*self.unsynced_completion)

    def _redo_markers(self, txn: ModelTxn, commit: bool, marker_epoch: int) -> None:
        """C-20: markers written again for a transaction whose COMPLETE_* was lost; they
        complete nothing, so no aborted-index entry."""
        for tp in sorted(txn.partitions):
            part = self.parts.get(tp)
            if part is not None:
                marker = ModelMarker(part.end_offset, txn.producer_id, marker_epoch, commit, None)
                part.entries.append(marker)

    def _kill_clients(self, dead: Log, *, everyone: bool) -> None:
        """High-level producers die with the process (Log) they were bound to; raw clients
        survive a process crash of the log if asked to (they live elsewhere), but not a power
        failure."""

        def dies(client: Client) -> bool:
            return everyone or client.process is dead

        for transactional_id, client in self.live.items():
            if client is not None and dies(client):
                self.live[transactional_id] = None
        self.zombies = [z for z in self.zombies if not dies(z)]
        if everyone:
            self.idempotent = None

    def _drop_unflushed(self) -> None:
        """Truncate every segment to its last fsynced size; the model drops the same tail."""
        for directory in sorted(p for p in self.directory.iterdir() if p.is_dir()):
            segments = sorted(
                (parsed[0], directory / name)
                for name in os.listdir(directory)
                if (parsed := parse_offset_file_name(name)) is not None and parsed[1] == LOG_SUFFIX
            )
            for index, (base_offset, path) in enumerate(segments):
                size, next_offset = _DURABLE.get(path, (0, base_offset))
                if path.stat().st_size > size:
                    assert index == len(segments) - 1, f"{path}: a rolled segment was not synced"
                    os.truncate(path, size)
                    tp = next((t for t in self.parts if t.directory_name == directory.name), None)
                    if tp is not None:
                        self.parts[tp].drop_from(next_offset)

    def _assert_open_equals_full_recovery(self) -> None:
        """Opening may skip validating a clean-looking active segment; a full recovery of a
        copy must then find nothing to change: same log, same indexes (TESTING scenario 4)."""
        scratch = Path(tempfile.mkdtemp(prefix="txnlog-model-recover-"))
        try:
            for directory in sorted(p for p in self.directory.iterdir() if p.is_dir()):
                if directory.name == "topics":
                    continue
                config = self.log.topic_config(directory.name.rsplit("-", 1)[0])
                copy = scratch / directory.name
                shutil.copytree(directory, copy)
                base = max(
                    parsed[0]
                    for name in os.listdir(copy)
                    if (parsed := parse_offset_file_name(name)) is not None
                    and parsed[1] == LOG_SUFFIX
                )
                segment = LogSegment.open(
                    copy, base, index_interval_bytes=config.index_interval_bytes
                )
                segment.recover(config.max_message_bytes)
                segment.close()
                for name in sorted(os.listdir(copy)):
                    original = directory / name
                    assert (
                        original.exists() and original.read_bytes() == (copy / name).read_bytes()
                    ), f"{original}: a full recovery changes what opening the log left"
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _recovered_state(self) -> tuple[Any, ...]:
        """Everything opening the log rebuilds: offsets, aborted index, producer state, and
        the bytes of every file (the coordinator's state is its state log's replay). The
        coordinator is not touched: its first touch may finish transactions (C-22)."""
        partitions = {}
        for tp in (*DATA_PARTITIONS, STATE_PARTITION, OFFSETS_PARTITION):
            plog = self._plog(tp)
            state = plog.producer_state
            end = plog.log_end_offset
            partitions[str(tp)] = (
                plog.log_start_offset,
                end,
                plog.high_watermark,
                plog.last_stable_offset,
                plog.collect_aborted_txns(0, end),
                dict(state.active_producers()),
                state.ongoing_transactions(),
                state.snapshot_offsets(),
            )
        return partitions, directory_bytes(self.directory)

    def _assert_producer_state_survived(
        self, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        """Recovery keeps every producer's state (P-21, P-24). Its last-active time may only
        move forward, to no later than now: a process that replays a batch counts the
        producer's idle time from when it applied it (P-26, the producer state module's
        expiration decision), so it never expires a producer earlier than the writer would."""
        now = self.clock.time_ms()

        def without_times(summary: dict[str, Any]) -> dict[str, Any]:
            return {
                tp: (
                    {
                        pid: replace(
                            entry,
                            last_timestamp=0,
                            batch_metadata=tuple(
                                replace(b, timestamp=0) for b in entry.batch_metadata
                            ),
                        )
                        for pid, entry in entries.items()
                    },
                    ongoing,
                )
                for tp, (entries, ongoing) in summary.items()
            }

        assert without_times(after) == without_times(before), "producer state changed by recovery"
        for tp, (entries, _) in after.items():
            for pid, entry in entries.items():
                was = before[tp][0][pid].last_timestamp
                assert was <= entry.last_timestamp <= max(now, was), (
                    f"{tp} producer {pid}: last active {entry.last_timestamp} after recovery, "
                    f"{was} before, now {now}: recovery may only count idle time from later"
                )

    def _producer_summary(self) -> dict[str, Any]:
        """Producer state per data partition as a snapshot keeps it (P-21, Kafka's layout):
        the newest cached batch only, and one timestamp per producer, not one per batch: the
        time it was last active, which is the newer of its batch timestamp and when this
        process applied it (P-26: a producer writing old timestamps must not expire while it
        writes, so a snapshot keeps the newer)."""
        summary = {}
        for tp in DATA_PARTITIONS:
            state = self._plog(tp).producer_state
            entries = {}
            for pid, entry in state.active_producers().items():
                active_ms = state.last_active_ms(entry)
                entries[pid] = replace(
                    entry,
                    last_timestamp=active_ms,
                    batch_metadata=tuple(
                        replace(batch, timestamp=active_ms) for batch in entry.batch_metadata[-1:]
                    ),
                )
            summary[str(tp)] = (entries, state.ongoing_transactions())
        return summary

    # --- reads ----------------------------------------------------------------------------

    @rule(data=st.data(), tp=partitions, committed=st.booleans(), in_peer=st.booleans())
    def read_range(
        self, data: st.DataObject, tp: TopicPartition, committed: bool, in_peer: bool
    ) -> None:
        """A read from any offset, optionally bounded, in either process: seeks into
        transactions and ranges that start or end on markers (B-14)."""
        part = self.parts[tp]
        start = data.draw(st.integers(0, part.end_offset), label="start")
        end = data.draw(st.none() | st.integers(start, part.end_offset), label="end")
        level = "read_committed" if committed else "read_uncommitted"
        records = (self.peer if in_peer else self.log).consumer(level).read(tp, start, end)
        source = part.committed_view() if committed else part.records()
        expected = [r for r in source if r.offset >= start and (end is None or r.offset < end)]
        assert _view(records) == _view(expected), f"{level} {tp} [{start}, {end})"

    # --- invariants -------------------------------------------------------------------------

    @invariant()
    def partitions_match_model(self) -> None:
        committed_reader = self.log.consumer("read_committed")
        uncommitted_reader = self.log.consumer("read_uncommitted")
        for tp, part in self.parts.items():
            plog = self._plog(tp)
            end, high_watermark, lso = (
                plog.log_end_offset,
                plog.high_watermark,
                plog.last_stable_offset,
            )
            assert lso <= high_watermark <= end, f"{tp}: LSO {lso}, HW {high_watermark}, end {end}"
            assert (end, lso) == (part.end_offset, part.last_stable_offset()), tp
            assert committed_reader.end_offset(tp) == lso
            assert uncommitted_reader.end_offset(tp) == end
            committed = committed_reader.read(tp, 0)
            assert _view(committed) == _view(part.committed_view()), f"read_committed {tp}"
            uncommitted = uncommitted_reader.read(tp, 0)
            assert _view(uncommitted) == _view(part.records()), f"read_uncommitted {tp}"
            values = [r.value for r in uncommitted]
            assert len(values) == len(set(values)), f"{tp}: a record is in the log twice"
            markers = {e.offset for e in part.entries if isinstance(e, ModelMarker)}
            assert not markers & {r.offset for r in uncommitted}, f"F-32: {tp} control record"
            assert plog.collect_aborted_txns(0, end) == part.aborted_txns(), tp
            peer = self.peer.partition_log(tp)  # the other process caught up too
            assert (peer.log_end_offset, peer.last_stable_offset) == (end, lso), f"peer {tp}"

    @invariant()
    def group_offsets_match_model(self) -> None:
        committed = self.log.committed(GROUP, DATA_PARTITIONS)
        actual = {tp: om.offset for tp, om in committed.items() if om is not None}
        assert actual == self.group_offsets, "O-04: only committed offsets are visible"


def _settings() -> settings:
    return settings(
        max_examples=int(os.environ.get("TXNLOG_MODEL_EXAMPLES", "50")),
        stateful_step_count=30,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def test_engine_matches_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LogSegment, "flush", _tracking_flush)
    run_state_machine_as_test(EngineModel, settings=_settings())


# --- engine bugs the machine found, as minimal examples -------------------------------------


def test_every_transactional_offset_commit_of_an_epoch_is_written(tmp_path: Path) -> None:
    """O-04: offset batches carry no sequence numbers, so they are never retries of each other
    (Kafka checks duplicates for client appends only); the second commit must land."""
    log = Log.open(tmp_path, clock=ManualClock())
    log.create_topic("alpha")
    tp = TopicPartition("alpha", 0)
    producer = log.producer("t", transaction_timeout_ms=TIMEOUT_MS)
    producer.init_transactions()
    for position in (5, 7):
        producer.begin_transaction()
        producer.send_offsets_to_transaction({tp: position}, GROUP)
        producer.commit_transaction()
        committed = log.committed(GROUP, [tp])[tp]
        assert committed is not None and committed.offset == position
    log.close()


def test_a_tail_lost_at_a_batch_boundary_takes_its_index_entries_along(tmp_path: Path) -> None:
    """X-20, TESTING scenario 4: a power failure can keep index writes and lose the log bytes
    they describe. Recovery must rebuild the indexes of the surviving prefix; a stale entry
    points into whatever is written next at that position."""
    clock = ManualClock()
    log = Log.open(tmp_path, clock=clock)
    log.create_topic("alpha", config={"index.interval.bytes": 1})
    tp = TopicPartition("alpha", 0)
    segment_path = tmp_path / tp.directory_name / "00000000000000000000.log"

    def append(*values: bytes) -> None:
        clock.advance(10)
        records = [(None, value, None, ()) for value in values]
        log.partition_log(tp).append(encode_records(records, now_ms=clock.time_ms()))

    append(b"a")
    log.partition_log(tp).flush()
    durable = segment_path.stat().st_size
    append(b"b")
    append(b"c")  # indexed at (offset 2, its position), then lost with b
    log.close()
    os.truncate(segment_path, durable)
    log = Log.open(tmp_path, clock=clock)
    plog = log.partition_log(tp)
    assert plog.log_end_offset == 1
    segment = plog._segments[-1]
    assert all(e.offset < 1 for e in segment.offset_index.entries()), "stale offset index"
    assert all(e.offset < 1 for e in segment.time_index.entries()), "stale time index"
    append(b"d", b"e", b"f")  # offsets 1..3, over the lost batches' positions
    append(b"g")
    values = [r.value for r in log.consumer("read_uncommitted").read(tp, 2)]
    assert values == [b"e", b"f", b"g"]
    log.close()
