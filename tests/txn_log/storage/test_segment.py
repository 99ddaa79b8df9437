"""LogSegment: appends, lock-free reads, recovery and truncation (DESIGN §2-3, TESTING 4).

Kafka's LogSegmentTest ideas: torn tails at every byte, a bit flip mid-segment, recovery that
rebuilds the same indexes as the appends did, lookups by offset and timestamp (T-10..T-17, F-30).
Two ``LogSegment`` objects on the same files stand in for two processes.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.txn_log.storage.batches import (
    BASE_TIMESTAMP,
    build_batch,
    build_control_batch,
    record_timestamps,
)
from txn_log.errors import CorruptRecordError, InvalidOffsetError
from txn_log.record.batch_header import validate_batch
from txn_log.storage.file_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
)
from txn_log.storage.offset_index import OffsetPosition
from txn_log.storage.segment import LogSegment
from txn_log.storage.time_index import TimestampOffset
from txn_log.storage.txn_index import AbortedTxn

INTERVAL = 300
MAX_BATCH = 1 << 20


def data_batches(count: int = 20, *, records: int = 3, start: int = 0) -> list[bytes]:
    """``count`` consecutive batches, record timestamps rising by 1 s per batch."""
    return [
        build_batch(
            start + n * records,
            records,
            timestamps=[BASE_TIMESTAMP + 1000 * n + r for r in range(records)],
        )
        for n in range(count)
    ]


def append_all(segment: LogSegment, batches: list[bytes]) -> list[int]:
    return [segment.append(batch, validate_batch(batch)) for batch in batches]


def open_segment(directory: Path, base: int = 0, interval: int = INTERVAL) -> LogSegment:
    directory.mkdir(parents=True, exist_ok=True)
    return LogSegment.open(directory, base, index_interval_bytes=interval)


def indexes(segment: LogSegment) -> tuple[list[OffsetPosition], list[TimestampOffset]]:
    return segment.offset_index.entries(), segment.time_index.entries()


def file_path(directory: Path, suffix: str, base: int = 0) -> Path:
    return directory / offset_file_name(base, suffix)


@dataclass(frozen=True)
class Template:
    """Files of a 20-batch segment, built once, and the indexes of every prefix."""

    batches: tuple[bytes, ...]
    positions: tuple[int, ...]
    log: bytes
    index: bytes
    time_index: bytes

    def prefix_indexes(self, count: int) -> tuple[list[OffsetPosition], list[TimestampOffset]]:
        return _prefix_indexes(self.batches, count)

    def install(self, directory: Path, log: bytes) -> LogSegment:
        directory.mkdir(parents=True)
        file_path(directory, LOG_SUFFIX).write_bytes(log)
        file_path(directory, INDEX_SUFFIX).write_bytes(self.index)
        file_path(directory, TIME_INDEX_SUFFIX).write_bytes(self.time_index)
        return open_segment(directory)


@cache
def _prefix_indexes(
    batches: tuple[bytes, ...], count: int
) -> tuple[list[OffsetPosition], list[TimestampOffset]]:
    """What appending the first ``count`` batches to a fresh segment writes to the indexes."""
    with tempfile.TemporaryDirectory() as directory:
        segment = open_segment(Path(directory))
        append_all(segment, list(batches[:count]))
        result = indexes(segment)
        segment.close()
    return result


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    directory = tmp_path_factory.mktemp("template")
    segment = open_segment(directory)
    batches = data_batches()
    positions = append_all(segment, batches)
    segment.close()
    return Template(
        tuple(batches),
        tuple(positions),
        file_path(directory, LOG_SUFFIX).read_bytes(),
        file_path(directory, INDEX_SUFFIX).read_bytes(),
        file_path(directory, TIME_INDEX_SUFFIX).read_bytes(),
    )


def surviving(template: Template, cut: int) -> int:
    """How many whole batches lie below byte ``cut``."""
    ends = [p + len(b) for p, b in zip(template.positions, template.batches, strict=True)]
    return sum(1 for end in ends if end <= cut)


# --- opening, appending, reading -----------------------------------------------------------------


def test_open_creates_the_log_and_two_indexes_but_not_the_txnindex(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, base=100)
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        assert file_path(tmp_path, suffix, 100).exists()
    assert not file_path(tmp_path, TXN_INDEX_SUFFIX, 100).exists()  # B-09: lazily
    assert (segment.size, segment.next_offset) == (0, 100)
    assert segment.first_batch_timestamp is None and segment.max_timestamp is None
    assert list(segment.batches()) == []
    assert segment.find_batch_position(100) is None


def test_append_writes_whole_batches_back_to_back(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    batches = data_batches(5)
    positions = append_all(segment, batches)
    assert positions == [sum(len(b) for b in batches[:n]) for n in range(5)]
    assert file_path(tmp_path, LOG_SUFFIX).read_bytes() == b"".join(batches)
    assert segment.size == sum(len(b) for b in batches)
    assert segment.next_offset == 15
    assert [(p, h.base_offset) for p, h in segment.batches()] == [
        (p, 3 * n) for n, p in enumerate(positions)
    ]
    assert segment.read_bytes(positions[2], len(batches[2])) == batches[2]
    with pytest.raises(CorruptRecordError, match="wanted"):
        segment.read_bytes(positions[4], len(batches[4]) + 1)


def test_batches_between_positions(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    positions = append_all(segment, data_batches(5))
    assert [p for p, _ in segment.batches(positions[1], positions[3])] == positions[1:3]
    assert [p for p, _ in segment.batches(positions[1], positions[3] + 1)] == positions[1:3]


@pytest.mark.parametrize("interval", [0, 1, 150, INTERVAL, 1000, 10**6])
def test_offset_index_follows_the_interval_rule(tmp_path: Path, interval: int) -> None:
    segment = open_segment(tmp_path, interval=interval)
    batches = data_batches(12)
    positions = append_all(segment, batches)
    expected, last = [], 0
    for position, batch in zip(positions, batches, strict=True):
        if position - last >= interval:
            expected.append(OffsetPosition(validate_batch(batch).last_offset, position))
            last = position
    assert segment.offset_index.entries() == expected
    if interval == 0:
        assert len(expected) == len(batches)  # every batch, the first one included
    if interval == 10**6:
        assert expected == []


def test_time_index_holds_the_max_timestamp_at_each_offset_entry(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, interval=0)
    append_all(segment, data_batches(3))
    assert segment.time_index.entries() == [
        TimestampOffset(BASE_TIMESTAMP + 2, 2),
        TimestampOffset(BASE_TIMESTAMP + 1002, 5),
        TimestampOffset(BASE_TIMESTAMP + 2002, 8),
    ]


def test_control_batches_are_never_time_indexed_f30_t13(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, interval=0)
    data = build_batch(
        0,
        2,
        timestamps=[100, 110],
        transactional=True,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )
    marker = build_control_batch(2, producer_id=7, timestamp=10**12)
    later = build_batch(3, 1, timestamps=[120])
    append_all(segment, [data, marker, later])
    assert segment.offset_index.entries() == [
        OffsetPosition(1, 0),
        OffsetPosition(2, len(data)),
        OffsetPosition(3, len(data) + len(marker)),
    ]
    assert segment.time_index.entries() == [TimestampOffset(110, 1), TimestampOffset(120, 3)]
    assert segment.max_timestamp == 120
    assert segment.find_offset_by_timestamp(115, 0, record_timestamps) == 3
    assert segment.find_offset_by_timestamp(121, 0, record_timestamps) is None  # not the marker


def test_time_index_only_grows(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, interval=0)
    stamps = [500, 400, 500, 600, 100, 600, 700]
    batches = [build_batch(n, 1, timestamps=[t]) for n, t in enumerate(stamps)]
    append_all(segment, batches)
    assert segment.time_index.entries() == [
        TimestampOffset(500, 0),
        TimestampOffset(600, 3),
        TimestampOffset(700, 6),
    ]
    assert segment.max_timestamp == 700


def test_first_and_max_timestamps_for_rolling_and_retention_t10(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    append_all(
        segment,
        [
            build_batch(0, 2, timestamps=[50, 40]),
            build_batch(2, 1, timestamps=[900]),
            build_batch(3, 1, timestamps=[300]),
        ],
    )
    assert segment.first_batch_timestamp == 50
    assert segment.max_timestamp == 900
    reopened = open_segment(tmp_path)
    assert (reopened.first_batch_timestamp, reopened.max_timestamp) == (50, 900)


def test_find_batch_position_uses_index_then_scans(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, base=1000)
    batches = data_batches(10, start=1000)
    positions = append_all(segment, batches)
    assert len(segment.offset_index.entries()) >= 2
    for offset in range(1000, 1030):
        assert segment.find_batch_position(offset) == positions[(offset - 1000) // 3]
    assert segment.find_batch_position(0) == 0
    assert segment.find_batch_position(1030) is None


@pytest.mark.parametrize(
    "mutation",
    ["bad_crc", "wrong_header", "offset_back"],
)
def test_bad_append_is_refused_and_writes_nothing(tmp_path: Path, mutation: str) -> None:
    segment = open_segment(tmp_path)
    append_all(segment, data_batches(2))
    before = file_path(tmp_path, LOG_SUFFIX).read_bytes()
    batch = build_batch(6, 2)
    header = validate_batch(batch)
    if mutation == "bad_crc":
        batch = batch[:-1] + bytes([batch[-1] ^ 1])
        error: type[Exception] = CorruptRecordError
    elif mutation == "wrong_header":
        header = validate_batch(build_batch(6, 3))
        error = CorruptRecordError
    else:
        batch = build_batch(5, 2)
        header = validate_batch(batch)
        error = InvalidOffsetError
    with pytest.raises(error, match="position"):
        segment.append(batch, header)
    assert file_path(tmp_path, LOG_SUFFIX).read_bytes() == before
    assert segment.next_offset == 6


# --- many processes ------------------------------------------------------------------------------


def test_another_process_sees_appends_after_refresh(tmp_path: Path) -> None:
    writer = open_segment(tmp_path)
    reader = open_segment(tmp_path)
    batches = data_batches(8)
    positions = append_all(writer, batches)
    assert reader.size == 0  # a cache of the file
    assert reader.find_batch_position(20) == positions[6]  # index entries of the writer
    assert reader.refresh() == writer.size
    assert (reader.next_offset, reader.max_timestamp) == (writer.next_offset, writer.max_timestamp)
    assert [p for p, _ in reader.batches()] == positions


def test_writers_taking_turns_build_one_valid_segment(tmp_path: Path) -> None:
    """Two processes appending in turn (each under the partition lock) catch up first."""
    first, second = open_segment(tmp_path), open_segment(tmp_path)
    batches = data_batches(12)
    for n, batch in enumerate(batches):
        (first if n % 3 else second).append(batch, validate_batch(batch))
    reference = open_segment(tmp_path / "ref")
    append_all(reference, batches)
    assert file_path(tmp_path, LOG_SUFFIX).read_bytes() == b"".join(batches)
    assert indexes(first) == indexes(reference) == indexes(second)


def test_a_batch_being_written_is_not_there_yet(tmp_path: Path) -> None:
    writer = open_segment(tmp_path)
    batches = data_batches(3)
    append_all(writer, batches[:2])
    log = file_path(tmp_path, LOG_SUFFIX)
    with log.open("ab") as file:
        file.write(batches[2][:70])  # half written
    reader = open_segment(tmp_path)
    assert reader.size == writer.size
    assert len(list(reader.batches())) == 2
    with log.open("ab") as file:
        file.write(batches[2][70:])
    assert reader.refresh() == sum(map(len, batches))
    assert reader.next_offset == 9


def test_append_overwrites_a_dead_writers_torn_batch(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    batches = data_batches(4)
    append_all(segment, batches[:2])
    with file_path(tmp_path, LOG_SUFFIX).open("ab") as file:
        file.write(batches[2][:100])  # a writer died here
    survivor = open_segment(tmp_path)
    assert survivor.append(batches[2], validate_batch(batches[2])) == segment.size
    survivor.append(batches[3], validate_batch(batches[3]))
    assert file_path(tmp_path, LOG_SUFFIX).read_bytes() == b"".join(batches)


def test_append_cuts_a_torn_batch_longer_than_the_new_one(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    batches = data_batches(2)
    append_all(segment, batches[:1])
    with file_path(tmp_path, LOG_SUFFIX).open("ab") as file:
        file.write(build_batch(3, 100)[:900])  # a big batch, torn
    segment.append(batches[1], validate_batch(batches[1]))
    assert file_path(tmp_path, LOG_SUFFIX).read_bytes() == b"".join(batches)


def test_append_after_a_crash_that_kept_index_entries_of_a_lost_batch(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, interval=0)
    batches = data_batches(4)
    positions = append_all(segment, batches)
    segment.txn_index.append(AbortedTxn(1, 0, 10, 11))  # its marker was in the lost batch
    os.truncate(file_path(tmp_path, LOG_SUFFIX), positions[3] + 20)  # the page cache lost it
    survivor = open_segment(tmp_path, interval=0)
    survivor.append(batches[3], validate_batch(batches[3]))
    reference = open_segment(tmp_path / "ref", interval=0)
    append_all(reference, batches)
    assert indexes(survivor) == indexes(reference)
    assert survivor.txn_index.entries() == []


def test_append_refuses_to_cut_corruption_that_valid_batches_follow(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, interval=10**6)
    batches = data_batches(6)
    positions = append_all(segment, batches)
    log = file_path(tmp_path, LOG_SUFFIX)
    raw = bytearray(log.read_bytes())
    raw[positions[3] + 40] ^= 0x10
    log.write_bytes(raw)
    other = open_segment(tmp_path, interval=10**6)
    assert other.size == positions[3]  # readers stop there silently
    extra = build_batch(18, 1)
    with pytest.raises(CorruptRecordError, match=f"position {positions[3]}") as info:
        other.append(extra, validate_batch(extra))
    assert str(log) in str(info.value)
    assert log.read_bytes() == raw
    with pytest.raises(CorruptRecordError, match=str(log)):
        list(segment.batches())  # below the size this process validated: corruption


def test_a_file_cut_under_a_reader_is_not_reported_as_corruption(tmp_path: Path) -> None:
    writer, reader = open_segment(tmp_path), open_segment(tmp_path)
    positions = append_all(writer, data_batches(6))
    reader.refresh()
    os.truncate(file_path(tmp_path, LOG_SUFFIX), positions[4] + 10)
    assert [p for p, _ in reader.batches()] == positions[:4]
    assert (reader.size, reader.next_offset) == (positions[4], 12)


def test_truncation_by_another_process_is_noticed(tmp_path: Path) -> None:
    writer, reader = open_segment(tmp_path), open_segment(tmp_path)
    positions = append_all(writer, data_batches(6))
    reader.refresh()
    writer.truncate_to(9)
    assert reader.refresh() == positions[3]
    assert reader.next_offset == 9


# --- recovery (TESTING scenario 4) ---------------------------------------------------------------


def test_recover_clean_segment_changes_nothing(tmp_path: Path, template: Template) -> None:
    segment = template.install(tmp_path / "s", template.log)
    recovery = segment.recover(MAX_BATCH)
    assert (recovery.truncated_bytes, recovery.truncated_at) == (0, None)
    assert (recovery.valid_bytes, recovery.batch_count, recovery.next_offset) == (
        len(template.log),
        20,
        60,
    )
    assert indexes(segment) == template.prefix_indexes(20)


def test_recover_rebuilds_lost_or_garbage_indexes(tmp_path: Path, template: Template) -> None:
    segment = template.install(tmp_path / "s", template.log)
    file_path(tmp_path / "s", INDEX_SUFFIX).write_bytes(b"\x07" * 21)
    file_path(tmp_path / "s", TIME_INDEX_SUFFIX).write_bytes(b"")
    segment.recover(MAX_BATCH)
    assert indexes(segment) == template.prefix_indexes(20)
    segment.offset_index.sanity_check()
    segment.time_index.sanity_check()


def test_recover_truncates_at_every_byte_of_the_last_two_batches(
    tmp_path: Path, template: Template
) -> None:
    for cut in range(template.positions[18], len(template.log)):
        segment = template.install(tmp_path / f"cut{cut}", template.log[:cut])
        kept = surviving(template, cut)
        recovery = segment.recover(MAX_BATCH)
        valid = template.positions[kept] if kept < 20 else len(template.log)
        assert recovery.valid_bytes == valid, cut
        assert recovery.truncated_bytes == cut - valid
        assert recovery.next_offset == 3 * kept
        assert indexes(segment) == template.prefix_indexes(kept), cut
        assert file_path(tmp_path / f"cut{cut}", LOG_SUFFIX).stat().st_size == valid
        segment.close()


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_recover_truncates_garbage_from_a_random_position_to_the_end(
    tmp_path_factory: pytest.TempPathFactory, template: Template, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(template.log) - 1), label="garbage starts at")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    garbage = bytearray(random.Random(seed).randbytes(len(template.log) - start))
    garbage[0] ^= 0xFF if garbage[0] == template.log[start] else 0  # really changed there
    directory = tmp_path_factory.mktemp("garbage")
    segment = template.install(directory / "s", template.log[:start] + bytes(garbage))
    kept = surviving(template, start)
    recovery = segment.recover(MAX_BATCH)
    assert recovery.valid_bytes == (template.positions[kept] if kept < 20 else len(template.log))
    assert indexes(segment) == template.prefix_indexes(kept)
    again = open_segment(directory / "s").recover(MAX_BATCH)  # twice = once
    assert again.truncated_bytes == 0 and indexes(segment) == template.prefix_indexes(kept)


def _flip(log: bytes, position: int, bit: int) -> bytes:
    raw = bytearray(log)
    raw[position] ^= 1 << bit
    return bytes(raw)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_a_bit_flip_before_the_tail_is_an_error_naming_file_and_position(
    tmp_path_factory: pytest.TempPathFactory, template: Template, data: st.DataObject
) -> None:
    number = data.draw(st.integers(0, 18), label="batch")
    size = len(template.batches[number])
    # Every byte the CRC, length or magic checks cover (not base offset or leader epoch).
    inside = data.draw(st.sampled_from([*range(8, 12), *range(16, size)]), label="byte")
    bit = data.draw(st.integers(0, 7), label="bit")
    position = template.positions[number]
    directory = tmp_path_factory.mktemp("flip") / "s"
    segment = template.install(directory, _flip(template.log, position + inside, bit))
    with pytest.raises(CorruptRecordError, match=f"position {position}\\b") as info:
        segment.recover(MAX_BATCH)
    assert str(file_path(directory, LOG_SUFFIX)) in str(info.value)
    assert file_path(directory, LOG_SUFFIX).stat().st_size == len(template.log)  # nothing cut


def test_a_base_offset_going_back_is_corruption_even_with_a_valid_crc(
    tmp_path: Path, template: Template
) -> None:
    position = template.positions[10]
    segment = template.install(tmp_path / "s", _flip(template.log, position + 7, 3))  # 30 -> 22
    with pytest.raises(CorruptRecordError, match=f"position {position}.*offsets"):
        segment.recover(MAX_BATCH)


def test_a_bit_flip_in_the_last_batch_is_a_torn_tail(tmp_path: Path, template: Template) -> None:
    segment = template.install(tmp_path / "s", _flip(template.log, template.positions[19] + 30, 0))
    recovery = segment.recover(MAX_BATCH)
    assert recovery.truncated_at == template.positions[19]
    assert recovery.reason is not None and "CRC" in recovery.reason
    assert indexes(segment) == template.prefix_indexes(19)


def test_no_torn_tail_allowed_in_a_segment_that_is_not_the_last(
    tmp_path: Path, template: Template
) -> None:
    cut = len(template.log) - 5
    segment = template.install(tmp_path / "s", template.log[:cut])
    with pytest.raises(CorruptRecordError, match="not the last"):
        segment.recover(MAX_BATCH, allow_torn_tail=False)
    assert file_path(tmp_path / "s", LOG_SUFFIX).stat().st_size == cut


def test_a_batch_over_max_batch_bytes_at_the_tail_is_dropped(
    tmp_path: Path, template: Template
) -> None:
    segment = template.install(tmp_path / "s", template.log + build_batch(60, 40))
    recovery = segment.recover(1000)
    assert recovery.truncated_at == len(template.log)
    assert recovery.reason is not None and "maximum" in recovery.reason


def test_recover_twice_gives_the_same_files_as_once(tmp_path: Path, template: Template) -> None:
    directory = tmp_path / "s"
    segment = template.install(directory, template.log[:-7])
    segment.txn_index.append(AbortedTxn(5, 3, 10, 11))
    segment.txn_index.append(AbortedTxn(6, 12, 59, 59))  # its marker was in the torn batch
    segment.recover(MAX_BATCH)
    once = {
        s: file_path(directory, s).read_bytes()
        for s in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
    }
    assert segment.txn_index.entries() == [AbortedTxn(5, 3, 10, 11)]
    second = open_segment(directory).recover(MAX_BATCH)
    assert second.truncated_bytes == 0
    for suffix, content in once.items():
        assert file_path(directory, suffix).read_bytes() == content


# --- truncation ---------------------------------------------------------------------------------


def test_truncate_to_removes_whole_batches_and_index_entries(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, interval=0)
    batches = data_batches(8)
    positions = append_all(segment, batches)
    segment.txn_index.append(AbortedTxn(1, 0, 5, 6))
    segment.txn_index.append(AbortedTxn(1, 9, 14, 15))
    removed = segment.truncate_to(13)  # inside batch 4 ([12, 14]): the batch goes whole
    assert removed == sum(map(len, batches)) - positions[4]
    assert (segment.size, segment.next_offset) == (positions[4], 12)
    assert all(e.offset < 13 for e in segment.offset_index.entries())
    assert all(e.offset < 13 for e in segment.time_index.entries())
    assert segment.txn_index.entries() == [AbortedTxn(1, 0, 5, 6)]
    assert segment.max_timestamp == BASE_TIMESTAMP + 3002
    assert segment.truncate_to(100) == 0
    append_all(segment, data_batches(8)[4:])  # appending again rebuilds what was there
    reference = open_segment(tmp_path / "ref", interval=0)
    append_all(reference, batches)
    assert indexes(segment) == indexes(reference)
    assert segment.truncate_to(0) == sum(map(len, batches))
    assert (segment.size, segment.next_offset, segment.first_batch_timestamp) == (0, 0, None)


# --- lookups by timestamp (KIP-32, T-17) -------------------------------------------------------

batch_specs = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.lists(st.integers(0, 60), min_size=1, max_size=4)),
        st.tuples(st.just("append_time"), st.lists(st.integers(0, 60), min_size=1, max_size=3)),
        st.tuples(st.just("control"), st.lists(st.integers(0, 200), min_size=1, max_size=1)),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(specs=batch_specs, interval=st.sampled_from([0, 100, 400]), data=st.data())
def test_find_offset_by_timestamp_agrees_with_a_brute_force_model(
    tmp_path_factory: pytest.TempPathFactory,
    specs: list[tuple[str, list[int]]],
    interval: int,
    data: st.DataObject,
) -> None:
    segment = open_segment(tmp_path_factory.mktemp("ts") / "s", interval=interval)
    model: list[tuple[int, int]] = []  # (offset, timestamp) of every data record
    offset = 0
    for kind, stamps in specs:
        if kind == "control":
            batch = build_control_batch(offset, producer_id=1, timestamp=stamps[0])
        elif kind == "append_time":
            batch = build_batch(
                offset, len(stamps), timestamps=stamps, log_append_time=max(stamps) + 5
            )
            model += [(offset + n, max(stamps) + 5) for n in range(len(stamps))]
        else:
            batch = build_batch(offset, len(stamps), timestamps=stamps)
            model += [(offset + n, stamp) for n, stamp in enumerate(stamps)]
        segment.append(batch, validate_batch(batch))
        offset += len(stamps)
    for _ in range(10):
        target = data.draw(st.integers(-1, 210), label="timestamp")
        start = data.draw(st.integers(0, offset + 1), label="starting offset")
        expected = next((o for o, t in model if o >= start and t >= target), None)
        assert segment.find_offset_by_timestamp(target, start, record_timestamps) == expected


# --- lifecycle ----------------------------------------------------------------------------------


def test_reopening_derives_the_same_state_from_the_files(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, interval=100)
    append_all(segment, data_batches(15))
    segment.flush()
    segment.close()
    reopened = open_segment(tmp_path, interval=100)
    assert (reopened.size, reopened.next_offset, reopened.max_timestamp) == (
        segment.size,
        45,
        BASE_TIMESTAMP + 14002,
    )


def test_reopening_after_the_max_timestamp_was_indexed_long_ago(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, interval=0)
    stamps = [100, 900, 300, 200, 400, 100]
    append_all(segment, [build_batch(n, 1, timestamps=[t]) for n, t in enumerate(stamps)])
    assert segment.time_index.entries()[-1] == TimestampOffset(900, 1)
    reopened = open_segment(tmp_path, interval=0)
    assert (reopened.max_timestamp, reopened.next_offset) == (900, 6)
    extra = build_batch(6, 1, timestamps=[950])
    reopened.append(extra, validate_batch(extra))
    assert reopened.time_index.entries()[-1] == TimestampOffset(950, 6)


def test_reopening_after_a_crash_between_the_two_index_writes(tmp_path: Path) -> None:
    """``append`` writes the time entry, then the offset entry: lose the latter."""
    segment = open_segment(tmp_path, interval=0)
    stamps = [100, 200, 300, 50]
    append_all(segment, [build_batch(n, 1, timestamps=[t]) for n, t in enumerate(stamps)])
    index = file_path(tmp_path, INDEX_SUFFIX)
    index.write_bytes(index.read_bytes()[:-16])  # the last two offset entries never made it
    reopened = open_segment(tmp_path, interval=0)
    assert (reopened.max_timestamp, reopened.next_offset) == (300, 4)
    for target, expected in [(50, 0), (150, 1), (250, 2), (300, 2), (301, None)]:
        assert reopened.find_offset_by_timestamp(target, 0, record_timestamps) == expected


def test_reopening_after_a_machine_crash_lost_an_indexed_tail(tmp_path: Path) -> None:
    """The time entry of the last batch reached the disk, its offset entry and bytes did not."""
    segment = open_segment(tmp_path, interval=0)
    batches = data_batches(4)
    positions = append_all(segment, batches)
    index = file_path(tmp_path, INDEX_SUFFIX)
    index.write_bytes(index.read_bytes()[:-8])
    os.truncate(file_path(tmp_path, LOG_SUFFIX), positions[3])
    reader = open_segment(tmp_path, interval=0)
    assert (reader.next_offset, reader.max_timestamp) == (9, BASE_TIMESTAMP + 2002)
    reader.append(batches[3], validate_batch(batches[3]))
    reference = open_segment(tmp_path / "ref", interval=0)
    append_all(reference, batches)
    assert indexes(reader) == indexes(reference)


def test_a_stale_index_is_not_trusted(tmp_path: Path) -> None:
    """Indexes of another log whose batches happen to start at the same positions."""
    old = open_segment(tmp_path / "old", interval=0)
    append_all(old, [build_batch(3 * n, 3, timestamps=[10**12] * 3) for n in range(4)])
    new_batches = [build_batch(10 * n, 3, timestamps=[n, n, n]) for n in range(4)]
    new = open_segment(tmp_path / "new", interval=0)
    append_all(new, new_batches)
    new.close()
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        shutil.copy(file_path(tmp_path / "old", suffix), file_path(tmp_path / "new", suffix))
    reopened = open_segment(tmp_path / "new", interval=0)
    assert (reopened.next_offset, reopened.max_timestamp) == (33, 3)


def test_open_trusts_the_prefix_that_recover_validates(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, interval=0)
    positions = append_all(segment, data_batches(5))
    log = file_path(tmp_path, LOG_SUFFIX)
    log.write_bytes(_flip(log.read_bytes(), positions[1] + 40, 2))
    reopened = open_segment(tmp_path, interval=0)
    assert reopened.size == segment.size  # open read only from the last index entry
    with pytest.raises(CorruptRecordError, match=f"position {positions[1]}\\b"):
        reopened.recover(MAX_BATCH)


def test_delete_removes_all_four_files(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    append_all(segment, data_batches(3))
    segment.txn_index.append(AbortedTxn(1, 0, 2, 3))
    segment.flush()
    assert len(list(tmp_path.iterdir())) == 4
    segment.delete()
    assert list(tmp_path.iterdir()) == []


def test_the_test_batch_builder_agrees_with_an_independent_kafka_codec() -> None:
    default_records = pytest.importorskip("kafka.record.default_records")
    data = build_batch(
        5,
        3,
        timestamps=[10, 5, 30],
        transactional=True,
        producer_id=9,
        producer_epoch=2,
        base_sequence=4,
    )
    batch = default_records.DefaultRecordBatch(bytearray(data))
    assert batch.validate_crc()
    assert (
        [(r.offset, r.timestamp) for r in batch]
        == record_timestamps(data)
        == [(5, 10), (6, 5), (7, 30)]
    )
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 4)
    marker = default_records.DefaultRecordBatch(bytearray(build_control_batch(8, producer_id=9)))
    assert marker.validate_crc() and marker.is_control_batch
