"""The ``txnlog`` command, run for real (a subprocess of the installed console script)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import directory_bytes
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

TXNLOG = str(Path(sys.executable).with_name("txnlog"))


def txnlog(
    *args: object, stdin: str = "", tty_stderr: bool = False
) -> subprocess.CompletedProcess[str]:
    command = [TXNLOG, *map(str, args)]
    if not tty_stderr:
        return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
    leader, follower = pty.openpty()
    proc = subprocess.run(
        command, input=stdin, stdout=subprocess.PIPE, stderr=follower, text=True, timeout=120
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return subprocess.CompletedProcess(
        command, proc.returncode, proc.stdout, b"".join(chunks).decode(errors="replace")
    )


snapshot = directory_bytes


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """Committed, aborted and open ("hanging") transactions plus group offsets."""
    path = tmp_path / "log"
    log = Log.open(path)
    log.create_topic("orders", partitions=2)
    committer = log.producer("committer")
    committer.init_transactions()
    committer.begin_transaction()
    for i in range(5):
        committer.send("orders", b"c%d" % i, partition=i % 2)
    committer.send_offsets_to_transaction({TopicPartition("orders", 0): 3}, "billing")
    committer.commit_transaction()
    aborter = log.producer("aborter")
    aborter.init_transactions()
    aborter.begin_transaction()
    aborter.send("orders", b"aborted", partition=0)
    aborter.flush()
    aborter.abort_transaction()
    hanging = log.producer("hanging")
    hanging.init_transactions()
    hanging.begin_transaction()
    hanging.send("orders", b"open", partition=1)
    hanging.flush()
    log.close()
    return path


def test_listings_in_text_and_json(log_dir: Path) -> None:
    before = snapshot(log_dir)
    assert txnlog("topics", "list", log_dir).stdout.split() == ["orders"]
    described = json.loads(txnlog("topics", "describe", log_dir, "orders", "--json").stdout)
    partitions = {p["partition"]: p for p in described[0]["partitions"]}
    assert partitions[0]["log_end_offset"] == 6 and partitions[0]["last_stable_offset"] == 6
    assert partitions[1]["last_stable_offset"] == 3 < partitions[1]["log_end_offset"] == 4
    assert described[0]["config"]["segment.bytes"] == 1 << 30
    txns = {
        t["transactional_id"]: t
        for t in json.loads(txnlog("transactions", "list", log_dir, "--json").stdout)
    }
    assert {k: v["state"] for k, v in txns.items()} == {
        "aborter": "CompleteAbort",
        "committer": "CompleteCommit",
        "hanging": "Ongoing",
    }
    assert txns["hanging"]["partitions"] == "orders-1"
    text = txnlog("transactions", "list", log_dir).stdout
    assert "hanging" in text and "Ongoing" in text and "TRANSACTIONAL_ID" in text
    hanging = json.loads(
        txnlog("transactions", "find-hanging", log_dir, "--max-age-minutes", "0", "--json").stdout
    )
    assert [t["transactional_id"] for t in hanging["open_longer_than_limit"]] == ["hanging"]
    assert (
        json.loads(txnlog("transactions", "find-hanging", log_dir, "--json").stdout)[
            "open_longer_than_limit"
        ]
        == []
    )
    groups = json.loads(txnlog("groups", "describe", log_dir, "--json").stdout)
    assert groups["offsets"] == [
        {
            "group": "billing",
            "topic": "orders",
            "partition": 0,
            "committed_offset": 3,
            "last_stable_offset": 6,
            "lag": 3,
            "metadata": "",
        }
    ]
    assert json.loads(txnlog("groups", "list", log_dir, "--json").stdout) == ["billing"]
    assert snapshot(log_dir) == before  # nothing was modified by reading


def test_groups_describe_lists_each_ledger_by_its_opaque_key(log_dir: Path) -> None:
    """DESIGN §4 "Atomic commit": the CLI shows the ledgers with the key and sequence the
    committer chose; the engine gives them no meaning (no sink, no batch id)."""
    from txn_log.coordinator.txn_ref import TxnRef

    log = Log.open(log_dir)
    member = log.producer("member")
    member.init_transactions()
    member.begin_transaction()
    member.send("orders", b"m", partition=0)
    member.flush()
    ref = TxnRef("member", member.producer_id, member.producer_epoch)
    offsets = [("orders", 1, 2)]
    assert log.coordinator.commit_transactions("ledger-a", 7, [ref], group_id="g", offsets=offsets)
    log.close()
    described = json.loads(txnlog("groups", "describe", log_dir, "--json").stdout)
    (ledger,) = described["ledgers"]
    assert {k: v for k, v in ledger.items() if k != "timestamp_ms"} == {
        "ledger_key": "ledger-a",
        "last_sequence": 7,
        "status": "CompleteCommit",
        "group_id": "g",
        "transactions": 1,
    }
    text = txnlog("groups", "describe", log_dir).stdout
    assert "ledger-a" in text and "LEDGER_KEY" in text.upper()


def test_dump_shows_batches_markers_and_records(log_dir: Path) -> None:
    batches = json.loads(txnlog("dump", log_dir, "orders-0", "--records", "--json").stdout)
    kinds = [(b["base_offset"], b["transactional"], b["control"], b["crc_valid"]) for b in batches]
    assert kinds == [
        (0, True, False, True),
        (3, True, True, True),
        (4, True, False, True),
        (5, True, True, True),
    ]
    assert [r["value"] for r in batches[0]["records"]] == ["c0", "c2", "c4"]
    assert batches[1]["records"][0]["control"] == "COMMIT"
    assert batches[3]["records"][0]["control"] == "ABORT"
    from_offset = json.loads(txnlog("dump", log_dir, "orders-0", "--from", "4", "--json").stdout)
    assert [b["base_offset"] for b in from_offset] == [4, 5]
    txnindex = json.loads(txnlog("dump", log_dir, "orders-0", "--txnindex", "--json").stdout)
    assert [(t["first_offset"], t["last_offset"]) for t in txnindex] == [(4, 5)]
    assert txnlog("dump", log_dir, "orders-0", "--index", "--json").returncode == 0
    assert txnlog("dump", log_dir, "orders-0", "--timeindex").returncode == 0
    assert txnlog("dump", log_dir, "orders-0", "--snapshot", "--json").returncode == 0


def test_aborting_a_hanging_transaction_releases_a_reader(log_dir: Path) -> None:
    log = Log.open(log_dir)
    reader = log.consumer()
    tp = TopicPartition("orders", 1)
    assert reader.end_offset(tp) == 3  # stuck behind the open transaction
    result = txnlog("transactions", "abort", log_dir, "hanging")
    assert result.returncode == 0, result.stderr
    assert "Aborted the transaction of 'hanging'" in result.stdout
    assert reader.end_offset(tp) == log.partition_log(tp).log_end_offset == 5
    assert [r.value for r in reader.read(tp, 0)] == [b"c1", b"c3"]
    again = txnlog("transactions", "abort", log_dir, "hanging")
    assert again.returncode == 1 and "no open transaction" in again.stdout


def test_mistyped_names_get_one_line_naming_what_exists(log_dir: Path, tmp_path: Path) -> None:
    before = snapshot(log_dir)
    cases = [
        (("topics", "describe", log_dir, "ordrs"), "topic 'ordrs' does not exist", "orders"),
        (("dump", log_dir, "orders-7"), "partition 7", "0..1"),
        (("dump", tmp_path / "lgo", "orders-0"), "no txnlog directory", "log"),
        (("transactions", "describe", log_dir, "hangin"), "'hangin' not found", "hanging"),
        (("groups", "describe", log_dir, "bill"), "'bill'", "billing"),
        (("dump", log_dir, "orders"), "not TOPIC-PARTITION", "orders-0"),
    ]
    for args, missing, existing in cases:
        result = txnlog(*args)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and missing in lines[0] and existing in lines[0], lines
    assert not (tmp_path / "lgo").exists()
    assert snapshot(log_dir) == before


def test_verify_reports_and_repairs_a_torn_tail(log_dir: Path) -> None:
    assert txnlog("verify", log_dir).stdout.startswith("OK: 4 partition(s)")
    segment = log_dir / "orders-1" / "00000000000000000000.log"
    end = segment.stat().st_size
    with segment.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x01\x00torn")
    before = snapshot(log_dir)
    found = txnlog("verify", log_dir, "--json")
    assert found.returncode == 1
    (problem,) = json.loads(found.stdout)["problems"]
    assert problem["file"] == str(segment) and problem["position"] == end
    assert problem["repairable"] and "torn tail" in problem["problem"]
    assert snapshot(log_dir) == before  # verify alone changes nothing
    repaired = txnlog("verify", log_dir, "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert f"truncated a torn tail of 16 bytes at position {end}" in repaired.stdout
    assert segment.stat().st_size == end
    assert txnlog("verify", log_dir).returncode == 0


def test_verify_refuses_to_repair_corruption_before_the_tail(log_dir: Path) -> None:
    segment = log_dir / "orders-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[40] ^= 0x01  # inside the first batch; valid batches follow
    segment.write_bytes(bytes(data))
    for args in (("verify", log_dir), ("verify", log_dir, "--repair")):
        result = txnlog(*args, "--json")
        assert result.returncode == 1
        problems = json.loads(result.stdout)["problems"]
        assert any(
            p["file"] == str(segment)
            and p["position"] == 0
            and "before the tail" in p["problem"]
            and not p["repairable"]
            for p in problems
        ), problems
    assert segment.read_bytes() == bytes(data)


def test_progress_on_a_terminal_only(log_dir: Path) -> None:
    log = Log.open(log_dir)
    log.create_topic("big")
    producer = log.producer()
    for _ in range(30_000):
        producer.send("big", b"x" * 200, partition=0)
    producer.flush()
    on_tty = txnlog("verify", log_dir, tty_stderr=True)
    assert "\rverify:" in on_tty.stderr
    piped = txnlog("verify", log_dir)
    assert piped.stderr == "" and piped.stdout.startswith("OK")


def test_produce_and_consume(log_dir: Path) -> None:
    sent = txnlog(
        "produce", log_dir, "orders", "--partition", "0", "--key-separator", ":", stdin="a:1\nb:2\n"
    )
    assert sent.returncode == 0 and "Sent 2 record(s)" in sent.stderr
    txn = txnlog(
        "produce",
        log_dir,
        "orders",
        "--partition",
        "0",
        "--transactional-id",
        "console",
        stdin="t1\nt2\n",
    )
    assert txn.returncode == 0, txn.stderr
    consumed = txnlog(
        "consume",
        log_dir,
        "orders",
        "--partition",
        "0",
        "--from-beginning",
        "--print-key",
        "--timeout-ms",
        "0",
    )
    assert consumed.stdout.splitlines() == [
        "null\tc0",
        "null\tc2",
        "null\tc4",
        "a\t1",
        "b\t2",
        "null\tt1",
        "null\tt2",
    ]
    dirty = txnlog(
        "consume",
        log_dir,
        "orders",
        "--partition",
        "0",
        "--from-beginning",
        "--isolation-level",
        "read_uncommitted",
        "--max-messages",
        "4",
    )
    assert dirty.stdout.splitlines() == ["c0", "c2", "c4", "aborted"]
    nothing_new = txnlog("consume", log_dir, "orders", "--timeout-ms", "0")
    assert nothing_new.stdout == ""  # nothing new arrives


def test_topics_describe_starts_with_the_topic_and_shows_its_overrides_as_kafka_topics_does(
    tmp_path: Path,
) -> None:
    """Issue 26 item 8: the first line is the topic (kafka-topics --describe), its Configs are
    the values set on it, written as Kafka writes them; the housekeeping pass comes last."""
    path = tmp_path / "log"
    created = txnlog(
        "topics", "create", path, "orders", "--partitions", "2",
        "--config", "segment.bytes=1048576", "--config", "check.expected.offsets=true",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    lines = txnlog("topics", "describe", path, "orders").stdout.splitlines()
    assert lines[0].startswith("Topic: orders  TopicId: ")
    assert "PartitionCount: 2  ReplicationFactor: 1  " in lines[0]
    assert lines[0].endswith("Configs: check.expected.offsets=true,segment.bytes=1048576")
    assert lines[1] == "  Retention: retention.ms=604800000, retention.bytes=-1"
    assert lines[2].split()[0] == "PARTITION" and len(lines) == 6
    assert lines[-1] == "Last housekeeping pass (retention, log cleaner): never"


def test_groups_list_says_so_when_there_are_no_groups(tmp_path: Path) -> None:
    """Issue 26 item 8: an empty answer is a sentence on stderr, not silence; stdout (what a
    script reads) stays empty, and --json is an empty list."""
    path = tmp_path / "log"
    assert txnlog("init", path).returncode == 0
    listed = txnlog("groups", "list", path)
    assert listed.returncode == 0
    assert listed.stdout == ""
    assert listed.stderr == f"No consumer groups with committed offsets in {path}.\n"
    assert json.loads(txnlog("groups", "list", path, "--json").stdout) == []
