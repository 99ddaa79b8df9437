"""The clock the engine reads for timestamps, timeouts and expirations (STYLE item 11).

Engine code takes a ``Clock`` and never calls ``time.time()`` itself; tests pass a
``ManualClock``. Times are integer milliseconds since the Unix epoch.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch."""
        ...


class SystemClock:
    """The real wall clock. Safe to share between threads."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to. Not thread-safe; for tests."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms

    def time_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a clock cannot go back: advance({ms})")
        self._now_ms += ms


SYSTEM_CLOCK = SystemClock()
