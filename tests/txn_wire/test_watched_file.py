"""``WatchedFile``: the server's users and ACL files are re-read when they change, however
quickly and however alike the versions are, and a version that no longer loads leaves the last
good one in force."""

from __future__ import annotations

import json
from pathlib import Path

from txn_log.storage.durable_file import write_durably
from txn_wire.watched_file import WatchedFile


def _load(path: Path) -> dict[str, int]:
    value: dict[str, int] = json.loads(path.read_text())
    return value


def test_every_replacement_is_seen_even_same_size_within_one_clock_tick(tmp_path: Path) -> None:
    path = tmp_path / "file.json"
    write_durably(path, b'{"v": 0}')
    watched = WatchedFile(path, _load, _load(path))
    for version in range(1, 200):  # same size each time, far faster than mtime's tick
        write_durably(path, json.dumps({"v": version % 10}).encode())
        assert watched.current() == {"v": version % 10}


def test_a_version_that_no_longer_loads_keeps_the_last_good_one(tmp_path: Path) -> None:
    path = tmp_path / "file.json"
    write_durably(path, b'{"v": 1}')
    watched = WatchedFile(path, _load, _load(path))
    path.write_text("{broken")
    assert watched.current() == {"v": 1}
    path.unlink()
    assert watched.current() == {"v": 1}
    write_durably(path, b'{"v": 2}')
    assert watched.current() == {"v": 2}
