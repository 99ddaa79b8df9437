"""A writer that trusts its caches (its previous holds of the partitions and the coordinator
were its own: ``FileLock``'s hold count) meets what a peer process left when it was SIGKILLed
in the middle of a commit or abort (``txn_log/fault_points.py``): its batches, an aborted-index
entry whose marker never landed, a prepared transaction, half of its markers. The peer counted
each hold before its first change, so the writer's next commit catches up in full, writes
after the peer's batches (never over them), drops the stale index entry, rolls the prepared
transaction forward, and every reader sees exactly the committed records of both, with no
partition's LSO left behind.

Had a peer's change not been counted, the writer would append at the end it remembered, over
the peer's batches, and leave the prepared transaction pinning the LSO: the checks below fail
(tried by disabling the count). The last test isolates the one change of a peer whose other
holds the writer has already caught up on: an abort's index entry written before the peer died
(counting that hold after its change instead of before fails it: tried).

Seeds: ``TXNLOG_TEST_SEED=<n>`` replays a run; the seed is printed by every test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.txn_log.processes.test_txn_crash_points import ROOT, assert_ok, rng_for, run_worker
from tests.txn_log.processes.txn_workers import value_for
from tests.txn_log.storage.test_partition_log import batch, open_log, values
from txn_log.log import Log
from txn_log.producer.producer import Producer
from txn_log.topic_partition import TopicPartition

TOPIC = "out"
PARTITIONS = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
PEER = "peer"
PEER_RECORDS = 5


def commit_mine(producer: Producer, round_: int, count: int) -> list[bytes]:
    """One committed transaction of the writer in this process; the values it wrote (to each
    partition)."""
    values = [b"mine|%d|%d" % (round_, i) for i in range(count)]
    producer.begin_transaction()
    for value in values:
        for tp in PARTITIONS:
            producer.send(TOPIC, value, partition=tp.partition)
    producer.commit_transaction()
    return values


def visible(log: Log, tp: TopicPartition) -> tuple[list[int], list[bytes]]:
    records = log.consumer("read_committed").read(tp, 0)
    return [r.offset for r in records], [r.value or b"" for r in records]


@pytest.mark.parametrize(
    ("crash_point", "crash_after", "outcome", "peer_committed"),
    [
        ("append.before_write", 1, "commit", False),  # its init's state-log write
        ("append.before_write", 3, "commit", False),  # a data batch, counted, not written
        ("producer.after_first_batch", 2, "commit", False),
        ("txn.after_prepare", 1, "commit", True),
        ("txn.between_markers", 1, "commit", True),
        ("txn.before_complete", 1, "commit", True),
        ("marker.after_txn_index", 1, "abort", False),
        ("txn.between_markers", 1, "abort", False),
    ],
)
def test_a_peer_killed_mid_commit_is_caught_up_by_a_trusting_writer(
    tmp_path: Path, crash_point: str, crash_after: int, outcome: str, peer_committed: bool
) -> None:
    rng = rng_for(f"trusted-{crash_point}-{crash_after}-{outcome}")
    path = tmp_path / "log"
    log = Log.open(path)
    log.create_topic(TOPIC, partitions=len(PARTITIONS))
    producer = log.producer("mine")
    producer.init_transactions()
    mine = commit_mine(producer, 0, rng.randint(1, 4))
    mine += commit_mine(producer, 1, rng.randint(1, 4))  # its holds trusted by now
    parts = ",".join(f"{tp.partition}:{PEER_RECORDS}" for tp in PARTITIONS)
    peer = run_worker(
        "txn", path, PEER, outcome, TOPIC, parts, "group", "{}",
        crash_point=crash_point, crash_after=crash_after,
    )  # fmt: skip
    assert peer.returncode == -9, f"the peer was not killed at {crash_point}: {peer.stderr}"
    mine += commit_mine(producer, 2, rng.randint(1, 4))  # catches up on what the peer left
    assert_ok(run_worker("init", path, PEER))  # a new peer instance ends what is still open
    mine += commit_mine(producer, 3, 1)

    for reader in (log, Log.open(path)):  # this process's caches, then the files afresh
        for tp in PARTITIONS:
            offsets, values = visible(reader, tp)
            theirs = [value_for(PEER, tp.partition, i) for i in range(PEER_RECORDS)]
            assert [v for v in values if v.startswith(b"mine|")] == mine, (tp, values)
            assert [v for v in values if not v.startswith(b"mine|")] == (
                theirs if peer_committed else []
            ), (tp, values)
            assert offsets == sorted(set(offsets)), tp
            plog = reader.partition_log(tp)
            assert plog.last_stable_offset == plog.log_end_offset, tp
    producer.close()
    log.close()


MARKER_WRITER = """
import sys
from pathlib import Path
from txn_log.clock import ManualClock
from txn_log.record.control import ControlType
from txn_log.storage.partition_log import PartitionLog
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition
log = PartitionLog.open(Path(sys.argv[1]), TopicPartition("t", 0), TopicConfig.from_mapping({}),
                        clock=ManualClock(1_000))  # the batches' time: no roll
print("opened", flush=True)
sys.stdin.readline()
log.append_marker(ControlType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0)
"""


def test_a_peers_abort_index_entry_left_without_its_marker_is_dropped(tmp_path: Path) -> None:
    """The peer opened the partition (a counted hold) before the writer's last two appends,
    so the only change the writer has not seen is the entry of the abort the peer died in."""
    mine = open_log(tmp_path)
    mine.append(batch(1, producer_id=7, epoch=0, seq=0, transactional=True))  # open at 0
    env = {**os.environ, "TXNLOG_CRASH_POINT": "marker.after_txn_index"}
    peer = subprocess.Popen(
        [sys.executable, "-c", MARKER_WRITER, str(tmp_path)],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert peer.stdout is not None and peer.stdout.readline() == "opened\n"
        mine.append(batch(2, start=1))  # catches up on the peer's opening
        mine.append(batch(1, start=3))  # trusted
        assert peer.stdin is not None
        peer.stdin.write("go\n")
        peer.stdin.flush()
        assert peer.wait(timeout=60) == -signal.SIGKILL
    finally:
        if peer.poll() is None:
            peer.kill()
    mine.append(batch(1, start=4))  # the entry claims offset 4: dropped before it is taken
    for log in (mine, open_log(tmp_path)):
        assert log.collect_aborted_txns(0, log.log_end_offset) == []
        assert log.last_stable_offset == 0  # producer 7's transaction is still open
        assert values(log)[1:] == [b"v1", b"v2", b"v3", b"v4"]
    mine.close()
