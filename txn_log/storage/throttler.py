"""A byte-rate throttle for the log cleaner (Kafka's ``kafka.utils.Throttler`` behind
``log.cleaner.io.max.bytes.per.second``).

The cleaner reports every byte it reads or writes (``maybe_throttle``); when the bytes of the
current one-second window would need more time at ``max_bytes_per_second`` than has passed, the
throttler sleeps the difference. A window older than a second is started afresh, so an idle
stretch is never credited as a burst allowance: the rate holds over any second of cleaning.

The sleep waits on a ``threading.Event`` (``stop``): setting it (``Housekeeper.stop``, from
``Log.close``) wakes a sleeping cleaner at once with ``ThrottleStopped``, which the cleaner lets
through before its next swap, so closing a log never waits for a throttled cleaning. The clock
and the sleep are injectable (STYLE 11). One throttler per cleaner thread; not thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

WINDOW_S = 1.0


class ThrottleStopped(Exception):
    """The throttler's stop event was set while the cleaner was working: give up now."""


class Throttler:
    """Keeps the bytes reported to it at or below ``max_bytes_per_second`` (positive)."""

    def __init__(
        self,
        max_bytes_per_second: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], bool] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """``sleep(seconds)`` returns True when it was interrupted by a stop (default: a wait
        on ``stop``)."""
        self.max_bytes_per_second = float(max_bytes_per_second)
        self._monotonic = monotonic
        self._stop = stop if stop is not None else threading.Event()
        self._sleep = sleep if sleep is not None else self._stop.wait
        self._window_start = monotonic()
        self._observed = 0.0

    def maybe_throttle(self, byte_count: int) -> None:
        """Account ``byte_count`` bytes; sleep as long as the rate needs. ThrottleStopped
        when the stop event is (or becomes) set."""
        if self._stop.is_set():
            raise ThrottleStopped
        now = self._monotonic()
        if now - self._window_start >= WINDOW_S:
            self._window_start, self._observed = now, 0.0
        self._observed += byte_count
        owed = self._observed / self.max_bytes_per_second - (now - self._window_start)
        if owed > 0 and (self._sleep(owed) or self._stop.is_set()):
            raise ThrottleStopped
