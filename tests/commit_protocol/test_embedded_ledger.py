"""The embedded backend's ledger is the coordinator's atomic commit (DESIGN §4-5): its key is the
sink id, unchanged, and its sequence is Spark's batch id, so the ledgers that logs written
before the engine's atomic commit was generalised carry are still each sink's ledger."""

from __future__ import annotations

from pathlib import Path

from commit_protocol.batch_commit import SinkCommitProtocol, SinkIdentity
from commit_protocol.embedded import EmbeddedBackend
from commit_protocol.messages import LedgerEntry
from txn_log.coordinator.transaction_coordinator import STATE_PARTITION
from txn_log.coordinator.txn_ref import TxnRef
from txn_log.log import Log
from txn_log.record.codec import encode_records
from txn_log.storage.producer_append_info import AppendOrigin
from txn_log.topic_partition import TopicPartition

SINK_ID = "spark-query-q"
# The record the sink's batch commit wrote for batch 7, completed, before the engine knew it
# as an atomic commit: written here byte by byte, not with the engine's encoder.
OLD_KEY = bytes.fromhex("0064 000d") + SINK_ID.encode()  # key version 100 | sink id
OLD_VALUE = bytes.fromhex(
    "0000"  # value version 0
    "0000000000000007"  # batch id 7
    "04"  # COMPLETE_COMMIT
    "00000000"  # no transactions
    "ffff"  # null group id
    "00000000"  # no offsets
    "0000000000000063"  # timestamp_ms 99
)


def test_a_ledger_written_before_the_atomic_commit_is_the_sinks_ledger(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "log")
    batch = encode_records([(OLD_KEY, OLD_VALUE, 99, ())], now_ms=99)
    log.partition_log(STATE_PARTITION).append(batch, origin=AppendOrigin.COORDINATOR)
    backend = EmbeddedBackend(log)
    assert backend.last_committed_batch(SINK_ID) == 7
    assert backend.is_batch_committed(SINK_ID, 7) and not backend.is_batch_committed(SINK_ID, 8)
    assert backend.ledgers() == (LedgerEntry(SINK_ID, 7, (), None, (), 99),)
    protocol = SinkCommitProtocol(backend, SinkIdentity(SINK_ID, "pfx"))
    assert protocol.begin_task(7, 0) is None  # a re-run of batch 7 writes nothing
    assert protocol.commit(7, [protocol.skipped_task(7, 0, 0)]) is False


def test_ledgers_list_each_sink_with_its_batch_transactions_and_offsets(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "log")
    log.create_topic("out", partitions=1)
    log.create_topic("src", partitions=1)
    backend = EmbeddedBackend(log)
    task = backend.begin_transaction("pfx-0", 60_000, "none")
    ref = TxnRef(task.transactional_id, task.producer_id, task.producer_epoch)
    assert backend.commit_batch(SINK_ID, 4, [ref], "grp", [("src", 0, 12)])
    (entry,) = backend.ledgers()
    assert entry == LedgerEntry(
        SINK_ID, 4, (ref.transactional_id,), "grp", (("src", 0, 12),), entry.timestamp_ms
    )
    recorded = log.coordinator.ledger_entry(SINK_ID)  # the engine's record: the very ref
    assert recorded is not None and recorded.transactions == (ref,)
    src = TopicPartition("src", 0)
    assert backend.committed_offsets("grp", [src]) == {src: 12}
