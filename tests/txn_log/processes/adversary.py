"""Worker programs of the adversarial suite (``test_adversarial.py``), run as real OS processes.

Run from the repository root as ``python -m tests.txn_log.processes.adversary ROLE LOG WORK
SLOT GEN SEED``. Each worker prints one JSON line per step to stdout, flushed before it goes
on (the parent points stdout at a file of its own, so every line written before a moment is
readable after it, even from a worker that was SIGKILLed since). Every worker stops by itself
when ``WORK/stop`` exists.

Roles:

``idem``      an idempotent producer (``Log.producer()``): ``begin`` lists the records of one
              flush (values are unique: ``SLOT.gGEN.SEQ|padding``), ``acked`` follows once
              ``flush()`` returned, with each record's offset.
``txn``       a transactional producer (transactional id ``adv-SLOT``): ``begin`` lists the
              records (several partitions and topics, sometimes group offsets sent with
              ``send_offsets_to_transaction``), ``flushed`` gives their offsets, ``ending``
              says commit or abort *before* the call, ``ended`` follows once it returned.
``deleter``   deletes and re-creates the scratch topic: ``deleting`` before, ``deleted`` after,
              ``refused`` when an open transaction holds it (ConcurrentTransactionsError, or
              any retriable error),
              ``created`` after the re-creation; ``ready`` once the topic exists at start.
``retention`` calls ``PartitionLog.delete_old_segments()`` on the retained topic periodically.
``reader``    read_committed reads of random partitions (tail, rescans, random starts): one
              ``read`` line per read (see ``read_once``), ``read_error`` for a failed one.
``init``      one ``init_transactions()`` for ``adv-SLOT``: finishes whatever a killed instance
              left (aborts an open transaction, rolls a prepared commit forward).

Errors: a typed error the role expects is reported and handled (abort, new producer, retry);
an error that claims corruption is reported and the worker exits 4; a transactional worker
that cannot abort after an error exits 3 (the parent starts a replacement). Untyped exceptions
propagate (traceback on stderr, exit 1): errors must be typed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from txn_log.consumer.consumer import Consumer
from txn_log.errors import (
    CorruptIndexError,
    CorruptRecordError,
    RetriableError,
    TopicAlreadyExistsError,
    TxnLogError,
)
from txn_log.log import Log
from txn_log.producer.producer import Producer
from txn_log.record.codec import encode_records
from txn_log.topic_partition import TopicPartition

# The topics of a run: (name, partitions, config).
MAIN, OTHER, PLAIN, RETAINED, SCRATCH = "main", "other", "plain", "retained", "scratch"
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    MAIN: (3, {}),
    OTHER: (2, {}),
    # idempotent producers only: no open transaction holds its LSO back, so read_committed
    # reads run to the log end, where a batch is being written
    PLAIN: (1, {}),
    # small segments and a small retention, so retention deletes segments under the readers
    RETAINED: (1, {"segment.bytes": "4096", "retention.bytes": "16384"}),
    SCRATCH: (2, {}),  # deleted and re-created by the deleter while producers write to it
}
ALL_PARTITIONS = [TopicPartition(t, p) for t, (n, _) in TOPICS.items() for p in range(n)]
GROUP_OFFSETS_TP = TopicPartition(MAIN, 0)
TXN_TIMEOUT_MS = 20_000  # killed workers' transactions are finished by their replacement first
BATCH_SIZE = 1 << 20  # never reached: one batch per partition per flush, so offsets are known
EXIT_GAVE_UP = 3
EXIT_CORRUPT = 4
MAX_READ = 1000  # records per rescan or random-start read
HOT_PARTITIONS = [TopicPartition(t, 0) for t in (MAIN, PLAIN, RETAINED)]  # readers meet here
EMBEDDED_BATCH = encode_records([(b"k", b"mirrored" * 20, None, ())] * 3, now_ms=0)


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def now() -> float:
    """CLOCK_MONOTONIC: one clock for every process on the machine (Linux)."""
    return time.monotonic()


def claims_corruption(error: BaseException) -> bool:
    return (
        isinstance(error, CorruptRecordError | CorruptIndexError) or "corrupt" in str(error).lower()
    )


def error_fields(error: BaseException) -> dict[str, Any]:
    return {
        "error": type(error).__name__,
        "message": str(error)[:2000],
        "typed": isinstance(error, TxnLogError),
        "corrupt": claims_corruption(error),
    }


def value_id(value: bytes | None) -> str:
    return (value or b"?").split(b"|", 1)[0].decode(errors="replace")


def transactional_id(slot: str) -> str:
    return f"adv-{slot}"


def group_id(slot: str) -> str:
    return f"group-{slot}"


class Worker:
    """What every role shares: the log, a seeded random source, value ids, the stop file."""

    def __init__(self, log_dir: str, work_dir: str, slot: str, gen: int, seed: int) -> None:
        self.log = Log.open(log_dir)
        self.stop_file = Path(work_dir) / "stop"
        self.slot, self.gen = slot, gen
        self.rng = random.Random(seed)
        self.seq = 0
        self.units = 0
        emit(ev="start", slot=slot, gen=gen, pid=os.getpid(), t=now())

    def stopping(self) -> bool:
        return self.stop_file.exists()

    def pause(self, low: float, high: float) -> None:
        time.sleep(self.rng.uniform(low, high))

    def next_unit(self) -> str:
        self.units += 1
        return f"{self.slot}.g{self.gen}.u{self.units}"

    def records(self, topics: list[str], max_partitions: int, max_records: int) -> list[Any]:
        """[(vid, tp, value)] for one flush or transaction: random partitions, each value new."""
        mine = [tp for tp in ALL_PARTITIONS if tp.topic in topics]
        tps = self.rng.sample(mine, self.rng.randint(1, min(max_partitions, len(mine))))
        out = []
        for tp in tps:
            for _ in range(self.rng.randint(1, max_records)):
                self.seq += 1
                vid = f"{self.slot}.g{self.gen}.{self.seq:07d}"
                out.append((vid, tp, vid.encode() + b"|" + self.padding(tp.topic == PLAIN)))
        return out

    def padding(self, large: bool) -> bytes:
        """Mostly small values; some large ones (a batch of them is being written for longer,
        which widens every race with lock-free readers and ``verify``; half of them when
        ``large``, for the topic where readers meet such a batch); some holding a whole
        serialized record batch (mirrored Kafka data: a torn tail must be judged by the
        framing, not by searching the bytes, issue 12 #6)."""
        roll = self.rng.random()
        if roll < 0.05:
            return EMBEDDED_BATCH
        if roll < (0.5 if large else 0.15):
            return b"y" * self.rng.randint(1000, 4000)
        return b"x" * self.rng.randint(8, 120)


def offsets_of(records: list[Any], metadata: list[Any]) -> dict[str, int] | None:
    """Each record's offset from what ``flush()`` returned (one batch per partition)."""
    by_tp = {(m.topic_partition.topic, m.topic_partition.partition): m for m in metadata}
    out: dict[str, int] = {}
    for tp in {r[1] for r in records}:
        mine = [r[0] for r in records if r[1] == tp]
        meta = by_tp.get((tp.topic, tp.partition))
        if meta is None or meta.last_offset - meta.base_offset + 1 != len(mine):
            return None
        out.update({vid: meta.base_offset + i for i, vid in enumerate(mine)})
    return out


def begin_line(unit: str, records: list[Any], group_offset: int | None = None) -> None:
    writes = [[vid, tp.topic, tp.partition] for vid, tp, _ in records]
    emit(ev="begin", unit=unit, writes=writes, group_offset=group_offset, t=now())


def run_idem(w: Worker, topics: list[str]) -> None:
    producer = w.log.producer(batch_size=BATCH_SIZE)
    while not w.stopping():
        unit, records = w.next_unit(), w.records(topics, 3, 25)
        begin_line(unit, records)
        try:
            for _, tp, value in records:
                producer.send(tp.topic, value, partition=tp.partition)
            metadata = producer.flush()
        except TxnLogError as error:
            emit(ev="failed", unit=unit, **error_fields(error))
            if claims_corruption(error):
                sys.exit(EXIT_CORRUPT)
            producer = w.log.producer(batch_size=BATCH_SIZE)  # a fresh session (G-13)
            continue
        emit(ev="acked", unit=unit, offsets=offsets_of(records, metadata), t=now())
        w.pause(0.005, 0.04)


def init_with_retry(producer: Producer) -> None:
    for attempt in range(200):
        try:
            producer.init_transactions()
            return
        except RetriableError:  # the previous instance's transaction is still completing
            time.sleep(0.05 * min(attempt + 1, 10))
    producer.init_transactions()


def run_txn(w: Worker, topics: list[str]) -> None:
    producer = w.log.producer(
        transactional_id(w.slot), transaction_timeout_ms=TXN_TIMEOUT_MS, batch_size=BATCH_SIZE
    )
    init_with_retry(producer)
    emit(ev="initialized", producer_id=producer.producer_id, epoch=producer.producer_epoch)
    while not w.stopping():
        one_transaction(w, producer, topics)
        w.pause(0.005, 0.04)


def one_transaction(w: Worker, producer: Producer, topics: list[str]) -> None:
    unit, records = w.next_unit(), w.records(topics, 3, 15)
    group_offset = w.gen * 1_000_000 + w.units if w.rng.random() < 0.4 else None
    commit = w.rng.random() < 0.65
    begin_line(unit, records, group_offset)
    try:
        producer.begin_transaction()
        for _, tp, value in records:
            producer.send(tp.topic, value, partition=tp.partition)
        if group_offset is not None:
            offsets = {GROUP_OFFSETS_TP: group_offset}
            producer.send_offsets_to_transaction(offsets, group_id(w.slot))
        metadata = producer.flush()
        emit(ev="flushed", unit=unit, offsets=offsets_of(records, metadata))
        emit(ev="ending", unit=unit, commit=commit)
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
        emit(ev="ended", unit=unit, commit=commit, t=now())
    except TxnLogError as error:
        emit(ev="failed", unit=unit, **error_fields(error))
        if claims_corruption(error):
            sys.exit(EXIT_CORRUPT)
        try:
            producer.abort_transaction()
        except TxnLogError as second:
            emit(ev="gave_up", unit=unit, **error_fields(second))
            sys.exit(EXIT_CORRUPT if claims_corruption(second) else EXIT_GAVE_UP)
        emit(ev="ended", unit=unit, commit=False, t=now())


def ensure_scratch(log: Log) -> None:
    if SCRATCH not in log.topics():
        with contextlib.suppress(TopicAlreadyExistsError):  # a replaced deleter created it
            log.create_topic(SCRATCH, TOPICS[SCRATCH][0], TOPICS[SCRATCH][1])


def run_deleter(w: Worker) -> None:
    ensure_scratch(w.log)
    emit(ev="ready", t=now())
    while not w.stopping():
        w.pause(0.3, 1.2)
        emit(ev="deleting", t=now())
        try:
            w.log.delete_topic(SCRATCH)
        except RetriableError as error:  # ConcurrentTransactionsError: an open transaction
            emit(ev="refused", error=type(error).__name__, message=str(error)[:300], t=now())
            continue
        emit(ev="deleted", t=now())
        w.pause(0.0, 0.3)
        w.log.create_topic(SCRATCH, TOPICS[SCRATCH][0], TOPICS[SCRATCH][1])
        emit(ev="created", t=now())
    ensure_scratch(w.log)


def run_retention(w: Worker) -> None:
    while not w.stopping():
        for tp in (tp for tp in ALL_PARTITIONS if tp.topic == RETAINED):
            try:
                deleted = w.log.partition_log(tp).delete_old_segments()
            except RetriableError as error:  # another process is applying retention
                emit(ev="retention_busy", error=type(error).__name__, t=now())
                continue
            emit(ev="retention", tp=[tp.topic, tp.partition], deleted=deleted, t=now())
        w.pause(0.1, 0.4)


def read_once(
    consumer: Consumer, tp: TopicPartition, start: int, limit: int | None
) -> dict[str, Any]:
    """One read_committed read of [start, end) with end the LSO (or ``start + limit``), timed
    with the shared monotonic clock; the log start is taken after the read (retention may have
    moved it meanwhile)."""
    t0 = now()
    end = consumer.end_offset(tp)
    if limit is not None:
        end = min(end, start + limit)
    records = consumer.read(tp, start, end)
    t1 = now()
    return {
        "ev": "read",
        "tp": [tp.topic, tp.partition],
        "start": start,
        "end": end,
        "t0": t0,
        "t1": t1,
        "log_start": consumer.start_offset(tp),
        "records": [[r.offset, value_id(r.value)] for r in records],
    }


class Reader:
    """A read_committed reader's position per partition; ``step`` reads one partition once:
    mostly tailing, sometimes from the log start or from a random offset."""

    def __init__(self, log: Log, rng: random.Random) -> None:
        self.consumer = log.consumer("read_committed")
        self.rng = rng
        self.positions: dict[TopicPartition, int] = {}

    def step(self, tp: TopicPartition | None = None) -> dict[str, Any]:
        """One read of ``tp`` (by default: half the time one of a few hot partitions, so that
        readers, threads of one process especially, often scan the same segment tail at once)."""
        if tp is None:
            tp = self.rng.choice(HOT_PARTITIONS if self.rng.random() < 0.5 else ALL_PARTITIONS)
        try:
            roll = self.rng.random()
            limit = None
            if tp not in self.positions or roll < 0.08:
                start, limit = self.consumer.start_offset(tp), MAX_READ
            elif roll < 0.14:
                low = self.consumer.start_offset(tp)
                start, limit = (
                    self.rng.randint(low, max(low, self.consumer.end_offset(tp))),
                    MAX_READ,
                )
            else:
                start = self.positions[tp]
            observation = read_once(self.consumer, tp, start, limit)
            self.positions[tp] = observation["end"]
            return observation
        except (TxnLogError, OSError) as error:
            self.positions.pop(tp, None)  # restart from the log start
            return {
                "ev": "read_error",
                "tp": [tp.topic, tp.partition],
                "t": now(),
                **error_fields(error),
            }


def run_reader(w: Worker) -> None:
    reader = Reader(w.log, w.rng)
    while not w.stopping():
        emit(**reader.step())
        w.pause(0.002, 0.02)


def run_init(w: Worker) -> None:
    producer = w.log.producer(transactional_id(w.slot), transaction_timeout_ms=TXN_TIMEOUT_MS)
    init_with_retry(producer)
    emit(ev="initialized", producer_id=producer.producer_id, epoch=producer.producer_epoch)


def main(argv: list[str]) -> None:
    role, log_dir, work_dir, slot, gen, seed, *topics = argv
    worker = Worker(log_dir, work_dir, slot, int(gen), int(seed))
    roles = {
        "idem": lambda: run_idem(worker, topics),
        "txn": lambda: run_txn(worker, topics),
        "deleter": lambda: run_deleter(worker),
        "retention": lambda: run_retention(worker),
        "reader": lambda: run_reader(worker),
        "init": lambda: run_init(worker),
    }
    if role not in roles:
        raise SystemExit(f"unknown role {role!r}; valid roles are {', '.join(roles)}")
    try:
        roles[role]()
    except TxnLogError as error:
        emit(ev="error", **error_fields(error))
        sys.exit(EXIT_CORRUPT if claims_corruption(error) else EXIT_GAVE_UP)
    emit(ev="stopped", t=now())


if __name__ == "__main__":
    main(sys.argv[1:])
