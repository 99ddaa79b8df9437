"""kcat (the Debian package: a C command-line client on the system's own librdkafka build)
against ``txnlog serve``: it produces plainly and in a transaction, and consumes with
``-X isolation.level=read_committed`` / ``read_uncommitted`` beside committed and aborted
transactions the engine wrote (B-05, B-12). ``.ci/run`` installs kcat; without it on PATH these
tests are skipped, and the skip says which binary is missing and how to get it."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.txn_wire.mixed_transactions import (
    Row,
    Sent,
    by_partition,
    engine_rows,
    engine_transactions,
    in_send_order,
)
from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.wire_clients import WAIT_S

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(
    KCAT is None,
    reason="the kcat binary is not on PATH: install the Debian package (apt-get install kcat; "
    ".ci/run does) to run the kcat wire tests",
)
TOPIC = "orders"


def kcat(server: ServeProcess, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    assert KCAT is not None
    done = subprocess.run(
        [KCAT, "-b", server.bootstrap, "-q", *args],
        input=stdin,
        text=True,
        capture_output=True,
        timeout=WAIT_S,
    )
    if done.returncode != 0:
        raise AssertionError(f"kcat {args} exited {done.returncode}: {done.stderr}")
    return done


def kcat_produce(
    server: ServeProcess, partition: int, records: list[tuple[str, str]], *extra: str
) -> list[Sent]:
    lines = "".join(f"{key}:{value}\n" for key, value in records)
    kcat(server, "-P", "-t", TOPIC, "-p", str(partition), "-K", ":", *extra, stdin=lines)
    return [(partition, key.encode(), value.encode()) for key, value in records]


def kcat_consume(server: ServeProcess, isolation: str) -> list[Row]:
    """Every partition from the beginning to its end (``-e``: librdkafka's end of partition,
    the LSO under read_committed), as JSON lines."""
    done = kcat(
        server,
        "-C",
        "-t",
        TOPIC,
        "-o",
        "beginning",
        "-e",
        "-J",
        "-X",
        f"isolation.level={isolation}",
    )
    rows: list[Row] = []
    for line in done.stdout.splitlines():
        message = json.loads(line)
        key = None if message["key"] is None else message["key"].encode()
        value = None if message["payload"] is None else message["payload"].encode()
        rows.append((message["topic"], message["partition"], message["offset"], key, value))
    return sorted(rows, key=lambda row: (row[1], row[2]))


def test_kcat_produces_and_reads_exactly_the_committed_records_B05_B12(
    server: ServeProcess,
) -> None:
    committed = engine_transactions(server.path, TOPIC)
    committed += kcat_produce(server, 0, [(f"kp{i}", f"kcat-plain-{i}") for i in range(3)])
    committed += kcat_produce(
        server,
        1,
        [(f"kt{i}", f"kcat-txn-{i}") for i in range(3)],
        "-X",
        "transactional.id=kcat-txn",  # kcat commits the whole input as one transaction
    )

    read_committed = kcat_consume(server, "read_committed")
    assert in_send_order(read_committed) == by_partition(committed)
    assert read_committed == engine_rows(server.path, TOPIC, "read_committed")

    read_uncommitted = kcat_consume(server, "read_uncommitted")
    assert read_uncommitted == engine_rows(server.path, TOPIC, "read_uncommitted")
    extra = sorted(v or b"" for *_, v in set(read_uncommitted) - set(read_committed))
    assert extra == sorted(f"engine-txn-a1-{i}".encode() for i in range(6))  # the aborted ones
