"""``flush_all``: every log flushed before it returns, the first failure (in the order given)
raised, never retried (a failed fsync is fatal, DESIGN §3)."""

from __future__ import annotations

import threading
import time

import pytest

from txn_log.errors import StorageError
from txn_log.storage.group_sync import flush_all


class FakeLog:
    def __init__(self, name: str, fail: bool = False, delay_s: float = 0.0) -> None:
        self.name = name
        self.fail = fail
        self.delay_s = delay_s
        self.flushes = 0
        self.thread: str | None = None

    def flush(self) -> None:
        time.sleep(self.delay_s)
        self.flushes += 1
        self.thread = threading.current_thread().name
        if self.fail:
            raise StorageError(f"fdatasync of {self.name} failed")


def test_every_log_is_flushed_once_the_first_by_the_caller() -> None:
    logs = [FakeLog(f"p{i}", delay_s=0.01) for i in range(4)]
    flush_all(logs)
    assert [log.flushes for log in logs] == [1, 1, 1, 1]
    assert logs[0].thread == threading.current_thread().name


@pytest.mark.parametrize("failing", [0, 2])
def test_the_first_failure_is_raised_after_every_flush_ended(failing: int) -> None:
    logs = [FakeLog(f"p{i}", fail=i >= failing, delay_s=0.01 * (4 - i)) for i in range(4)]
    with pytest.raises(StorageError, match=f"p{failing} failed"):
        flush_all(logs)
    assert [log.flushes for log in logs] == [1, 1, 1, 1]  # none retried, none left running


def test_one_log_is_flushed_in_the_calling_thread() -> None:
    log = FakeLog("only")
    flush_all([log])
    assert log.flushes == 1 and log.thread == threading.current_thread().name
