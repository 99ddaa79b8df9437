"""The operator commands (issue 26) on a live log: each runs as a ``txnlog`` process while
other processes append to the topic and commit offsets to ``__consumer_offsets`` through the
same partition locks; nothing another process acknowledged is lost or clobbered, what the
command printed is what the log holds, and ``txnlog verify`` finds nothing wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.txn_log.cli.test_cli import txnlog
from tests.txn_log.processes.test_multiprocess import ROOT
from txn_log.log import Log
from txn_log.record.codec import encode_records
from txn_log.topic_partition import TopicPartition

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


class Peer:
    """A worker of ``ops_workers`` that writes until its stdin closes."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.txn_log.processes.ops_workers", *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.acked = 0

    def wait_acked(self, rounds: int) -> None:
        """Block until the worker acknowledged ``rounds`` rounds (it never stops by itself)."""
        assert self.process.stdout is not None
        while self.acked < rounds:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(f"worker exited: {self.process.stderr.read()}")  # type: ignore[union-attr]
            self.acked = json.loads(line)["round"]

    def stop(self) -> int:
        """Close its stdin, wait for it, return the last round it acknowledged."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        rest = self.process.stdout.read()  # through the buffer readline() filled
        err = self.process.stderr.read() if self.process.stderr else ""
        assert self.process.wait(timeout=120) == 0, err
        for line in rest.splitlines():
            self.acked = json.loads(line)["round"]
        return self.acked


@pytest.fixture
def live_log(tmp_path: Path) -> Iterator[tuple[Path, Peer, Peer]]:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
        log.group_offsets.commit("g", {P0: 0, P1: 0})
        log.group_offsets.commit("gone", {P0: 1})
    writer = Peer("produce-loop", str(path), "orders")
    committer = Peer("commit-loop", str(path), "busy", "orders")
    try:
        writer.wait_acked(3)
        committer.wait_acked(3)
        yield path, writer, committer
    finally:
        for peer in (writer, committer):
            if peer.process.poll() is None:
                peer.process.kill()
                peer.process.communicate()


def ends(path: Path) -> dict[TopicPartition, int]:
    with Log.open(path, read_only=True) as log:
        return {tp: log.partition_reader(tp).log_end_offset for tp in (P0, P1)}


def committed(path: Path, group: str) -> dict[TopicPartition, int]:
    with Log.open(path, read_only=True) as log:
        return {tp: om.offset for tp, om in log.group_offsets.groups().get(group, {}).items()}


def reset_g(path: Path, *options: str) -> dict[TopicPartition, int]:
    """``groups reset-offsets --group g OPTIONS --execute --json``: the offsets it committed."""
    result = txnlog(
        "groups", "reset-offsets", path, "--group", "g", *options, "--execute", "--json"
    )
    return plan(result)


def plan(result: subprocess.CompletedProcess[str]) -> dict[TopicPartition, int]:
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["executed"] is True
    return {
        TopicPartition(r["topic"], r["partition"]): r["new_offset"] for r in document["offsets"]
    }


def test_reset_offsets_and_delete_a_group_while_peers_write_and_commit(
    live_log: tuple[Path, Peer, Peer],
) -> None:
    path, writer, committer = live_log
    before = ends(path)
    latest = reset_g(path, "--all-topics", "--to-latest")
    after = ends(path)
    assert all(before[tp] <= latest[tp] <= after[tp] for tp in (P0, P1)), (before, latest, after)
    shifted = reset_g(path, "--topic", "orders:1", "--shift-by", "-2")
    assert shifted == {P1: latest[P1] - 2}
    deleted = txnlog("groups", "delete", path, "--group", "gone")
    assert deleted.returncode == 0, deleted.stderr
    committer.wait_acked(committer.acked + 2)  # the peers went on writing meanwhile
    writer.wait_acked(writer.acked + 2)
    last_commit = committer.stop()
    writer.stop()
    assert committed(path, "g") == {P0: latest[P0], P1: latest[P1] - 2}
    assert committed(path, "busy") == {P0: last_commit, P1: last_commit}  # nothing clobbered
    assert committed(path, "gone") == {}
    verify = txnlog("verify", path, "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr


HANGING_PRODUCER, HANGING_EPOCH = 9_000_001, 3


def hang(path: Path, tp: TopicPartition) -> int:
    """Open a transaction in ``tp`` that no coordinator transaction knows (what a lost marker
    or an unverified pre-KIP-890 batch leaves): its first offset pins the LSO."""
    with Log.open(path) as log:
        plog = log.partition_log(tp)
        batch = encode_records(
            [(None, b"hanging", None, ())],
            now_ms=log.clock.time_ms(),
            producer_id=HANGING_PRODUCER,
            producer_epoch=HANGING_EPOCH,
            base_sequence=0,
            transactional=True,
        )
        return plog.append(batch, sync=True, transaction_verified=True).base_offset


def test_abort_a_hanging_transaction_while_a_peer_appends(
    live_log: tuple[Path, Peer, Peer],
) -> None:
    path, writer, _ = live_log
    start = hang(path, P0)
    writer.wait_acked(writer.acked + 3)  # appends after the hanging batch: all above the LSO
    with Log.open(path, read_only=True) as log:
        assert log.partition_reader(P0).last_stable_offset == start
    result = txnlog(
        "transactions",
        "abort",
        path,
        "--topic",
        "orders",
        "--partition",
        "0",
        "--start-offset",
        start,
        "--producer-id",
        HANGING_PRODUCER,
        "--producer-epoch",
        HANGING_EPOCH,
    )
    assert result.returncode == 0, result.stderr
    assert f"for producer {HANGING_PRODUCER} (epoch {HANGING_EPOCH})" in result.stdout
    writer.wait_acked(writer.acked + 3)
    writer.stop()
    with Log.open(path, read_only=True) as log:
        reader = log.partition_reader(P0)
        end = reader.log_end_offset
        assert reader.last_stable_offset == end  # read_committed readers move on
        assert not reader.producer_state.ongoing_transactions()
        values = [r.value for r in log.consumer().read(P0, 0)]
    assert b"hanging" not in values
    assert len(values) == end - 2  # all but the aborted record and its marker
    verify = txnlog("verify", path, "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def get_offsets(path: Path, *options: object) -> dict[tuple[str, int], tuple[int, int]]:
    result = txnlog("get-offsets", path, *options, "--json")
    assert result.returncode == 0, result.stderr
    return {
        (r["topic"], r["partition"]): (r["offset"], r["timestamp"])
        for r in json.loads(result.stdout)
    }


def test_get_offsets_by_time_while_a_peer_appends_and_a_transaction_is_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
        producer = log.producer()
        for i in range(5):  # orders-0: offsets 0..4 stamped 1..5 s after the epoch
            producer.send("orders", b"old", partition=0, timestamp_ms=(i + 1) * 1000)
        producer.flush()
        producer.close()
    with Log.open(path) as log:
        open_txn = log.producer("open", 600_000)
        open_txn.init_transactions()
        open_txn.begin_transaction()
        open_txn.send("orders", b"undecided", partition=1)
        open_txn.flush()
        writer = Peer("produce-loop", str(path), "orders")
        try:
            writer.wait_acked(3)
            before = ends(path)
            assert get_offsets(
                path, "--topic", "orders", "--partitions", "0", "--time", "3000"
            ) == {("orders", 0): (2, 3000)}
            latest = get_offsets(path, "--time", "-1")
            committed_end = get_offsets(path, "--time", "-1", "--isolation", "read_committed")
            newest = get_offsets(path, "--topic", "orders", "--time", "-3")
            future = get_offsets(path, "--topic", "orders", "--time", str(2**62))
            after = ends(path)
            writer.wait_acked(writer.acked + 2)
        finally:
            writer.stop()
    assert before[P0] <= latest[("orders", 0)][0] <= after[P0]
    assert committed_end[("orders", 1)] == (0, -1)  # the LSO: the open transaction's start
    assert committed_end[("orders", 0)][0] >= before[P0]  # nothing open there
    assert newest[("orders", 0)][0] >= 5 and newest[("orders", 0)][1] > 5000
    assert future == {("orders", 0): (-1, -1), ("orders", 1): (-1, -1)}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--time", "-4"], "--time '-4' must be -1 (latest), -2 (earliest), -3 (max timestamp)"),
        (["--time", "yesterday"], "--time 'yesterday' must be -1 (latest)"),
        (["--topic", "nope"], "topic 'nope'"),
        (
            ["--topic", "orders", "--partitions", "0,2"],
            "'2' is not a partition of topic 'orders'; valid partitions are 0..1",
        ),
        (["--partitions", "0"], "--partitions needs --topic"),
    ],
)
def test_get_offsets_refusals_name_what_is_valid(
    tmp_path: Path, options: list[str], message: str
) -> None:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
    result = txnlog("get-offsets", path, *options)
    assert result.returncode == 2 and message in result.stderr, result


def dump_records(path: Path, partition: str, decoder: str) -> list[dict[str, Any]]:
    result = txnlog("dump", path, partition, decoder, "--json")
    assert result.returncode == 0, result.stderr
    return [record for batch in json.loads(result.stdout) for record in batch["records"]]


def test_dump_decodes_the_internal_topics_while_peers_commit(
    live_log: tuple[Path, Peer, Peer],
) -> None:
    """kafka-dump-log's decoders: every record of ``__consumer_offsets`` and
    ``__transaction_state`` shows what its reader decodes, markers their type, while a peer
    commits offsets; a decoder given the wrong topic says so per record and fails nothing."""
    path, _, committer = live_log
    with Log.open(path) as log:
        producer = log.producer("copier")
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("orders", b"copied", partition=1)
        producer.send_offsets_to_transaction({P0: 9}, "copying")
        producer.commit_transaction()
    assert txnlog("groups", "delete", path, "--group", "gone").returncode == 0
    committer.wait_acked(committer.acked + 2)
    offsets = dump_records(path, "__consumer_offsets-0", "--offsets-decoder")
    assert not [r for r in offsets if "decode_error" in r]
    commits = [r for r in offsets if r.get("kind") == "offset_commit"]
    assert {
        "kind": "offset_commit",
        "group": "copying",
        "partition": "orders-0",
        "committed_offset": 9,
        "leader_epoch": -1,
        "metadata": "",
    }.items() <= next(r for r in commits if r["group"] == "copying").items()
    assert any(r["group"] == "gone" and r.get("tombstone") for r in commits)
    assert sum(r["group"] == "busy" for r in commits) >= 2 * 3  # the peer's, two partitions
    assert any(r.get("control") == "COMMIT" for r in offsets)  # the transaction's marker
    states = dump_records(path, "__transaction_state-0", "--transaction-log-decoder")
    copier = [r for r in states if r.get("transactional_id") == "copier"]
    assert [r["state"] for r in copier][-3:] == ["Ongoing", "PrepareCommit", "CompleteCommit"]
    assert copier[-2]["partitions"] == "__consumer_offsets-0,orders-1"
    wrong = dump_records(path, "orders-0", "--transaction-log-decoder")
    assert wrong and all("decode_error" in r for r in wrong)
    committer.stop()
