"""The one durable-write rule of the engine (issue 12 item 11): write a temporary file, fsync
it, rename it over the target, fsync the directory, so that after a crash (of the process or
of the machine) the target is the old file or the whole new one, and a rename that was relied
on (a reserved producer-id block, P-02) is never undone."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from txn_log.errors import StorageError
from txn_log.log import write_json_atomically
from txn_log.producer_id_manager import ProducerIdManager
from txn_log.storage.durable_file import is_temp_name, write_durably
from txn_log.storage.producer_snapshot import write_snapshot
from txn_log.storage.producer_state_entry import ProducerStateEntry


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Every fsync (of a file or of a directory) and rename, in order, as they happen."""
    recorded: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        kind = "fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file"
        recorded.append((kind, os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: object, dst: object) -> None:
        recorded.append(("rename", str(dst)))
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    yield recorded


def assert_durable_write(steps: list[tuple[str, str]], target: Path) -> None:
    kinds = [kind for kind, _ in steps]
    assert kinds == ["fsync file", "rename", "fsync dir"], steps
    assert steps[1][1] == str(target) and steps[2][1] == str(target.parent)
    assert is_temp_name(Path(steps[0][1]).name)


def test_write_durably_fsyncs_the_file_then_renames_then_fsyncs_the_directory(
    tmp_path: Path, steps: list[tuple[str, str]]
) -> None:
    target = tmp_path / "state"
    write_durably(target, b"new")
    assert_durable_write(steps, target)
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_the_producer_id_block_file_is_written_durably(
    tmp_path: Path, steps: list[tuple[str, str]]
) -> None:
    """P-02: the block is reserved (directory fsynced) before any id of it is handed out."""
    manager = ProducerIdManager(tmp_path, block_size=5)
    assert manager.generate_producer_id() == 0
    assert_durable_write(steps, tmp_path / "producer-ids")
    steps.clear()
    assert [manager.generate_producer_id() for _ in range(4)] == [1, 2, 3, 4]
    assert steps == []  # ids of a reserved block come from memory
    assert ProducerIdManager(tmp_path).generate_producer_id() == 5


def test_snapshots_and_log_metadata_use_the_same_rule(
    tmp_path: Path, steps: list[tuple[str, str]]
) -> None:
    write_snapshot(tmp_path / "00000000000000000007.snapshot", [ProducerStateEntry(3, 0)])
    assert_durable_write(steps, tmp_path / "00000000000000000007.snapshot")
    steps.clear()
    write_json_atomically(tmp_path / "topic.json", {"name": "t"})
    assert_durable_write(steps, tmp_path / "topic.json")


def test_concurrent_writers_of_one_file_never_share_a_temporary_file(tmp_path: Path) -> None:
    """Temporary names are unique per process and thread: each write is whole, none fails."""
    target = tmp_path / "shared"
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            for i in range(40):
                write_durably(target, (b"%d-%d|" % (writer, i)) * 2000)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    data = target.read_bytes()
    assert data == data[: data.index(b"|") + 1] * 2000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state"
    write_durably(target, b"old")

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(StorageError, match=str(target)):
        write_durably(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
