"""Group offsets in ``__consumer_offsets``: pending transactional offsets per producer (O-03..O-05),
the later append wins when a transaction completes, and bad group ids and metadata refused before
anything is written (issue 12 items 1 and 13).

OffsetDelete's deletion of some partitions' offsets (``delete_offsets``) writes tombstones for
those only.

Each check reads twice: through the ``Log`` that watched every step (its cache catches up
incrementally) and through a fresh ``Log`` over the same directory (what another process or a
restart sees, replaying from the start).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import directory_bytes
from txn_log.errors import (
    ConfigError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    InvalidGroupIdError,
    OffsetMetadataTooLargeError,
    TxnLogError,
)
from txn_log.group.group_activity import GroupActivity
from txn_log.group.group_offsets import OFFSETS_PARTITION, OffsetAndMetadata
from txn_log.group.group_offsets_format import MAX_GROUP_ID_BYTES, MAX_METADATA_BYTES
from txn_log.log import Log
from txn_log.producer.producer import Producer
from txn_log.topic_partition import TopicPartition

IN0, IN1 = TopicPartition("in", 0), TopicPartition("in", 1)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "log")
    log.create_topic("in", partitions=2)
    log.create_topic("out", partitions=1)
    return log


def offset_of(log: Log, group: str, tp: TopicPartition = IN0) -> int | None:
    found = log.committed(group, [tp])[tp]
    return None if found is None else found.offset


def seen(log: Log, group: str, tp: TopicPartition = IN0) -> tuple[int | None, int | None]:
    """(offset through the watching log, offset through a fresh log)."""
    return offset_of(log, group, tp), offset_of(Log.open(log.path), group, tp)


def txn_offsets(log: Log, transactional_id: str, group: str, offset: int) -> Producer:
    """A producer with an open transaction holding ``group``'s offset for ``in-0``."""
    producer = log.producer(transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction({IN0: offset}, group)
    return producer


# --- issue 12 item 1: an open transaction hides only its own offsets --------------------------


def test_one_groups_open_transaction_hides_no_other_groups_offsets(log: Log) -> None:
    """O-04, O-05: G1's offsets in an open transaction stay invisible, but G2's plain commit
    written after them reads back at once; G1's appear at its COMMIT marker."""
    assert seen(log, "G2") == (None, None)
    g1 = txn_offsets(log, "t1", "G1", 7)
    log.group_offsets.commit("G2", {IN0: 42})
    assert seen(log, "G2") == (42, 42)
    assert seen(log, "G1") == (None, None)
    assert sorted(log.group_offsets.groups()) == ["G2"]
    g1.commit_transaction()
    assert seen(log, "G1") == (7, 7)
    assert seen(log, "G2") == (42, 42)


def test_aborted_offsets_are_dropped_and_hide_nothing(log: Log) -> None:
    """O-04, O-05: offsets of an aborted transaction never appear, and a later transaction of the
    same producer is judged on its own marker."""
    producer = txn_offsets(log, "t", "G", 5)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send_offsets_to_transaction({IN0: 9, IN1: 3}, "G")
    assert seen(log, "G") == (5, 5)
    producer.abort_transaction()
    assert seen(log, "G") == (5, 5)
    assert seen(log, "G", IN1) == (None, None)
    producer.begin_transaction()
    producer.send_offsets_to_transaction({IN0: 11}, "G")
    producer.commit_transaction()
    assert seen(log, "G") == (11, 11)


def test_offsets_of_a_fenced_transaction_never_appear(log: Log) -> None:
    """O-06, C-14: the next instance's init_transactions aborts the zombie's open transaction;
    its pending offsets are dropped at the ABORT marker."""
    txn_offsets(log, "t", "G", 5)
    log.group_offsets.commit("G", {IN0: 2})
    log.producer("t").init_transactions()
    assert seen(log, "G") == (2, 2)


# --- the later append wins (Kafka's completePendingTxnOffsetCommit) ------------------------------


def test_plain_commit_after_a_transactional_one_survives_the_transactions_commit(log: Log) -> None:
    """A plain commit of 20 written after the transaction's 10 is not overwritten when the
    transaction commits: its record came later in the log."""
    producer = txn_offsets(log, "t", "G", 10)
    log.group_offsets.commit("G", {IN0: 20})
    assert seen(log, "G") == (20, 20)
    producer.commit_transaction()
    assert seen(log, "G") == (20, 20)


def test_transactional_commit_after_a_plain_one_wins_at_commit(log: Log) -> None:
    """The reverse order: the plain 20 first, then the transaction's 10; at COMMIT the later
    record (10) is what committed() returns."""
    log.group_offsets.commit("G", {IN0: 20})
    producer = txn_offsets(log, "t", "G", 10)
    assert seen(log, "G") == (20, 20)
    producer.commit_transaction()
    assert seen(log, "G") == (10, 10)


def test_interleaved_transactions_of_one_group_keep_the_later_append(log: Log) -> None:
    """Two producers hold offsets of the same group: the one appended later (7) wins whichever
    commits first."""
    first = txn_offsets(log, "t1", "G", 5)
    second = txn_offsets(log, "t2", "G", 7)
    second.commit_transaction()
    assert seen(log, "G") == (7, 7)
    first.commit_transaction()
    assert seen(log, "G") == (7, 7)


def test_committed_offsets_survive_reading_between_every_step(log: Log) -> None:
    """The watching log and a fresh replay agree at every step of a mixed history."""
    history: list[tuple[int | None, int | None]] = []
    a = txn_offsets(log, "a", "G", 1)
    history.append(seen(log, "G"))
    log.group_offsets.commit("G", {IN0: 2})
    history.append(seen(log, "G"))
    b = txn_offsets(log, "b", "G", 3)
    history.append(seen(log, "G"))
    a.commit_transaction()  # a's 1 is older than the plain 2: no change
    history.append(seen(log, "G"))
    b.abort_transaction()
    history.append(seen(log, "G"))
    assert history == [(None, None), (2, 2), (2, 2), (2, 2), (2, 2)]


# --- issue 12 item 13: group ids and metadata that do not fit --------------------------------


def registered(log: Log, transactional_id: str) -> set[TopicPartition]:
    [md] = [m for m in log.coordinator.transactions() if m.transactional_id == transactional_id]
    return {TopicPartition(t, p) for t, p in md.topic_partitions}


def test_oversized_group_id_and_metadata_are_refused_before_registration(log: Log) -> None:
    """Item 13: a 40,000-byte group id (InvalidGroupIdError, Kafka code 24) and 40,000-byte
    metadata (OffsetMetadataTooLargeError, code 12) are refused before the offsets partition is
    added to the transaction; as any failed send inside a transaction (item 3), each leaves the
    transaction abortable only, and after the aborts no marker was written to
    ``__consumer_offsets``; the next transaction commits."""
    producer = log.producer("t")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"aborted", partition=0)
    producer.flush()
    with pytest.raises(InvalidGroupIdError, match="40000 bytes") as group_error:
        producer.send_offsets_to_transaction({IN0: 1}, "g" * 40_000)
    assert group_error.value.code == 24
    assert OFFSETS_PARTITION not in registered(log, "t")
    producer.abort_transaction()
    producer.begin_transaction()
    with pytest.raises(OffsetMetadataTooLargeError, match=r"in-0.*40000 bytes") as meta_error:
        producer.send_offsets_to_transaction({IN0: OffsetAndMetadata(1, "m" * 40_000)}, "G")
    assert meta_error.value.code == 12
    assert OFFSETS_PARTITION not in registered(log, "t")
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("out", b"v", partition=0)
    producer.commit_transaction()
    assert log.partition_log(OFFSETS_PARTITION).log_end_offset == 0
    assert [r.value for r in log.consumer().read(TopicPartition("out", 0), 0)] == [b"v"]


@pytest.mark.parametrize(
    ("group", "offsets", "error", "match"),
    [
        ("", {IN0: 1}, InvalidGroupIdError, "non-empty"),
        ("g" * 40_000, {IN0: 1}, InvalidGroupIdError, "at most 32767"),
        ("é" * 16_384, {IN0: 1}, InvalidGroupIdError, "32768 bytes"),
        ("G", {IN0: OffsetAndMetadata(1, "m" * 4097)}, OffsetMetadataTooLargeError, "at most 4096"),
        ("G", {IN0: -1}, ConfigError, "≥ 0"),
        ("G", {IN0: True}, ConfigError, "integer"),
        ("G", {IN0: 1 << 63}, ConfigError, "int64"),
        ("G", {IN0: OffsetAndMetadata(1, leader_epoch=1 << 31)}, ConfigError, "leader epoch"),
        ("G", {IN0: OffsetAndMetadata(1, None)}, ConfigError, "metadata"),  # type: ignore[arg-type]
        ("G", {TopicPartition("in", 1 << 31): 1}, ConfigError, "int32"),
        ("G", {TopicPartition("x" * 40_000, 0): 1}, ConfigError, "topic"),
        ("G", {("in", 0): 1}, ConfigError, "TopicPartition"),
    ],
)
def test_bad_offset_commits_are_typed_errors_and_write_nothing(
    log: Log,
    group: str,
    offsets: dict[TopicPartition, object],
    error: type[TxnLogError],
    match: str,
) -> None:
    """Item 13: every group id, offset or metadata that Kafka's OffsetCommit would refuse is a
    typed error naming what is wrong, for plain and transactional commits; no byte changes."""
    producer = log.producer("t")
    producer.init_transactions()
    producer.begin_transaction()
    before = directory_bytes(log.path, content_only=True)
    with pytest.raises(error, match=match):
        log.group_offsets.commit(group, offsets)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        producer.send_offsets_to_transaction(offsets, group)  # type: ignore[arg-type]
    assert directory_bytes(log.path, content_only=True) == before


def test_largest_group_id_and_metadata_round_trip(log: Log) -> None:
    """The limits are inclusive: a 32,767-byte group id and 4,096 bytes of metadata commit."""
    group = "g" * MAX_GROUP_ID_BYTES
    log.group_offsets.commit(group, {IN0: OffsetAndMetadata(3, "m" * MAX_METADATA_BYTES)})
    fresh = Log.open(log.path).committed(group, [IN0])[IN0]
    assert fresh == OffsetAndMetadata(3, "m" * MAX_METADATA_BYTES)


@pytest.mark.parametrize(
    ("group", "offsets", "error"),
    [
        ("", [("in", 0, 4)], InvalidGroupIdError),
        ("g" * 40_000, [("in", 0, 4)], InvalidGroupIdError),
        ("G", [("in", 0, -5)], ConfigError),
        ("G", [("in", 1 << 31, 4)], ConfigError),
    ],
)
def test_atomic_commit_refuses_bad_group_offsets_before_its_commit_point(
    log: Log, group: str, offsets: list[tuple[str, int, int]], error: type[TxnLogError]
) -> None:
    """DESIGN §4 atomic commit, STYLE 3: the group offsets of an atomic commit are validated before
    its PREPARE record (the commit point) is written. Written first, a bad group id or offset
    made the roll-forward fail in every process for ever, and the coordinator with it."""
    from txn_log.coordinator.txn_ref import TxnRef

    producer = log.producer("sink-0")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"v", partition=0)
    producer.flush()
    ref = TxnRef("sink-0", producer.producer_id, producer.producer_epoch)
    before = directory_bytes(log.path, content_only=True)
    with pytest.raises(error):
        log.coordinator.commit_transactions("sink", 0, [ref], group_id=group, offsets=offsets)
    assert directory_bytes(log.path, content_only=True) == before
    fresh = Log.open(log.path)
    assert fresh.coordinator.commit_transactions(
        "sink", 0, [ref], group_id="G", offsets=[("in", 0, 4)]
    )
    assert offset_of(fresh, "G") == 4
    assert [r.value for r in fresh.consumer().read(TopicPartition("out", 0), 0)] == [b"v"]


def test_other_int16_strings_over_32767_bytes_are_typed_errors_and_write_nothing(log: Log) -> None:
    """Item 13's class: the coordinator's state log stores the transactional id and the ledger key
    as int16 strings too; over 32,767 bytes they are a ConfigError (a TxnLogError), not a bare
    ValueError, raised before any transaction state is written. (init_transactions still
    reserves a producer-id block first: the producer's constructor does not check the length.)"""
    from txn_log.coordinator.txn_ref import TxnRef

    def state() -> dict[str, bytes]:
        files = directory_bytes(log.path, content_only=True)
        return {name: data for name, data in files.items() if name != "producer-ids"}

    before = state()
    with pytest.raises(ConfigError, match="transactional id is 40000 bytes"):
        log.producer("t" * 40_000).init_transactions()
    assert state() == before
    producer = log.producer("sink-0")
    producer.init_transactions()
    producer.begin_transaction()
    ref = TxnRef("sink-0", producer.producer_id, producer.producer_epoch)
    before = directory_bytes(log.path, content_only=True)
    with pytest.raises(ConfigError, match="ledger key is 40000 bytes"):
        log.coordinator.commit_transactions("s" * 40_000, 0, [ref])
    assert directory_bytes(log.path, content_only=True) == before


# --- OffsetDelete: some partitions' offsets deleted ---------------------------------------------


def test_delete_offsets_deletes_only_the_partitions_named(log: Log) -> None:
    """Tombstones for the named partitions that have an offset, none for the others; a group
    without offsets is GroupIdNotFoundError and a group with members somewhere
    GroupNotEmptyError, both writing nothing; a fresh process replays the same state."""
    out = TopicPartition("out", 0)
    log.group_offsets.commit("G", {IN0: 1, IN1: 2, out: 3})
    assert log.group_offsets.delete_offsets("G", [IN1, out, TopicPartition("gone", 5)]) == [
        IN1,
        out,
    ]
    assert seen(log, "G") == (1, 1)
    assert seen(log, "G", IN1) == seen(log, "G", out) == (None, None)
    before = directory_bytes(log.path, content_only=True)
    assert log.group_offsets.delete_offsets("G", [IN1]) == []  # nothing left there: no write
    with pytest.raises(GroupIdNotFoundError, match="'nowhere' has no committed offsets; groups: G"):
        log.group_offsets.delete_offsets("nowhere", [IN0])
    held = GroupActivity(log.path)
    assert held.hold("G")  # as a server with members of G does
    with pytest.raises(GroupNotEmptyError):
        log.group_offsets.delete_offsets("G", [IN0])
    assert directory_bytes(log.path, content_only=True) == before
    # the group coordinator holding the members deletes what it decided no member subscribes to
    assert log.group_offsets.delete_offsets("G", [IN0], live=True) == [IN0]
    assert log.group_offsets.delete_offsets("members-only", [IN0], live=True) == []
    held.release_all()
    assert "G" not in Log.open(log.path).group_offsets.groups()


def test_delete_offsets_deletes_a_pending_transactional_commit_as_kafka_does(log: Log) -> None:
    """Kafka's coordinator deletes a pending transactional offset too (a tombstone for its
    partition, later in the log than the pending record, which therefore loses when the COMMIT
    marker materializes it), whether or not the partition also had a committed offset; a
    transactional commit made after the deletion stands."""
    log.group_offsets.commit("G", {IN0: 1})
    producer = txn_offsets(log, "t", "G", 7)
    producer.send_offsets_to_transaction({IN1: 8}, "G")  # IN1: only a pending offset
    assert log.group_offsets.delete_offsets("G", [IN0, IN1]) == [IN0, IN1]
    producer.commit_transaction()
    assert seen(log, "G") == seen(log, "G", IN1) == (None, None)
    producer.begin_transaction()
    producer.send_offsets_to_transaction({IN0: 9}, "G")
    producer.commit_transaction()
    assert seen(log, "G") == (9, 9)
    pending_only = txn_offsets(log, "u", "H", 4)
    assert log.group_offsets.delete_group("H") == [IN0]  # H has no committed offset, yet exists
    pending_only.commit_transaction()
    assert seen(log, "H") == (None, None)
