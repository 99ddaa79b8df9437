"""The one durable-write rule of the engine (issue 12 item 11): write a temporary file, fsync
it, rename it over the target, fsync the directory, so that after a crash (of the process or
of the machine) the target is the old file or the whole new one, and a rename that was relied
on (a reserved producer-id block, P-02) is never undone."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.txn_log.storage.test_partition_log import batch
from txn_log.errors import StorageError
from txn_log.log import FORMAT_FILE, TOPICS_DIR, Log, write_json_atomically
from txn_log.log_dir.producer_id_manager import ProducerIdManager
from txn_log.record.control import ControlType
from txn_log.storage.durable_file import is_temp_name, write_durably
from txn_log.storage.partition_log import PartitionLog
from txn_log.storage.producer_snapshot import write_snapshot
from txn_log.storage.producer_state_entry import ProducerStateEntry
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition


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


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Every fsync and fdatasync with the path synced, in order."""
    recorded: list[tuple[str, str]] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def spy(kind: str, real: Callable[[int], None]) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            recorded.append((kind, os.readlink(f"/proc/self/fd/{fd}")))
            real(fd)

        return sync

    monkeypatch.setattr(os, "fsync", spy("fsync", real_fsync))
    monkeypatch.setattr(os, "fdatasync", spy("fdatasync", real_fdatasync))
    yield recorded


def first_index(syncs: list[tuple[str, str]], predicate: Callable[[str, str], bool]) -> int:
    return next(i for i, (kind, path) in enumerate(syncs) if predicate(kind, path))


def test_a_new_segment_is_in_its_directory_durably_before_a_batch_in_it_is_acknowledged(
    tmp_path: Path, syncs: list[tuple[str, str]]
) -> None:
    """fdatasync of a new file does not make its directory entry durable: after a machine
    crash an acknowledged batch in a new segment would be gone with the file. The first
    segment (and the partition directory in the log directory), and a rolled one."""
    directory = tmp_path / "t-0"
    log = PartitionLog.open(
        directory, TopicPartition("t", 0), TopicConfig.from_mapping({"segment.bytes": "200"})
    )
    log.append(batch(1, value_size=150), sync=True)
    acknowledged = first_index(syncs, lambda kind, path: path.endswith(".log"))
    assert ("fsync", str(directory)) in syncs[:acknowledged], syncs
    assert ("fsync", str(tmp_path)) in syncs[:acknowledged], syncs
    syncs.clear()
    log.append(batch(1, start=1, value_size=150), sync=True)  # rolls to segment 1
    new_log = str(directory / "00000000000000000001.log")
    acknowledged = first_index(syncs, lambda kind, path: path == new_log)
    assert ("fsync", str(directory)) in syncs[:acknowledged], syncs


def test_the_first_aborted_transaction_index_of_a_segment_is_durable_before_its_marker(
    tmp_path: Path, syncs: list[tuple[str, str]]
) -> None:
    """B-09/B-10: the ABORT marker must never survive a machine crash without the .txnindex
    file that names it (its records would read as committed)."""
    log = PartitionLog.open(tmp_path, TopicPartition("t", 0), TopicConfig())
    log.append(batch(1, producer_id=3, epoch=0, seq=0, transactional=True))
    syncs.clear()
    log.append_marker(ControlType.ABORT, producer_id=3, producer_epoch=0, coordinator_epoch=0)
    txn_index = first_index(syncs, lambda kind, path: path.endswith(".txnindex"))
    marker_log = syncs[txn_index][1].replace(".txnindex", ".log")
    marker = first_index(syncs, lambda kind, path: path == marker_log)
    directory = syncs.index(("fsync", str(tmp_path)), txn_index)
    assert txn_index < directory < marker, syncs


def test_a_new_log_directory_is_durable_in_its_parent_before_the_log_is_used(
    tmp_path: Path, steps: list[tuple[str, str]]
) -> None:
    """A directory created is made durable in its parent (issue 13 item 5): otherwise a machine
    crash can take the whole new log, with the topics and data acknowledged in it, away. Every
    missing parent too (``Log.open`` creates them)."""
    root = tmp_path / "new" / "log"
    Log.open(root, housekeeping_interval_ms=None).close()
    format_file = steps.index(("rename", str(root / FORMAT_FILE)))
    assert ("fsync dir", str(tmp_path)) in steps[:format_file], steps
    assert ("fsync dir", str(tmp_path / "new")) in steps[:format_file], steps


def test_new_partition_directories_are_durable_before_the_topic_file_names_them(
    tmp_path: Path, steps: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``topics/<topic>.json`` is the commit point of a new partition: once it names three
    partitions, every one of them must survive a machine crash, or the partition reads as
    deleted forever (UnknownTopicOrPartitionError)."""
    root = tmp_path / "log"
    log = Log.open(root, housekeeping_interval_ms=None)
    log.create_topic("t", partitions=1)
    steps.clear()
    real_mkdir = os.mkdir

    def mkdir(path: str, mode: int = 0o777) -> None:
        steps.append(("mkdir", str(path)))
        real_mkdir(path, mode)

    monkeypatch.setattr(os, "mkdir", mkdir)
    log.create_partitions("t", 3)
    log.close()
    last_directory = steps.index(("mkdir", str(root / "t-2")))
    topic_file = steps.index(("rename", str(root / TOPICS_DIR / "t.json")))
    assert ("fsync dir", str(root)) in steps[last_directory:topic_file], steps
