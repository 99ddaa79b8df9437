"""Kafka clients that outlive a read task (Kafka mode, DESIGN §6): a process's idle consumers
per cluster and isolation level, and its AdminClient per cluster.

A new librdkafka client pays for its connections on its first requests (the bootstrap
connection, then the broker's own, each with its ApiVersions exchange): measured in
``bench/bench_kafka_backend.py``, a read task spent 40-54 ms on its first ListOffsets and
16-25 ms on each topic-id check through a fresh AdminClient, more than it spent fetching its
records. Spark runs many read tasks one after another in each Python worker, so the worker
keeps what a task used for the next one.

A read task's consumer is assigned (never subscribed: no group, no commits) and holds no state
a later task could see: it is handed back only after the task read its whole range and
``unassign`` succeeded (librdkafka then drops whatever it had fetched for the partition), and
closed otherwise (an error, or a reader that stopped early). At most ``MAX_IDLE`` consumers
wait per key. What stays unused for ``TXNLOG_KAFKA_CLIENT_CACHE_TIMEOUT_S`` goes
(``commit_protocol.client_cache``): an idle consumer is closed, an AdminClient forgotten.
Thread-safe.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from commit_protocol import client_cache
from datasource_options.location import KafkaCluster
from txn_log.consumer.read_committed import IsolationLevel
from txn_source.kafka_view import admin_client, consumer_config

FETCH_WAIT_MAX_MS = 50
"""How long the broker may hold a fetch that has nothing new. A task whose range ends at the
readable end learns it reached the end (PARTITION_EOF) only from such an empty fetch, so this
is what each of those tasks waits at its end (librdkafka's default is 500 ms)."""
MAX_IDLE = 4
"""Idle consumers kept per (cluster, isolation level): a Python worker runs one task at a
time, so one is the usual number."""

_Key = tuple[KafkaCluster, IsolationLevel]
_idle: dict[_Key, list[tuple[Any, float]]] = {}
"""Idle consumers per key, each with the ``time.monotonic()`` it was given back."""
_admins: dict[KafkaCluster, tuple[AdminClient, float]] = {}
"""Each cluster's AdminClient, with the ``time.monotonic()`` a task last asked for it."""
_lock = threading.Lock()


def take_consumer(cluster: KafkaCluster, isolation_level: IsolationLevel) -> Any:
    """An idle consumer of ``cluster`` at ``isolation_level`` (assigned nothing), or a new
    one (``read_consumer_config``)."""
    with _lock:
        idle = _idle.get((cluster, isolation_level))
        if idle:
            return idle.pop()[0]
    return Consumer(read_consumer_config(cluster, isolation_level))


def read_consumer_config(cluster: KafkaCluster, isolation_level: IsolationLevel) -> dict[str, Any]:
    """A read task's consumer: the source's (``kafka_view.consumer_config``), reporting the
    partition's end (PARTITION_EOF, with the fetch position past markers and aborted batches)
    and waiting ``FETCH_WAIT_MAX_MS`` at most for an empty fetch (the user's value wins)."""
    config = consumer_config(cluster, isolation_level, "executor")
    config["enable.partition.eof"] = True
    config.setdefault("fetch.wait.max.ms", FETCH_WAIT_MAX_MS)
    return config


def give_back(cluster: KafkaCluster, isolation_level: IsolationLevel, consumer: Any) -> None:
    """Keep ``consumer`` for a later task once it is assigned nothing; close it when that
    fails or enough wait already."""
    try:
        consumer.unassign()
    except (KafkaException, RuntimeError):  # failed, or closed already: not reused
        with contextlib.suppress(KafkaException, RuntimeError):
            consumer.close()
        return
    client_cache.register(_sweep)
    with _lock:
        idle = _idle.setdefault((cluster, isolation_level), [])
        if len(idle) < MAX_IDLE:
            idle.append((consumer, time.monotonic()))
            return
    consumer.close()


def admin_for(cluster: KafkaCluster) -> AdminClient:
    """The process's AdminClient of ``cluster`` (``kafka_view.admin_client``)."""
    client_cache.register(_sweep)
    with _lock:
        cached = _admins.get(cluster)
        admin = admin_client(cluster) if cached is None else cached[0]
        _admins[cluster] = (admin, time.monotonic())
        return admin


def _sweep(cutoff: float) -> bool:
    """Close the idle consumers given back before ``cutoff`` and forget the AdminClients last
    asked for before it (a running task may still hold one: it stops when the task lets go)."""
    closing = []
    with _lock:
        for key, idle in list(_idle.items()):
            closing += [consumer for consumer, since in idle if since < cutoff]
            kept = [(consumer, since) for consumer, since in idle if since >= cutoff]
            if kept:
                _idle[key] = kept
            else:
                del _idle[key]
        forgotten = client_cache.forget_unused(_admins, cutoff)
    for consumer in closing:
        with contextlib.suppress(KafkaException, RuntimeError):
            consumer.close()
    return bool(forgotten)


def close_idle() -> None:
    """Close every idle consumer and drop the AdminClients: for a process that outlives the
    clusters it read (a test run)."""
    with _lock:
        consumers = [c for idle in _idle.values() for c, _ in idle]
        _idle.clear()
        _admins.clear()
    for consumer in consumers:
        consumer.close()
