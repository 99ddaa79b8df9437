"""Named crash points for the fault-injection suites (TESTING.md scenarios 5 and 6).

A test process started with ``TXNLOG_CRASH_POINT=<name>`` kills *itself* with SIGKILL the
``TXNLOG_CRASH_AFTER``-th time (default 1st) it reaches ``crash_point(<name>)``: the exact step
of a commit at which a real process dies, with no exception, no ``finally`` and no flush. In
every other process this is one comparison against None.

With ``TXNLOG_CRASH_SIGNAL=STOP`` the process stops itself (SIGSTOP) instead of dying: a
writer frozen at that step, holding whatever locks it holds there, until the parent sends
SIGCONT or SIGKILL (readers must not wait on it, DESIGN §3).

With ``TXNLOG_CRASH_SCOPE=group`` it kills its session leader's process group and its own
instead: a Spark driver started in a session of its own dies with its JVM and every Python
worker, as when the machine running the driver fails (the data source's commit runs in a
Python worker of the JVM, not in the driver's own Python process).

Points: ``txn.after_prepare``, ``txn.between_markers``, ``txn.before_complete`` (commit and
abort of one transaction); ``batch.after_prepare``, ``batch.before_complete`` (the atomic
commit of many transactions, ``TransactionCoordinator.commit_transactions``);
``producer.after_first_batch`` (a transactional flush registered its new partitions and
appended the first batch of one of them, under the coordinator's lock: ``record_accumulator``);
``marker.after_txn_index`` (an ABORT's index entry is durable, its marker not yet written);
``append.before_write`` (a data batch validated under the partition lock, not yet written);
``topic.after_partition_dirs`` (``create_topic`` made the partition directories, its topic file
not written yet); ``topic.after_meta_unlink`` (``delete_topic`` removed the topic file, not yet
its partitions);
``producer_ids.after_temp_fsync`` and ``producer_ids.after_rename`` (a producer-id block file
written and synced but not renamed; renamed but its directory not yet synced, ``durable_file``);
``cleaner.after_cleaned``, ``cleaner.after_merge_hint``, ``cleaner.before_log_swap``,
``cleaner.after_swap_commit``, ``cleaner.between_swap_renames``, ``cleaner.after_swap``,
``cleaner.between_merged_deletes``, ``cleaner.before_merge_hint_delete`` (the log cleaner's
segment swap and merge, ``storage.cleaner_swap``);
``coordinator_snapshot.after_temp_fsync`` / ``.after_rename`` and ``offsets_snapshot.*`` (the
same two steps of writing a coordinator or group offset state snapshot, ``state_snapshot``),
and ``cleaner.horizon.*`` (the cleaner horizon's write, ``storage.cleaner_horizon``);
``log_start.after_temp_fsync`` / ``.after_rename`` (DeleteRecords' log start checkpoint,
``storage.log_start_checkpoint``) and ``delete_records.after_checkpoint`` (DeleteRecords done,
its answer not given yet);
``sink.task_write``, ``sink.before_commit``, ``sink.after_commit`` (a Spark sink's task and
driver, ``txn_sink``); ``kafka_task.before_commit`` and ``kafka_task.after_commit`` (a Kafka-mode
task's transaction with its ledger record sent but open; committed, the task not returned yet:
``commit_protocol.kafka_task``).
"""

from __future__ import annotations

import contextlib
import os
import signal

_ARMED = os.environ.get("TXNLOG_CRASH_POINT") or None
_remaining = int(os.environ.get("TXNLOG_CRASH_AFTER", "1"))
_GROUP = os.environ.get("TXNLOG_CRASH_SCOPE") == "group"
_STOP = os.environ.get("TXNLOG_CRASH_SIGNAL") == "STOP"


def crash_point(name: str) -> None:
    """SIGKILL (or SIGSTOP) this process here if the environment armed ``name``."""
    global _remaining
    if _ARMED is None or name != _ARMED:
        return
    _remaining -= 1
    if _STOP:
        if _remaining == 0:  # once: the process goes on after SIGCONT
            os.kill(os.getpid(), signal.SIGSTOP)
        return
    if _remaining <= 0:
        if _GROUP:
            # the session leader's group (the driver and its JVM), then our own group (PySpark's
            # worker daemon puts its workers in a process group of their own)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getsid(0), signal.SIGKILL)
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
