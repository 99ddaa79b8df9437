"""The engine's validator refuses every batch Kafka's ``LogValidator`` refuses, on the engine's
own append path (issue 24, defect 1; F-05, F-06, F-09, F-14, F-18, F-31): a batch whose CRC is
right but whose header and records disagree, whose records do not decompress, or that would
leave a compacted topic a record it can never clean.

Each refused batch writes nothing, and the partition reads back in full afterwards with a
later batch appended after it; before the fix each of these was appended and then bricked
every read of the partition (``CorruptRecordError`` for every offset) or moved its end by 2³¹.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile_batches import (
    good_batch,
    gzip_bomb,
    records_of,
    undecompressable_gzip,
    with_header,
    with_records_section,
)
from tests.support import directory_bytes
from txn_log.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError, TxnLogError
from txn_log.log import Log
from txn_log.record.batch_header import Compression, parse_header
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("orders", 0)
COMPACTED = TopicPartition("keyed", 0)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log")
    log.create_topic("orders", 1)
    log.create_topic("keyed", 1, {"cleanup.policy": "compact"})
    log.partition_log(TP).append(good_batch([b"before-0", b"before-1"]))
    log.partition_log(COMPACTED).append(good_batch([b"v"], keys=[b"k"]))
    return log


def values(log: Log, tp: TopicPartition) -> list[bytes | None]:
    return [record.value for record in log.consumer("read_uncommitted").read(tp, 0)]


def refused_and_nothing_written(
    log: Log, tp: TopicPartition, batch: bytes, error: type[TxnLogError]
) -> TxnLogError:
    before = directory_bytes(log.path, content_only=True)
    with pytest.raises(error) as raised:
        log.partition_log(tp).append(batch)
    assert directory_bytes(log.path, content_only=True) == before
    return raised.value


def reads_back_with_a_later_batch(log: Log) -> None:
    log.partition_log(TP).append(good_batch([b"after"]))
    assert values(log, TP) == [b"before-0", b"before-1", b"after"]
    assert log.partition_reader(TP).log_end_offset == 3


two = good_batch([b"x", b"y"])
INVALID, CORRUPT = InvalidRecordError, CorruptRecordError
SECOND_RECORD = b"\x00\x00\x02\x01\x02y"  # attributes, timestamp delta, offset delta 1, ...
CASES = {
    # lastOffsetDelta -1: the next batch would take the same offsets (F-05)
    "last-offset-delta-minus-one": (with_header(two, last_offset_delta=-1), InvalidRecordError),
    # the log end would jump by 2^31 offsets
    "last-offset-delta-huge": (
        with_header(two, last_offset_delta=(1 << 31) - 1),
        InvalidRecordError,
    ),
    # a header that agrees with itself but not with the records it carries (F-18)
    "count-above-records": (
        with_header(two, records_count=3, last_offset_delta=2),
        CorruptRecordError,
    ),
    "count-below-records": (
        with_header(two, records_count=1, last_offset_delta=0),
        CorruptRecordError,
    ),
    "count-zero": (with_header(two, records_count=0, last_offset_delta=-1), InvalidRecordError),
    "count-negative": (with_header(two, records_count=-3), InvalidRecordError),
    # offsets inside the batch must be 0..n-1: readers compute base + delta (KIP-31)
    "offset-deltas-not-consecutive": (
        with_records_section(
            two, records_of(two).replace(b"\x00\x00\x02\x01\x02y", b"\x00\x00\x00\x01\x02y", 1)
        ),
        InvalidRecordError,
    ),
    # a records section that does not decompress, under a valid CRC
    "gzip-does-not-decompress": (undecompressable_gzip([b"a", b"b", b"c"]), CorruptRecordError),
    # an idempotent batch must carry a sequence, a transactional one a producer id (F-14)
    "producer-id-without-sequence": (
        good_batch([b"x"], producer_id=7, producer_epoch=0, base_sequence=0),
        None,
    ),
    "transactional-without-producer-id": (
        with_header(good_batch([b"x"]), attributes=0x10),
        InvalidRecordError,
    ),
}
CASES["producer-id-without-sequence"] = (
    with_header(CASES["producer-id-without-sequence"][0], base_sequence=-1),
    InvalidRecordError,
)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_batch_kafka_refuses_is_refused_and_the_partition_stays_readable(
    log: Log, name: str
) -> None:
    batch, error = CASES[name]
    assert error is not None
    refused_and_nothing_written(log, TP, batch, error)
    reads_back_with_a_later_batch(log)


def test_the_offset_delta_case_really_changes_only_the_delta() -> None:
    """Guard on the test data: the mutated batch differs from the good one in one varint."""
    mutated = CASES["offset-deltas-not-consecutive"][0]
    assert len(mutated) == len(two) and mutated != two


def test_a_compacted_topic_refuses_a_record_without_a_key(log: Log) -> None:
    """Kafka: "Compacted topic cannot accept message without key" (INVALID_RECORD); the
    cleaner could never remove such a record."""
    keyless = good_batch([b"a", b"b"], keys=[b"k", None])
    error = refused_and_nothing_written(log, COMPACTED, keyless, InvalidRecordError)
    assert "key" in str(error) and "keyed-0" in str(error)
    log.partition_log(COMPACTED).append(good_batch([b"v2"], keys=[b"k"]))
    assert values(log, COMPACTED) == [b"v", b"v2"]


@pytest.mark.parametrize("count", [2, 30, 100])
def test_a_compacted_topic_names_every_record_without_a_key(log: Log, count: int) -> None:
    """Both walks of the records (record by record up to 32, numpy above) report how many
    records have no key and which (``record_errors``: Kafka's per-record errors, whole ints);
    the numpy walk lists them only when the topic is compacted."""
    keys = [None if i % 7 == 1 else b"k%d" % i for i in range(count)]
    keyless = good_batch([b"v"] * count, keys=keys)
    error = refused_and_nothing_written(log, COMPACTED, keyless, InvalidRecordError)
    expected = [i for i, key in enumerate(keys) if key is None]
    assert f"({len(expected)} of the batch's {count} records have none)" in str(error)
    assert isinstance(error, InvalidRecordError)
    assert [index for index, _ in error.record_errors] == expected
    assert all(type(index) is int for index, _ in error.record_errors)


def test_a_compressed_batch_is_checked_after_decompression(log: Log) -> None:
    """The count and offset checks apply to the records inside a compressed section too."""
    gz = good_batch([b"x", b"y"], compression=Compression.GZIP)
    refused_and_nothing_written(
        log, TP, with_header(gz, records_count=3, last_offset_delta=2), CorruptRecordError
    )
    log.partition_log(TP).append(gz)
    assert values(log, TP) == [b"before-0", b"before-1", b"x", b"y"]


BOMB_SCRIPT = """
import resource, sys
from pathlib import Path
from tests.hostile_batches import gzip_bomb
from txn_log.errors import RecordTooLargeError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
bomb = gzip_bomb(1 << 30)  # 1 GiB of zeros, about a megabyte compressed
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with Log.open(Path(sys.argv[1])) as log:
    log.create_topic("big", 1, {"max.message.bytes": 8 << 20})
    try:
        log.partition_log(TopicPartition("big", 0)).append(bomb)
    except RecordTooLargeError as error:
        print("refused:", error)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("grew_kib", after - before)
"""


def test_a_decompression_bomb_is_refused_without_being_allocated(tmp_path: Path) -> None:
    """A 1 MB gzip batch that inflates to 1 GiB: refused (MESSAGE_TOO_LARGE), and the process's
    peak memory grows by far less than the gigabyte (run in a fresh process, whose peak RSS
    is this append's alone)."""
    run = subprocess.run(
        [sys.executable, "-c", BOMB_SCRIPT, str(tmp_path / "log")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert "refused:" in run.stdout, run.stdout + run.stderr
    grew_kib = int(run.stdout.split("grew_kib")[1])
    print(run.stdout)
    assert grew_kib < 300 * 1024, f"the append's peak memory grew by {grew_kib} KiB"


def test_a_bomb_written_below_the_validator_is_refused_by_readers_unallocated(
    tmp_path: Path,
) -> None:
    """A bomb already in a segment (written by an older version, or by hand) makes readers
    raise a typed error naming the limit; they never inflate it (checked in-process by the
    error alone: the limit is hit long before a gigabyte)."""
    with Log.open(tmp_path / "log") as log:
        log.create_topic("orders", 1)
        plog = log.partition_log(TP)
        bomb = bytearray(gzip_bomb(512 << 20))
        plog.segments[-1].append(bomb, parse_header(bomb), verify_crc=True)
    with Log.open(tmp_path / "log") as log, pytest.raises(RecordTooLargeError) as raised:
        log.consumer("read_uncommitted").read(TP, 0)
    assert "decompress" in str(raised.value)


def test_the_gzip_bomb_builder_really_inflates() -> None:
    """Guard on the test data: the bomb is a valid gzip stream of the size asked."""
    import zlib

    from txn_log.record.batch_header import HEADER_SIZE

    bomb = gzip_bomb(4 << 20)
    assert len(zlib.decompress(bomb[HEADER_SIZE:], 47)) == 4 << 20
    assert len(gzip_bomb(1 << 30)) < 2 << 20


def test_verify_reports_a_batch_whose_records_do_not_decode(tmp_path: Path) -> None:
    """``txnlog verify`` applies the same record checks to what is already in the log (a
    batch written below the validator by an older version): before, it reported nothing while
    every reader of the partition stopped at the batch."""
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 1)
        plog = log.partition_log(TP)
        plog.append(good_batch([b"fine"]))
        bad = bytearray(undecompressable_gzip([b"a", b"b"]))
        bad[:8] = (1).to_bytes(8, "big")  # its base offset: the log end
        plog.segments[-1].append(bad, parse_header(bad), verify_crc=True)
    run = subprocess.run(
        [sys.executable, "-m", "txn_log.cli", "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0, run.stdout
    assert "do not decode" in run.stdout + run.stderr, run.stdout + run.stderr
