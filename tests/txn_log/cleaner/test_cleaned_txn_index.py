"""The cleaner drops an aborted transaction's index entry when it drops its ABORT marker
(issue 24, defect 6; B-10, B-12, B-18), as Kafka's cleaner rebuilds the transaction index of a
cleaned segment from the markers it keeps.

Before: the cleaned segment kept the entry, so every read_committed Fetch answer listed the
transaction in ``aborted_transactions``; a client following KIP-98 (B-13) then treated every
later batch of that producer as aborted until an ABORT marker that no longer existed, and
never delivered the newest committed value of a key that the engine's own read returned.
"""

from __future__ import annotations

from pathlib import Path

from tests.txn_log.cleaner.helpers import committed_records, end_txn, keyed, open_compacted
from txn_log.clock import ManualClock
from txn_log.storage.log_cleaner import clean_partition

PID, EPOCH = 7, 0


def aborted_then_committed(path: Path, clock: ManualClock):  # type: ignore[no-untyped-def]
    """k=v1 committed, k=v2 aborted, k=v3 committed, all by one producer, each in its own
    segment; then one more segment so that they are all closed."""
    log = open_compacted(path, clock, **{"segment.bytes": "200", "delete.retention.ms": "0"})
    for seq, (value, commit) in enumerate([(b"v1", True), (b"v2", False), (b"v3", True)]):
        log.append(keyed([(b"k", value)], clock, producer_id=PID, epoch=EPOCH, seq=seq,
                         transactional=True))  # fmt: skip
        end_txn(log, PID, EPOCH, commit=commit)
        clock.advance(10)
    log.append(keyed([(b"other", b"x")], clock))
    log.roll()
    return log


def test_the_entry_goes_with_its_marker_and_a_kip98_filter_keeps_the_committed_value(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    log = aborted_then_committed(tmp_path, clock)
    end = log.last_stable_offset
    assert [t.producer_id for t in log.collect_aborted_txns(0, end)] == [PID]
    clock.advance(1_000)  # past delete.retention.ms (0): the ABORT marker may go
    clean_partition(log, clock.time_ms(), force=True)
    markers = {header.base_offset for header, _ in log.read(0, end) if header.is_control}
    listed = log.collect_aborted_txns(0, end)
    assert all(txn.last_offset in markers for txn in listed), (listed, markers)
    # the engine's reader and a KIP-98 client's filter (B-13) agree on the newest value
    assert [value for _, key, value in committed_records(log) if key == b"k"][-1] == b"v3"
    assert kip98_client_view(log, end)[b"k"] == b"v3"


def kip98_client_view(log, end: int) -> dict[bytes, bytes | None]:  # type: ignore[no-untyped-def]
    """What a KIP-98 consumer delivers (B-13): a producer whose aborted transaction began at
    or before a batch is "aborted" from that first offset until it sees that producer's ABORT
    marker, whatever the entry's last offset says."""
    from txn_log.record.codec import iter_records
    from txn_log.record.control import ControlType
    from txn_log.storage.replay import read_control_record

    pending = {txn.first_offset: txn.producer_id for txn in log.collect_aborted_txns(0, end)}
    aborting: set[int] = set()
    latest: dict[bytes, bytes | None] = {}
    for header, batch in log.read(0, end):
        for first in [f for f in pending if f <= header.base_offset]:
            aborting.add(pending.pop(first))
        if header.is_control:
            if read_control_record(header, batch).control_type is ControlType.ABORT:
                aborting.discard(header.producer_id)  # only its ABORT marker ends it
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        for record in iter_records(batch):
            if record.key is not None:
                latest[record.key] = record.value
    return latest
