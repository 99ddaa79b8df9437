"""Trusted holds (``PartitionLog._write_locked``): an append or marker write after this
object's own, with no other holder's change counted between (``FileLock`` hold count), skips
the catch-up with other processes; any other holder's change, any other kind of hold, and any
failure make the next one catch up in full.

Whether a write caught up is seen from outside: a catch-up looks for the segment a peer may
have rolled to by opening its name, and a trusted write opens no file at all (an audit hook
counts ``open`` events under the partition's directory). Two ``PartitionLog`` objects of one
directory are two holders exactly as two processes are (a lock file descriptor each; the
process test of the same rule is in ``processes/test_trusted_holds_processes.py``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.txn_log.storage.test_partition_log import batch, open_log, values
from txn_log.errors import ExpectedOffsetMismatchError
from txn_log.record.control import ControlType
from txn_log.storage.partition_log import PartitionLog

_watched: list[tuple[str, list[str]]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _watched and isinstance(args[0], str | bytes | os.PathLike):
        path = os.fsdecode(args[0])
        for directory, seen in _watched:
            if path.startswith(directory):
                seen.append(path)


sys.addaudithook(_audit)  # hooks cannot be removed: this one only counts while watching


@contextmanager
def opens_under(directory: Path) -> Iterator[list[str]]:
    """The files opened under ``directory`` while the block runs."""
    seen: list[str] = []
    entry = (str(directory), seen)
    _watched.append(entry)
    try:
        yield seen
    finally:
        _watched.remove(entry)


def opened_by(directory: Path, write: Callable[[], object]) -> list[str]:
    with opens_under(directory) as seen:
        write()
    return seen


def test_an_append_after_its_own_opens_nothing_and_one_after_a_peers_catches_up(
    tmp_path: Path,
) -> None:
    mine = open_log(tmp_path)
    mine.append(batch(2))  # the first write of an object catches up in full
    assert opened_by(tmp_path, lambda: mine.append(batch(1, start=2))) == []  # trusted
    peer = open_log(tmp_path)  # another holder: its own lock descriptor, like a process
    peer.append(batch(3, start=3))
    caught_up = opened_by(tmp_path, lambda: mine.append(batch(1, start=6)))
    assert caught_up  # looked for a segment the peer may have rolled to
    assert mine.log_end_offset == 7  # after the peer's batch, not over it
    assert opened_by(tmp_path, lambda: mine.append(batch(1, start=7))) == []
    assert values(open_log(tmp_path)) == [f"v{i}".encode() for i in range(8)]
    for log in (mine, peer):
        log.close()


def test_a_peers_refused_append_leaves_the_trust_but_its_marker_does_not(tmp_path: Path) -> None:
    mine = open_log(tmp_path, **{"check.expected.offsets": "true"})
    peer = open_log(tmp_path, **{"check.expected.offsets": "true"})  # opening counts a hold
    mine.append(batch(1, producer_id=7, epoch=0, seq=0, transactional=True))
    mine.append(batch(1, start=1))
    with pytest.raises(ExpectedOffsetMismatchError):
        peer.append(batch(1, start=2), expected_offset=0)  # refused: changed nothing
    assert opened_by(tmp_path, lambda: mine.append(batch(1, start=2))) == []
    peer.append_marker(ControlType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0)
    assert opened_by(tmp_path, lambda: mine.append(batch(1, start=3)))
    assert mine.log_end_offset == 5 and mine.last_stable_offset == 5
    assert [t.producer_id for t in mine.collect_aborted_txns(0, 5)] == [7]
    for log in (mine, peer):
        log.close()


@pytest.mark.parametrize(
    "own_hold",
    [
        pytest.param(lambda log: log.delete_records(1), id="delete_records"),
        pytest.param(lambda log: log.run_housekeeping(), id="housekeeping"),
        pytest.param(lambda log: log.repair(), id="repair"),
    ],
)
def test_any_other_own_hold_leaves_the_next_write_to_catch_up(
    tmp_path: Path, own_hold: Callable[[PartitionLog], object]
) -> None:
    mine = open_log(tmp_path)
    mine.append(batch(2))
    own_hold(mine)
    assert opened_by(tmp_path, lambda: mine.append(batch(1, start=2)))
    assert opened_by(tmp_path, lambda: mine.append(batch(1, start=3))) == []
    mine.close()


def test_a_failed_write_leaves_the_next_one_to_catch_up(tmp_path: Path) -> None:
    mine = open_log(tmp_path, **{"check.expected.offsets": "true"})
    mine.append(batch(2))
    with pytest.raises(ExpectedOffsetMismatchError):
        mine.append(batch(1, start=2), expected_offset=0)
    assert opened_by(tmp_path, lambda: mine.append(batch(1, start=2)))
    assert opened_by(tmp_path, lambda: mine.append(batch(1, start=3))) == []
    mine.close()
