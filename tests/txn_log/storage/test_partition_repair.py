"""``PartitionLog.repair``: what ``txnlog verify --repair`` does to one partition, all of it
under the partition lock (issue 12 item 4; X-11, X-20, P-24, F-08)."""

from __future__ import annotations

from pathlib import Path

from tests.support import directory_bytes
from tests.txn_log.storage.test_partition_log import batch, open_log, values
from txn_log.storage import offset_index, txn_index
from txn_log.storage.file_names import INDEX_SUFFIX, TXN_INDEX_SUFFIX, offset_file_name
from txn_log.storage.partition_log import PartitionLog

PRODUCER = 7


def filled(path: Path, batches: int = 12) -> PartitionLog:
    """An idempotent producer's batches over several segments, with a snapshot at each roll."""
    log = open_log(path, **{"segment.bytes": 600, "index.interval.bytes": 1})
    for i in range(batches):
        log.append(batch(3, start=3 * i, producer_id=PRODUCER, epoch=0, seq=3 * i, value_size=40))
    assert len(log.segments) >= 3
    return log


def test_repair_cuts_a_torn_tail_rebuilds_indexes_drops_bad_snapshots_and_reloads(
    tmp_path: Path,
) -> None:
    log = filled(tmp_path)
    end = log.log_end_offset
    first, last = log.segments[0], log.segments[-1]
    valid_size = last.log_path.stat().st_size
    with last.log_path.open("ab") as f:  # a writer that died mid-append
        f.write(batch(3, start=99)[:50])
    index_path = tmp_path / offset_file_name(first.base_offset, INDEX_SUFFIX)
    with index_path.open("r+b") as f:  # an entry pointing into the middle of a batch
        f.write(offset_index.ENTRY.pack(2, 5))
    txn_path = tmp_path / offset_file_name(last.base_offset, TXN_INDEX_SUFFIX)
    with txn_path.open("ab") as f:  # an ABORT whose marker never landed
        f.write(txn_index.ENTRY.pack(0, PRODUCER, end - 1, end, end - 1))
    (snapshot,) = sorted(tmp_path.glob("*.snapshot"))[-1:]
    damaged = bytearray(snapshot.read_bytes())
    damaged[-10] ^= 0x40  # fails its CRC-32C
    snapshot.write_bytes(bytes(damaged))

    done = log.repair()

    assert any(f"truncated a torn tail of 50 bytes at position {valid_size}" in d for d in done)
    assert any(d.startswith(f"rebuilt {index_path}") for d in done), done
    assert any(d.startswith(f"rebuilt {txn_path}") for d in done), done
    assert any(d.startswith(f"deleted unreadable snapshot {snapshot}") for d in done), done
    assert len(done) == 4, done
    assert last.log_path.stat().st_size == valid_size and not snapshot.exists()
    assert log.log_end_offset == end
    # the caches were reloaded: the producer's next sequence and the next offset are right
    result = log.append(batch(3, start=end, producer_id=PRODUCER, epoch=0, seq=end, value_size=40))
    assert result.base_offset == end and not result.duplicate
    assert values(log) == [f"v{i}".encode() for i in range(end + 3)]
    before = directory_bytes(tmp_path)
    assert log.repair() == []  # a second repair finds nothing and changes nothing
    assert directory_bytes(tmp_path) == before
    log.close()


def test_repair_never_cuts_an_invalid_batch_in_a_segment_that_is_not_the_last(
    tmp_path: Path,
) -> None:
    log = filled(tmp_path)
    middle = log.segments[1]
    with middle.log_path.open("ab") as f:  # a torn tail kept when the next append rolled
        f.write(batch(3, start=99)[:50])
    before = directory_bytes(tmp_path, content_only=True)

    (done,) = log.repair()

    assert done.startswith(f"could not repair {middle.log_path}")
    assert "not the last" in done
    after = directory_bytes(tmp_path, content_only=True)
    assert after[middle.log_path.name] == before[middle.log_path.name]
    log.close()
