"""A newcomer's first commands (issue 13): ``txnlog init`` and ``txnlog topics create`` on a
directory that is not a log yet, and help that says where each command's output goes.

Run for real: ``python -m txn_log.cli`` in a subprocess, as a user types it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import directory_bytes
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def txnlog(*args: object, stdin: str = "") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "txn_log.cli", *map(str, args)]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)


def topics_of(path: Path) -> list[str]:
    log = Log.open(path, read_only=True)
    try:
        return log.topics()
    finally:
        log.close()


@pytest.mark.parametrize("existing", ["missing", "empty"])
def test_topics_create_makes_the_log_when_the_path_is_missing_or_empty(
    tmp_path: Path, existing: str
) -> None:
    path = tmp_path / "data" / "log"  # the parent is missing too, as on a fresh checkout
    if existing == "empty":
        path.mkdir(parents=True)
    result = txnlog("topics", "create", path, "orders", "--partitions", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Created a new log at {path}.",
        "Created topic orders with 2 partition(s).",
    ]
    assert topics_of(path) == ["orders"]
    again = txnlog("topics", "create", path, "payments")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["Created topic payments with 1 partition(s)."]
    assert topics_of(path) == ["orders", "payments"]


def test_topics_create_still_refuses_a_directory_that_holds_something_else(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    before = directory_bytes(tmp_path)
    result = txnlog("topics", "create", tmp_path, "orders")
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "is not a txnlog directory" in line and "notes.txt" in line
    assert directory_bytes(tmp_path) == before


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("bad/name",), "bad/name"),
        (("orders", "--partitions", "0"), "partitions"),
        (("orders", "--config", "retention.ms=soon"), "retention.ms"),
        (("__consumer_offsets",), "reserved"),
    ],
)
def test_a_refused_topic_creates_no_log(
    tmp_path: Path, args: tuple[str, ...], complaint: str
) -> None:
    """Everything is validated before anything is written: a mistyped first command leaves no
    half-made log behind."""
    path = tmp_path / "log"
    result = txnlog("topics", "create", path, *args)
    assert result.returncode == 2, result.stdout
    assert complaint in result.stderr
    assert not path.exists()


def test_init_creates_an_empty_log_and_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "data" / "log"
    created = txnlog("init", path)
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines() == [f"Created a new log at {path}."]
    assert topics_of(path) == []
    Log.open(path).create_topic("orders")
    before = directory_bytes(path, content_only=True)
    again = txnlog("init", path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [f"{path} is already a txnlog directory; nothing to do."]
    assert directory_bytes(path, content_only=True) == before
    assert topics_of(path) == ["orders"]


def test_init_refuses_a_file_and_a_directory_that_holds_something_else(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    before = directory_bytes(tmp_path)
    on_dir = txnlog("init", tmp_path)
    on_file = txnlog("init", tmp_path / "notes.txt")
    assert on_dir.returncode == on_file.returncode == 2
    assert "is not a txnlog directory" in on_dir.stderr and "notes.txt" in on_dir.stderr
    assert "is a file" in on_file.stderr
    assert directory_bytes(tmp_path) == before


def test_first_commands_from_init_to_consume(tmp_path: Path) -> None:
    """The README's first commands, end to end: records produced on stdin are consumed back on
    stdout; each command's summary goes to stderr."""
    path = tmp_path / "log"
    assert txnlog("init", path).returncode == 0
    assert txnlog("topics", "create", path, "orders").returncode == 0
    sent = txnlog("produce", path, "orders", "--key-separator", ":", stdin="k1:hello\nk2:world\n")
    assert (sent.returncode, sent.stdout, sent.stderr) == (0, "", "Sent 2 record(s) to orders.\n")
    read = txnlog("consume", path, "orders", "--from-beginning", "--print-key", "--timeout-ms", "0")
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == ["k1\thello", "k2\tworld"]
    assert read.stderr == "Processed a total of 2 message(s).\n"
    log = Log.open(path, read_only=True)
    assert [r.key for r in log.consumer().read(TopicPartition("orders", 0), 0)] == [b"k1", b"k2"]


def test_help_says_where_records_come_from_and_where_output_goes() -> None:
    produce = " ".join(txnlog("produce", "--help").stdout.split())
    assert "stdin" in produce and "one record per line" in produce
    assert "--key-separator" in produce
    assert "summary" in produce and "stderr" in produce and "stdout stays empty" in produce
    consume = " ".join(txnlog("consume", "--help").stdout.split())
    assert "one record per line on stdout" in consume
    assert "summary" in consume and "stderr" in consume
    init = " ".join(txnlog("init", "--help").stdout.split())
    assert "empty" in init and "already" in init
    create = " ".join(txnlog("topics", "create", "--help").stdout.split())
    assert "creates the log" in create
