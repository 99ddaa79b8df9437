"""A Hypothesis fuzz of record batches (issue 24): every header field and the bytes of the
records section mutated, the CRC recomputed so that the batch passes the CRC check, then
appended through the engine's API and through a real ``txnlog serve``'s Produce.

Each example is either refused with one of Kafka's error codes, and nothing is written, or
appended and readable; after every example the partition reads back in full (every record of
every accepted batch, in order) and ``txnlog verify``'s checks find nothing wrong with it. The
number of examples each run makes is printed (``TXNLOG_FUZZ_SCALE`` multiplies it; ``make
faults`` runs ten times as many).
"""

from __future__ import annotations

import os
import struct
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.batch_walk import iter_batches
from tests.hostile_batches import FIELDS, NOW, with_crc
from tests.support import directory_bytes
from tests.txn_wire.serve_process import TXNLOG, ServeProcess, start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.cli.verify_checks import check_partition
from txn_log.coordinator.transactional_append import append_client_batch
from txn_log.errors import TxnLogError
from txn_log.log import Log
from txn_log.record.batch_header import HEADER, HEADER_SIZE, Compression
from txn_log.record.codec import encode_records, iter_records
from txn_log.topic_partition import TopicPartition

SCALE = int(os.environ.get("TXNLOG_FUZZ_SCALE", "1"))
TOPICS = {"plain": {}, "keyed": {"cleanup.policy": "compact"}}
KAFKA_CODES = {
    2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    10: "MESSAGE_TOO_LARGE",
    32: "INVALID_TIMESTAMP",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH",
    48: "INVALID_TXN_STATE",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    76: "UNSUPPORTED_COMPRESSION_TYPE",
    87: "INVALID_RECORD",
}
EXTREMES = [0, 1, -1, -2, 2**15 - 1, -(2**15), 2**31 - 1, -(2**31), 2**32 - 2, 2**63 - 1, -(2**63)]
FORMATS = dict(zip(FIELDS, HEADER.format[1:], strict=True))  # ">qiib..." without the ">"

records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=12)),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
                 max_size=2),
    ),
    min_size=1,
    max_size=24,  # both walks of the validator: record by record up to 16, numpy above
)  # fmt: skip


@st.composite
def batches(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """(topic, a batch with one mutation and a recomputed CRC, what was mutated)."""
    topic = draw(st.sampled_from(sorted(TOPICS)))  # the kind: plain or compacted
    records = draw(records_strategy)
    codec = draw(st.sampled_from(list(Compression)))
    idempotent = draw(st.booleans())
    options: dict[str, Any] = {"compression": codec}
    if idempotent:
        options.update(producer_id=draw(st.integers(0, 3)), producer_epoch=0, base_sequence=0)
    batch = encode_records(
        [(k, v, NOW + i, tuple(h)) for i, (k, v, h) in enumerate(records)], now_ms=NOW, **options
    )
    where = draw(st.sampled_from(["header", "records", "records", "none"]))
    if where == "header":
        name = draw(st.sampled_from([f for f in FIELDS if f != "crc"]))
        size = struct.calcsize(">" + FORMATS[name])
        bound = 1 << (8 * size - 1)
        value = draw(st.one_of(st.sampled_from(EXTREMES), st.integers(-bound, bound - 1)))
        value = max(-bound, min(bound - 1, value))
        values = dict(zip(FIELDS, HEADER.unpack_from(batch), strict=True))
        values[name] = value
        batch = HEADER.pack(*values.values()) + batch[HEADER_SIZE:]
        return topic, with_crc(batch), f"{name}={value}"
    if where == "records":
        section = bytearray(batch[HEADER_SIZE:])
        kind = draw(st.sampled_from(["flip", "set", "cut", "grow"]))
        if kind in ("flip", "set") and section:
            at = draw(st.integers(0, len(section) - 1))
            section[at] = section[at] ^ 0xFF if kind == "flip" else draw(st.integers(0, 255))
        elif kind == "cut" and section:
            del section[draw(st.integers(0, len(section) - 1)) :]
        else:
            section += draw(st.binary(min_size=1, max_size=8))
        values = dict(zip(FIELDS, HEADER.unpack_from(batch), strict=True))
        values["batch_length"] = HEADER_SIZE - 12 + len(section)
        return topic, with_crc(HEADER.pack(*values.values()) + bytes(section)), f"records {kind}"
    return topic, batch, "none"


ROTATE = 200
"""Examples per pair of topics: each example reads its partition back in full, so a run moves
to fresh topics now and then rather than reading ever longer ones."""


@dataclass
class Tally:
    """What a run did: examples, by outcome, and, for the current topics (one per kind in
    ``TOPICS``, renamed every ``ROTATE`` examples), what every accepted batch added."""

    examples: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    generation: int = 0
    expected: int = 0  # records of the plain topic
    ends: dict[str, int] = field(default_factory=dict)
    latest: dict[bytes, bytes | None] = field(default_factory=dict)  # of the compacted topic

    def topic(self, kind: str) -> str:
        return f"{kind}{self.generation}"

    def count(
        self, outcome: str, create_topics: Callable[[dict[str, dict[str, str]]], None]
    ) -> None:
        self.examples += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if self.examples % ROTATE == 0:
            self.generation += 1
            self.expected, self.ends, self.latest = 0, {}, {}
            create_topics({self.topic(kind): config for kind, config in TOPICS.items()})

    def accepted(self, kind: str, batch: bytes) -> None:
        records = list(iter_records(batch))
        if kind == "plain":
            self.expected += len(records)
        else:
            self.latest.update((r.key, r.value) for r in records if r.key is not None)

    def check(self, kind: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
        """``records`` = (key, value) of a full read of the kind's topic. The plain topic
        holds every accepted record; the compacted one may have been cleaned (the server's
        housekeeping runs the cleaner), so it must hold the newest value of every key, and a
        deleted key (a tombstone) at most as a tombstone."""
        if kind == "plain":
            assert len(records) == self.expected
            return
        seen = dict(records)
        assert set(seen) <= set(self.latest), sorted(set(seen) - set(self.latest))
        for key, value in self.latest.items():
            if value is not None:
                assert seen.get(key) == value, (key, seen.get(key), value)
            else:
                assert seen.get(key) is None, (key, seen.get(key))


def unchanged_files(path: Path, topic: str) -> dict[str, bytes]:
    """What a refused append must leave as it was: every file of the log, but for the
    compacted topic's partition, which the cleaner of the server's housekeeping may rewrite
    at any time (its log end is checked instead)."""
    files = directory_bytes(path, content_only=True)
    return {name: data for name, data in files.items() if not name.startswith("keyed")}


def verify_clean(path: Path, topic: str) -> None:
    found = check_partition(path / f"{topic}-0", topic)
    assert found is not None and not found.problems, found.problems if found else "gone"


# --- through the engine's API ----------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Log, Tally]]:
    # no housekeeping thread: its cleaner would rewrite the compacted topic during a check
    log = Log.open(tmp_path_factory.mktemp("fuzz") / "log", housekeeping_interval_ms=None)
    tally = Tally()
    create_topics(log.path, {tally.topic(kind): config for kind, config in TOPICS.items()})
    yield log, tally
    print(f"\nbatch fuzz, engine API: {tally.examples} examples, {tally.outcomes}")
    log.close()
    run = subprocess.run([TXNLOG, "verify", str(log.path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def create_topics(path: Path, topics: dict[str, dict[str, str]]) -> None:
    """Create topics in the log at ``path`` from this process (another peer of a server's)."""
    with Log.open(path, housekeeping_interval_ms=None) as log:
        for topic, config in topics.items():
            log.create_topic(topic, 1, config)


@settings(
    max_examples=250 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=batches())
def test_a_mutated_batch_through_the_engine_is_refused_cleanly_or_readable(
    engine_log: tuple[Log, Tally], case: tuple[str, bytes, str]
) -> None:
    log, tally = engine_log
    kind, batch, mutation = case
    topic = tally.topic(kind)
    tp = TopicPartition(topic, 0)
    plog = log.partition_log(tp)
    before = directory_bytes(log.path, content_only=True)
    try:
        result = append_client_batch(log.coordinator, plog, batch, transactional_id=None)
    except TxnLogError as error:
        assert error.code in KAFKA_CODES, (mutation, error)
        assert directory_bytes(log.path, content_only=True) == before, mutation
        outcome = KAFKA_CODES[error.code]
    else:
        if not result.duplicate:
            tally.accepted(kind, batch)
        outcome = "appended"
    records = log.consumer("read_uncommitted").read(tp, plog.log_start_offset)
    tally.check(kind, [(r.key, r.value) for r in records])
    verify_clean(log.path, topic)
    tally.count(outcome, lambda topics: create_topics(log.path, topics))


# --- through txnlog serve --------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Tally]]:
    path = tmp_path_factory.mktemp("wirefuzz") / "log"
    tally = Tally()
    create_topics(path, {tally.topic(kind): config for kind, config in TOPICS.items()})
    server = start_serve(path)
    try:
        yield server, tally
    finally:
        code = server.stop()
        print(f"\nbatch fuzz, txnlog serve: {tally.examples} examples, {tally.outcomes}")
        assert code == 0, f"txnlog serve exited with {code}"
    run = subprocess.run([TXNLOG, "verify", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def log_end(client: RawClient, topic: str) -> int:
    latest = [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]
    answer = client.request(2, 6, {"replica_id": -1, "isolation_level": 0, "topics": latest})
    end: int = answer["topics"][0]["partitions"][0]["offset"]
    return end


def fetched_records(client: RawClient, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record a read_uncommitted Fetch from the log start returns, every
    batch decoded."""
    earliest = [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}]
    start = client.request(2, 6, {"replica_id": -1, "isolation_level": 0, "topics": earliest})
    partition = {
        "partition": 0,
        "fetch_offset": start["topics"][0]["partitions"][0]["offset"],
        "partition_max_bytes": 64 << 20,
    }
    body = {"max_wait": 0, "min_bytes": 1, "max_bytes": 64 << 20, "isolation_level": 0}
    body["topics"] = [{"topic": topic, "partitions": [partition]}]
    answer = client.request(1, 12, body)["responses"][0]["partitions"][0]
    assert answer["error_code"] == 0, answer
    data = answer["records"] or b""
    return [
        (record.key, record.value)
        for pos, header in iter_batches(data)
        if not header.is_control
        for record in iter_records(data[pos : pos + header.size_in_bytes])
    ]


@settings(
    max_examples=150 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=batches())
def test_a_mutated_batch_through_txnlog_serve_is_refused_cleanly_or_readable(
    served: tuple[ServeProcess, Tally], case: tuple[str, bytes, str]
) -> None:
    server, tally = served
    kind, batch, mutation = case
    topic = tally.topic(kind)
    client = RawClient(server.port)
    before = unchanged_files(server.path, topic)
    end_before = log_end(client, topic)
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    answer = client.request(0, 9, body)["responses"][0]["partition_responses"][0]
    code = answer["error_code"]
    if code:
        assert code in KAFKA_CODES, (mutation, answer)
        assert unchanged_files(server.path, topic) == before, mutation
        assert log_end(client, topic) == end_before, mutation
        outcome = KAFKA_CODES[code]
    else:
        if answer["base_offset"] >= tally.ends.get(topic, 0):  # not a retry from the cache
            tally.accepted(kind, batch)
            tally.ends[topic] = answer["base_offset"] + len(list(iter_records(batch)))
        outcome = "appended"
    tally.check(kind, fetched_records(client, topic))
    client.close()
    assert server.process.poll() is None, f"txnlog serve died on {mutation}"
    verify_clean(server.path, topic)
    tally.count(outcome, lambda topics: create_topics(server.path, topics))
