"""Batches Kafka's broker refuses, sent in Produce requests over a raw socket to a real
``txnlog serve`` (issue 24, defect 1): each is answered with Kafka's code (INVALID_RECORD 87,
CORRUPT_MESSAGE 2, MESSAGE_TOO_LARGE 10), writes nothing, and the partition stays readable
to the end by an unmodified client, with ``txnlog verify`` clean. Before the fix each was
acknowledged with error 0, and from then on every Fetch of the partition answered
CORRUPT_MESSAGE (or its log end had jumped by 2³¹ offsets).

The batches are the engine tests' (``tests.hostile_batches``): the server decides nothing of
its own, the engine's validator does (``log_validator``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile_batches import gzip_bomb
from tests.support import directory_bytes
from tests.txn_log.storage.test_log_validator import CASES
from tests.txn_wire.serve_process import TXNLOG, ServeProcess, start_serve
from tests.txn_wire.test_protocol_edges import batch, produce
from tests.txn_wire.wire_clients import RawClient, confluent_consumer, consume_to
from txn_log.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from txn_log.log import Log

CODES = {InvalidRecordError: 87, CorruptRecordError: 2, RecordTooLargeError: 10}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 1)
        log.create_topic("keyed", 1, {"cleanup.policy": "compact"})
    server = start_serve(path)
    try:
        yield server
    finally:
        server.stop()


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for process {pid}")


def test_every_refused_batch_is_answered_with_kafkas_code_and_writes_nothing(
    served: ServeProcess,
) -> None:
    client = RawClient(served.port)
    assert produce(client, batch([b"before-0", b"before-1"]))["error_code"] == 0
    before = directory_bytes(served.path, content_only=True)
    answers = {}
    for name, (records, error) in sorted(CASES.items()):
        assert error is not None
        answers[name] = produce(client, records)["error_code"]
        # a transactional batch without a transactional id is refused whole first (53)
        expected = 53 if name == "transactional-without-producer-id" else CODES[error]
        assert answers[name] == expected, (name, answers[name])
    assert directory_bytes(served.path, content_only=True) == before
    assert produce(client, batch([b"after"]))["error_code"] == 0
    client.close()
    consumer = confluent_consumer(served.bootstrap, "read_committed")
    try:
        got = consume_to(consumer, "orders", {0: 3})
    finally:
        consumer.close()
    assert [value for _, _, value in got] == [b"before-0", b"before-1", b"after"]
    verify = subprocess.run([TXNLOG, "verify", str(served.path)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    print(answers)


def test_a_compacted_topic_answers_a_keyless_record_with_INVALID_RECORD(
    served: ServeProcess,
) -> None:
    client = RawClient(served.port)
    keyless = produce(client, batch([b"no key"]), topic="keyed")
    assert keyless["error_code"] == 87
    assert "key" in str(keyless.get("error_message"))
    client.close()


def test_a_decompression_bomb_is_refused_and_the_servers_memory_stays_bounded(
    served: ServeProcess,
) -> None:
    """A 1 MB gzip batch inflating to 1 GiB: MESSAGE_TOO_LARGE, and the server's peak RSS
    grows by far less than the gigabyte (it inflates at most the limit and one step)."""
    client = RawClient(served.port)
    before = peak_rss_kib(served.process.pid)
    answer = produce(client, gzip_bomb(1 << 30))
    after = peak_rss_kib(served.process.pid)
    print(f"server peak RSS {before} KiB -> {after} KiB")
    assert answer["error_code"] == 10
    assert after - before < 300 * 1024
    assert produce(client, batch([b"still serving"]))["error_code"] == 0
    client.close()


def test_a_bad_batch_after_a_good_one_in_a_partition_writes_neither(served: ServeProcess) -> None:
    """A partition's records are all valid or none is appended: answering an error for a
    partition whose first batch was written would make a client resend it (a duplicate)."""
    from tests.hostile_batches import good_batch, with_header

    client = RawClient(served.port)
    before = directory_bytes(served.path, content_only=True)
    bad = with_header(good_batch([b"x", b"y"]), last_offset_delta=-1)
    assert produce(client, good_batch([b"first"]) + bad)["error_code"] == 87
    assert directory_bytes(served.path, content_only=True) == before
    client.close()
