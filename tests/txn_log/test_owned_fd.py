"""Descriptors close with their owner: a Log dropped without ``close()`` leaks none.

A process that leaked descriptors past 1024 hangs py4j's callback server (``select()``), which
is how an earlier full test run hung in its first ``foreachBatch`` (txn_log/owned_fd.py).

Only descriptors of files under the test's own directory are counted: other threads of the test
process (librdkafka's clients of earlier Kafka-mode tests, reconnecting in the background) open
and close sockets at any moment, which says nothing about the Log.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

from txn_log.file_lock import FileLock
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


def open_fds(under: Path) -> set[str]:
    """This process's descriptors of files under ``under`` (as ``fd -> path``)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith(str(under.resolve())):
            found.add(f"{fd} -> {target}")
    return found


def use_a_log(path: Path) -> None:
    log = Log.open(path)
    log.create_topic("t", partitions=3)
    producer = log.producer("tx")
    producer.init_transactions()
    producer.begin_transaction()
    for p in range(3):
        producer.send("t", b"v", partition=p)
    producer.commit_transaction()
    assert len(log.consumer().read(TopicPartition("t", 0), 0)) == 1  # segments are open now


def test_a_log_dropped_without_close_releases_its_descriptors(tmp_path: Path) -> None:
    gc.collect()
    before = open_fds(tmp_path)
    use_a_log(tmp_path / "log")
    gc.collect()
    assert open_fds(tmp_path) - before == set()


def test_close_releases_descriptors_at_once_and_twice_is_harmless(tmp_path: Path) -> None:
    before = open_fds(tmp_path)
    log = Log.open(tmp_path / "log")
    log.create_topic("t", partitions=2)
    assert open_fds(tmp_path) - before  # the log holds files open
    log.close()
    log.close()
    assert open_fds(tmp_path) - before == set()


def test_a_lock_dropped_while_unheld_closes_its_file(tmp_path: Path) -> None:
    gc.collect()
    before = open_fds(tmp_path)
    lock = FileLock(tmp_path / "x.lock")
    with lock:
        assert lock.held
    del lock
    gc.collect()
    assert open_fds(tmp_path) - before == set()
