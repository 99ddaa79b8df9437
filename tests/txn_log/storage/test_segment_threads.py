"""Lock-free scans of one ``LogSegment`` object from several threads (DESIGN §3; F-25, F-26).

``PartitionLog`` hands its segment objects to lazy readers that run outside its mutex, in any
thread, while another process appends: a scan must judge the bytes against what it knew when
*it* began, and the valid end it shares with other scans only moves forward, whole batch by
whole batch (issue 12 item 7). Two ``LogSegment`` objects on the same files stand in for two
processes.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.txn_log.storage.batches import build_batch
from txn_log.record.batch_header import validate_batch
from txn_log.storage.file_names import LOG_SUFFIX, offset_file_name
from txn_log.storage.segment import LogSegment


def open_segment(directory: Path) -> LogSegment:
    directory.mkdir(parents=True, exist_ok=True)
    return LogSegment.open(directory, 0, index_interval_bytes=1 << 30)


def batches(count: int, *, records: int = 3) -> list[bytes]:
    return [build_batch(n * records, records) for n in range(count)]


def append_all(segment: LogSegment, data: list[bytes]) -> list[int]:
    return [segment.append(batch, validate_batch(batch)) for batch in data]


def write_raw(directory: Path, data: bytes) -> None:
    """Bytes a writer of another process puts at the end of the file (maybe half a batch)."""
    with (directory / offset_file_name(0, LOG_SUFFIX)).open("ab") as file:
        file.write(data)


@pytest.fixture
def fast_thread_switches() -> Iterator[None]:
    """Switch threads every microsecond, so that races between threads show within a second."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_a_scan_calls_nothing_corrupt_that_was_half_written_when_it_began(tmp_path: Path) -> None:
    writer, reader = open_segment(tmp_path), open_segment(tmp_path)
    data = batches(3)
    positions = append_all(writer, data[:2])
    write_raw(tmp_path, data[2][:70])  # another process is writing it
    early = reader.batches()
    assert next(early)[0] == positions[0]  # this scan has begun: it read the file's size
    write_raw(tmp_path, data[2][70:])  # the writer finished
    assert reader.refresh() == sum(map(len, data))  # a later scan moved the valid end past it
    assert [position for position, _ in early] == [positions[1]]  # the end of its snapshot


def test_a_batch_below_the_valid_end_is_read_again_before_it_is_called_corrupt(
    tmp_path: Path,
) -> None:
    """Bytes below the valid end change only when another process truncated and appended
    again; one that reads as a whole batch at the file's current size is not corruption."""
    writer, reader = open_segment(tmp_path), open_segment(tmp_path)
    positions = append_all(writer, batches(6))
    reader.refresh()
    writer.truncate_to(9)
    rewritten = build_batch(9, 40)  # longer than the three batches it replaces
    write_raw(tmp_path, rewritten[:-10])
    scan = reader.batches()
    assert next(scan)[0] == 0
    write_raw(tmp_path, rewritten[-10:])
    assert [position for position, _ in scan] == [*positions[1:3], positions[3]]


def test_an_appender_sharing_a_segment_with_reader_threads_writes_at_the_end(
    tmp_path: Path, fast_thread_switches: None
) -> None:
    """Reader threads advance the shared valid end over another process's batches while an
    appender of the same process (holding the partition lock) appends: the valid end used to
    move back when two threads accounted for the same batch, and the appender then wrote (or
    refused to write, calling the batches after it corruption) at a wrong position."""
    mine, other_process = open_segment(tmp_path), open_segment(tmp_path)
    data = batches(2000, records=1)
    partition_lock = threading.Lock()  # the partition's file lock between the two "processes"
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                mine.refresh()
        except BaseException as error:  # reported by the test's own thread
            errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for n, batch in enumerate(data):
            with partition_lock:
                (mine if n % 2 else other_process).append(batch, validate_batch(batch))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, repr(errors[0])
    assert (tmp_path / offset_file_name(0, LOG_SUFFIX)).read_bytes() == b"".join(data)
    assert (mine.refresh(), mine.next_offset) == (sum(map(len, data)), 2000)


def test_reader_threads_looking_up_the_offset_index_while_this_process_appends_keep_it_whole(
    tmp_path: Path, fast_thread_switches: None
) -> None:
    """The same mistake in the index files' cache: lock-free lookups (``find_batch_position``
    of every read) caught up with the file in several threads at once, cached new entries
    twice, and an appender of this process then wrote its entry at a wrong place (entries
    out of order on disk, or a refused append)."""
    mine = LogSegment.open(tmp_path, 0, index_interval_bytes=0)  # an entry for every batch
    other_process = LogSegment.open(tmp_path, 0, index_interval_bytes=0)
    data = batches(3000, records=1)
    partition_lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                mine.offset_index.lookup(1 << 40)
        except BaseException as error:  # reported by the test's own thread
            errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for n, batch in enumerate(data):
            with partition_lock:
                (mine if n % 2 else other_process).append(batch, validate_batch(batch))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, repr(errors[0])
    fresh = LogSegment.open(tmp_path, 0, index_interval_bytes=0)
    assert [entry.offset for entry in fresh.offset_index.entries()] == list(range(3000))
