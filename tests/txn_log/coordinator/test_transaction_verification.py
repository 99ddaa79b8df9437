"""A transactional append must belong to a transaction the coordinator knows (KIP-890 part 1,
C-16; issue 24, defect 2), on every append path, and KIP-360's expected producer id and epoch
are checked by the coordinator under its lock (R-05).

Before: the partition appended any transactional batch under any producer id. One that
started no transaction the coordinator knew of pinned the partition's last stable offset
forever: no transaction timeout ends it (the coordinator has no such transaction), nor does
``txnlog transactions abort``; every read_committed reader stopped at it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile_batches import good_batch
from tests.support import directory_bytes
from txn_log.clock import ManualClock
from txn_log.coordinator.transactional_append import (
    append_client_batch,
    verified_transaction_starts,
)
from txn_log.errors import (
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionalIdAuthorizationError,
)
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

OUT0, OUT1 = TopicPartition("out", 0), TopicPartition("out", 1)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log", clock=ManualClock())
    log.create_topic("out", partitions=2)
    return log


def txn_batch(producer_id: int, epoch: int, sequence: int = 0, value: bytes = b"v") -> bytes:
    return good_batch(
        [value],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=True,
    )


def lso_is_free(log: Log, tp: TopicPartition) -> bool:
    reader = log.partition_reader(tp)
    return reader.last_stable_offset == reader.high_watermark


def test_an_unverified_transactional_batch_is_refused_by_the_partition(log: Log) -> None:
    """Someone else's producer id, no transaction: refused, nothing written, LSO free."""
    victim = log.producer(transactional_id="victim")
    victim.init_transactions()
    before = directory_bytes(log.path, content_only=True)
    with pytest.raises(InvalidTxnStateError, match="KIP-890"):
        log.partition_log(OUT0).append(txn_batch(victim.producer_id, victim.producer_epoch))
    assert directory_bytes(log.path, content_only=True) == before
    assert lso_is_free(log, OUT0)


def test_a_transactional_batch_without_a_transactional_id_is_not_authorized(log: Log) -> None:
    victim = log.producer(transactional_id="victim")
    victim.init_transactions()
    victim.begin_transaction()
    victim.register_partitions([OUT0])  # even into the victim's open transaction
    batch = txn_batch(victim.producer_id, victim.producer_epoch)
    with pytest.raises(TransactionalIdAuthorizationError) as raised:
        append_client_batch(log.coordinator, log.partition_log(OUT0), batch, transactional_id=None)
    assert raised.value.code == 53
    assert log.partition_reader(OUT0).log_end_offset == 0


def test_a_batch_to_a_partition_outside_the_transaction_is_refused(log: Log) -> None:
    producer = log.producer(transactional_id="t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.register_partitions([OUT0])
    batch = txn_batch(producer.producer_id, producer.producer_epoch)
    with pytest.raises(InvalidTxnStateError, match="not part of"):
        append_client_batch(log.coordinator, log.partition_log(OUT1), batch, transactional_id="t")
    result = append_client_batch(
        log.coordinator, log.partition_log(OUT0), batch, transactional_id="t"
    )
    assert result.base_offset == 0
    assert not lso_is_free(log, OUT0)
    producer.abort_transaction()
    assert lso_is_free(log, OUT0)


def test_a_late_batch_after_the_commit_cannot_start_a_hanging_transaction(log: Log) -> None:
    """The Bufstream/KIP-890 case: a produce delayed past EndTxn, same producer and epoch."""
    producer = log.producer(transactional_id="t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"committed", partition=0)
    producer.commit_transaction()
    late = txn_batch(producer.producer_id, producer.producer_epoch, sequence=1, value=b"late")
    with pytest.raises(InvalidTxnStateError):
        append_client_batch(log.coordinator, log.partition_log(OUT0), late, transactional_id="t")
    assert lso_is_free(log, OUT0)
    assert [r.value for r in log.consumer().read(OUT0, 0)] == [b"committed"]


def test_the_engine_producer_still_writes_transactions_across_partitions(log: Log) -> None:
    producer = log.producer(transactional_id="t")
    producer.init_transactions()
    for round_ in range(3):
        producer.begin_transaction()
        for partition in (0, 1):
            producer.send("out", b"r%d" % round_, partition=partition)
        producer.flush()
        producer.send("out", b"more", partition=0)
        producer.commit_transaction()
    assert [r.value for r in log.consumer().read(OUT1, 0)] == [b"r0", b"r1", b"r2"]
    assert lso_is_free(log, OUT0) and lso_is_free(log, OUT1)


def test_kip360_expected_producer_is_checked_under_the_coordinators_lock(log: Log) -> None:
    coordinator = log.coordinator
    producer_id, epoch = coordinator.init_producer_id("k", 60_000)
    bumped = coordinator.init_producer_id("k", 60_000, expected=(producer_id, epoch))
    assert bumped == (producer_id, epoch + 1)
    with pytest.raises(ProducerFencedError):  # the old epoch may not bump again
        coordinator.init_producer_id("k", 60_000, expected=(producer_id, epoch))
    with pytest.raises(ProducerFencedError):
        coordinator.init_producer_id("k", 60_000, expected=(producer_id + 1, epoch + 1))
    # an unknown transactional id: nothing to be fenced by (Kafka: a new mapping)
    assert coordinator.init_producer_id("new", 60_000, expected=(123, 4))[1] == 0


def test_a_newer_epochs_batch_cannot_join_an_open_transaction_unverified(log: Log) -> None:
    """A batch of the producer id at a newer epoch, while the current instance's transaction
    is open in the partition, would join that transaction in the partition's producer state:
    it must be verified like a start (the coordinator knows no such epoch: fenced)."""
    producer = log.producer(transactional_id="t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"open", partition=0)
    producer.flush()
    newer = txn_batch(producer.producer_id, producer.producer_epoch + 1, value=b"forged")
    end = log.partition_reader(OUT0).log_end_offset
    with pytest.raises(InvalidTxnStateError, match="KIP-890"):
        log.partition_log(OUT0).append(newer)
    with pytest.raises(ProducerFencedError):
        append_client_batch(log.coordinator, log.partition_log(OUT0), newer, transactional_id="t")
    assert log.partition_reader(OUT0).log_end_offset == end
    producer.commit_transaction()
    assert [r.value for r in log.consumer().read(OUT0, 0)] == [b"open"]


def test_one_verified_hold_covers_only_its_partitions_producer_and_duration(log: Log) -> None:
    """``verified_transaction_starts`` (a producer's flush verifying every partition its
    transaction starts in at once) lets through only batches of the verified producer and
    epoch into the verified partitions, and only while it holds the coordinator."""
    producer = log.producer(transactional_id="t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.register_partitions([OUT0, OUT1])
    pid, epoch = producer.producer_id, producer.producer_epoch
    other = log.producer(transactional_id="other")
    other.init_transactions()
    with verified_transaction_starts(log.coordinator, ("t", pid, epoch), [OUT0]) as verified:
        stranger = txn_batch(other.producer_id, other.producer_epoch)
        with pytest.raises(InvalidTxnStateError):  # another producer: verified as usual
            append_client_batch(
                log.coordinator, log.partition_log(OUT0), stranger, transactional_id="other",
                verified=verified,
            )  # fmt: skip
        result = append_client_batch(
            log.coordinator, log.partition_log(OUT0), txn_batch(pid, epoch), transactional_id="t",
            verified=verified,
        )  # fmt: skip
        assert result.base_offset == 0
    assert not verified.covers(OUT1, pid, epoch) and not verified.covers(OUT0, pid, epoch)
    producer.abort_transaction()
    assert lso_is_free(log, OUT0) and lso_is_free(log, OUT1)
    with pytest.raises(InvalidTxnStateError):  # the hold ended: no start without the coordinator
        append_client_batch(
            log.coordinator, log.partition_log(OUT1), txn_batch(pid, epoch, sequence=1),
            transactional_id="t", verified=verified,
        )  # fmt: skip
    assert lso_is_free(log, OUT1)
