"""Names of a Spark sink's transactions and ledger entries (DESIGN §5).

    transactional id   <prefix>-<task partition id>     one per write task; every attempt of a
                                                        task (retry, speculative copy, a later
                                                        run of the query) reuses it, so its
                                                        init_transactions() fences the others
                       <prefix>-driver                  the driver's batch commit where tasks
                                                        commit themselves (the Kafka backend):
                                                        never a task's id (not digits)
    sink id            spark-query-<query id>           the ledger key of a streaming query:
                                                        a query has exactly one sink, and its
                                                        id is stable across restarts from the
                                                        same checkpoint
                       spark-write-<write id>           one ``df.write``: a fresh id per write
    default prefix     txnlog-<query id or write id>
    default group id   txnlog-<query id or write id>

The prefix only names transactions; the ledger is keyed by the sink id. A query restarted with
a new checkpoint but the same explicit prefix therefore starts a fresh ledger (its batch ids
restart at 0) while its tasks still fence every zombie of the old run. The other way round, a
checkpoint's query may not change its prefix once a batch committed
(``SinkCommitProtocol.check_prefix``). Pure functions.
"""

from __future__ import annotations

import re

from txn_log.errors import ConfigError

MAX_STRING_BYTES = (1 << 15) - 1
"""The longest transactional id or sink id, in UTF-8 bytes: Kafka writes both as strings with
an int16 length, on the wire and in the embedded log's ``__transaction_state`` alike."""
TASK_SEPARATOR = "-"
DEFAULT_PREFIX_PREFIX = "txnlog-"
_TASK_SUFFIX_ROOM = 12  # "-" and up to 11 digits of a task partition id
MAX_PREFIX_BYTES = MAX_STRING_BYTES - _TASK_SUFFIX_ROOM


def task_transactional_id(prefix: str, task_partition_id: int) -> str:
    """The transactional id of Spark write task ``task_partition_id`` under ``prefix``."""
    if task_partition_id < 0:
        raise ConfigError(f"task partition id must be >= 0, got {task_partition_id}")
    return f"{prefix}{TASK_SEPARATOR}{task_partition_id}"


def driver_transactional_id(prefix: str) -> str:
    """The transactional id of the driver's batch commits under ``prefix`` (Kafka backend)."""
    return f"{prefix}{TASK_SEPARATOR}driver"


def is_task_transactional_id(prefix: str, transactional_id: str) -> bool:
    """Whether ``transactional_id`` is ``<prefix>-<digits>``: one of this sink's tasks.

    Matched exactly, so the zombies of prefix ``q`` never include the tasks of prefix ``q-1``.
    """
    pattern = re.escape(prefix + TASK_SEPARATOR) + "[0-9]+"
    return re.fullmatch(pattern, transactional_id) is not None


def default_prefix(run_id: str) -> str:
    """The default ``transactional.id.prefix`` of a query (or one batch write)."""
    return f"{DEFAULT_PREFIX_PREFIX}{run_id}"


def default_group_id(run_id: str) -> str:
    """The default ``group.id`` under which the consumed source offsets are committed."""
    return f"{DEFAULT_PREFIX_PREFIX}{run_id}"


def streaming_sink_id(query_id: str) -> str:
    """The ledger key of a streaming query (stable across restarts from its checkpoint)."""
    return f"spark-query-{query_id}"


def batch_sink_id(write_id: str) -> str:
    """The ledger key of one ``df.write`` (a fresh ``write_id`` per write)."""
    return f"spark-write-{write_id}"


def validate_prefix(prefix: object) -> str:
    """Return ``prefix`` if it can name transactions, else raise ConfigError."""
    if not isinstance(prefix, str) or not prefix.strip():
        raise ConfigError(
            f"transactional.id.prefix must be a non-empty string, got {prefix!r}; leave it "
            "unset to derive it from the query id"
        )
    if len(prefix.encode()) > MAX_PREFIX_BYTES:
        raise ConfigError(
            f"transactional.id.prefix of {len(prefix.encode())} bytes is too long; the maximum "
            f"is {MAX_PREFIX_BYTES} bytes (a transactional id is an int16-length string)"
        )
    if any(not c.isprintable() for c in prefix):
        raise ConfigError(f"transactional.id.prefix {prefix!r} contains unprintable characters")
    return prefix
