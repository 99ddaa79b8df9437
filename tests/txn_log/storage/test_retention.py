"""Retention rules of ``txn_log.storage.retention`` on one partition (T-10, B-03, B-09)."""

from __future__ import annotations

from pathlib import Path

from tests.txn_log.storage.test_partition_log import batch, open_log
from txn_log.clock import ManualClock
from txn_log.record.control import ControlType

MINUTE_MS = 60_000


def test_a_segment_holding_only_markers_does_not_stop_time_retention(tmp_path: Path) -> None:
    """T-10: a segment is judged by its newest batch; one holding only a COMMIT marker (no data
    timestamp) ages from the marker's time, instead of pinning everything after it."""
    clock = ManualClock()
    log = open_log(tmp_path, clock, **{"segment.bytes": "300", "retention.ms": str(MINUTE_MS)})
    now = [clock.time_ms()]
    log.append(batch(1, producer_id=7, epoch=0, seq=0, transactional=True, value_size=200,
                     timestamps=now))  # fmt: skip
    log.append_marker(ControlType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0)
    log.append(batch(1, start=2, value_size=200, timestamps=now))
    log.append(batch(1, start=3, value_size=200, timestamps=now))
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 1, 2, 3]  # the marker alone in segment 1
    assert log.segments[1].max_timestamp is None
    clock.advance(MINUTE_MS + 1)
    assert log.delete_old_segments() == [0, 1, 2]
    assert log.log_start_offset == 3
