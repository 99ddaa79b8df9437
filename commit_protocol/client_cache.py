"""An end for the Kafka clients a process keeps for later tasks (Kafka mode, DESIGN §5, §6).

Spark runs many tasks one after another in each Python worker, and Kafka mode keeps what a task
used for the next one: the source's idle consumers and AdminClients
(``txn_source.kafka_clients``), the sink's backends with their AdminClient, ledger reader and
driver producers (``KafkaBackend.open``). Without an end a worker would keep the clients of
every cluster and query it ever served for as long as it lives, each with its librdkafka
threads and connections, and a client whose cluster went away reconnects to its address for
ever (in a test run, such reconnects landed on a port the JVM had just opened for a new Python
worker, whose handshake then failed: "Python worker failed to connect back").

Spark's own Kafka connector closes what it cached once it has been unused for
``spark.kafka.consumer.cache.timeout`` (5 min) or ``spark.kafka.producer.cache.timeout``
(10 min). Here one timeout serves both, read from the environment variable
``TXNLOG_KAFKA_CLIENT_CACHE_TIMEOUT_S`` (seconds, default 300; set it for executors with
``spark.executorEnv.TXNLOG_KAFKA_CLIENT_CACHE_TIMEOUT_S``). A daemon thread per process
(started by the first cache that registers, again after a fork) calls each registered sweep
every half timeout (at most once a minute) with the monotonic time before which an unused
entry goes. A sweep only forgets or closes what no task holds: an idle consumer is closed, a
backend or AdminClient a running task may still hold is only forgotten, and its clients stop
when the last holder lets go of it (a backend's ledger reader points back at it, so the thread
runs the garbage collector once a sweep forgot something). The next task opens new clients,
paying their first connections.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from txn_log.errors import ConfigError

ENV_TIMEOUT = "TXNLOG_KAFKA_CLIENT_CACHE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 300.0
"""Spark's ``spark.kafka.consumer.cache.timeout``."""
MAX_INTERVAL_S = 60.0

K = TypeVar("K")
V = TypeVar("V")
Sweep = Callable[[float], bool]
"""Forget (or close) whatever was last used before the given ``time.monotonic()`` value; True
if it forgot something."""

_log = logging.getLogger(__name__)
_sweeps: list[Sweep] = []
_lock = threading.Lock()
_thread_pid: int | None = None


def cache_timeout_s() -> float:
    """The timeout of ``TXNLOG_KAFKA_CLIENT_CACHE_TIMEOUT_S``, or ConfigError naming the
    variable and what it accepts."""
    text = os.environ.get(ENV_TIMEOUT)
    if text is None or not text.strip():
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ConfigError(
            f"environment variable {ENV_TIMEOUT}={text!r}: must be a positive number of "
            f"seconds (default {DEFAULT_TIMEOUT_S:g}), how long a Kafka client a process keeps "
            "for later tasks may stay unused before it is closed"
        )
    return value


def register(sweep: Sweep) -> None:
    """Have ``sweep`` called every sweep interval in this process (once per function, however
    often registered), starting the sweeping thread if this process has none."""
    global _thread_pid
    with _lock:  # each task's cached use: once this process sweeps it, nothing to do
        if _thread_pid == os.getpid() and sweep in _sweeps:
            return
    timeout = cache_timeout_s()  # a bad setting fails the task that caches, not a thread
    with _lock:
        if sweep not in _sweeps:
            _sweeps.append(sweep)
        if _thread_pid == os.getpid():
            return
        _thread_pid = os.getpid()
    thread = threading.Thread(
        target=_sweep_forever, args=(timeout,), name="txnlog-kafka-client-cache", daemon=True
    )
    thread.start()


def forget_unused(entries: dict[K, tuple[V, float]], cutoff: float) -> list[V]:
    """Remove from ``entries`` (each an object and the ``time.monotonic()`` of its last use)
    those last used before ``cutoff``; the removed objects. The caller holds its lock."""
    unused = [key for key, (_, used) in entries.items() if used < cutoff]
    return [entries.pop(key)[0] for key in unused]


def sweep_now(timeout_s: float) -> None:
    """Run every registered sweep once, for entries unused for ``timeout_s``."""
    cutoff = time.monotonic() - timeout_s
    with _lock:
        sweeps = list(_sweeps)
    forgot = False
    for sweep in sweeps:
        try:
            forgot = sweep(cutoff) or forgot
        except Exception:  # a failed close must not end the thread: the next round retries
            _log.exception("closing unused Kafka clients failed")
    if forgot:
        gc.collect()


def _sweep_forever(timeout_s: float) -> None:
    interval = min(timeout_s / 2, MAX_INTERVAL_S)
    while True:
        time.sleep(interval)
        sweep_now(timeout_s)
