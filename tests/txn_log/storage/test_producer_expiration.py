"""Producer-id expiration as every process sees it (P-26..P-28, G-18): validation treats an
expired entry as absent by the same rule, whether or not a periodic pass removed it yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.txn_log.storage.test_producer_state import DAY_MS, A, Harness, header
from txn_log.errors import OutOfOrderSequenceError
from txn_log.storage.producer_append_info import AppendOrigin


def test_an_expired_producer_is_absent_to_validation_before_any_pass(tmp_path: Path) -> None:
    log = Harness(tmp_path)
    log.data(A, 0, 0)
    log.clock.advance(DAY_MS)
    assert log.manager.find_duplicate_batch(header(A, 0, 0)) is None
    with pytest.raises(OutOfOrderSequenceError):  # P-28, without remove_expired_producers
        log.data(A, 1, 1)
    log.data(A, 1, 0)  # a restart at sequence 0 is a new producer
    assert log.manager.remove_expired_producers() == []


def test_a_batch_with_an_old_timestamp_ages_from_when_it_was_applied(tmp_path: Path) -> None:
    """The record timestamp is the client's: a replayed or appended batch stamped long ago does
    not make its producer expired the moment it arrives."""
    log = Harness(tmp_path)
    for seq, origin in enumerate((AppendOrigin.CLIENT, AppendOrigin.REPLAY)):
        info = log.manager.prepare_update(A, origin)
        info.append_data_batch(header(A, seq, seq, timestamp=1_000))
        log.manager.update(info)
    log.manager.update_map_end_offset(2)
    assert log.manager.remove_expired_producers() == []
    log.data(A, 2, 2)
    log.manager.take_snapshot()
    reopened = Harness(tmp_path, log.clock)
    reopened.manager.truncate_and_reload(0, 3)
    assert set(reopened.manager.active_producers()) == {A}
    log.clock.advance(DAY_MS)
    assert log.manager.remove_expired_producers() == [A]
