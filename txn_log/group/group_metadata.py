"""The committed offsets of every group, as ``__consumer_offsets`` materializes them (O-03..O-05).

Kafka's group coordinator keeps, per group, the offsets it has materialized and, apart from them,
the transactional offset commits still pending per producer id
(``GroupMetadata.pendingTransactionalOffsetCommits``). This is the same bookkeeping for every
group of the embedded log at once, fed in log order by ``GroupOffsetStore``:

- a plain (non-transactional) offset commit is materialized at once;
- a transactional one is held as pending under its producer id (O-03 step 3, O-05), never
  returned (O-04), and hides nothing else: one group's open transaction never delays another
  group's offsets, nor the same group's plain commits;
- that producer's COMMIT marker materializes its pending offsets, its ABORT marker drops them;
- materializing keeps whichever record was appended *later* to the log (Kafka's
  ``completePendingTxnOffsetCommit``: ``olderThan`` compares append offsets), so a plain commit
  written after a transactional one survives the transaction's commit, and a transactional one
  written after a plain one replaces it at commit.

A record with a null value (a tombstone) deletes the group's offset for that partition; it is
kept as a deletion with its log offset, so that an older pending commit cannot bring the offset
back.

Not thread-safe on its own: the store that owns it serializes every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from txn_log.topic_partition import TopicPartition

GroupPartition = tuple[str, "TopicPartition"]


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed position: ``offset`` is the *next* offset to read (exclusive end).
    Exported by ``group_offsets`` (and ``txn_log``), where users meet it."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class CommitRecordMetadataAndOffset:
    """One offset-commit record: where it sits in ``__consumer_offsets`` and what it commits.

    ``record_offset`` is the record's offset in ``__consumer_offsets`` (the later append wins);
    ``committed`` is None for a deletion.
    """

    record_offset: int
    committed: OffsetAndMetadata | None

    def older_than(self, other: CommitRecordMetadataAndOffset) -> bool:
        return self.record_offset < other.record_offset


GroupOffsetEntry = tuple[int | None, GroupPartition, CommitRecordMetadataAndOffset]
"""One entry of the state: (pending producer id, or None if materialized; key; record)."""


class GroupMetadata:
    """Materialized and pending offset commits of every group (O-04, O-05)."""

    def __init__(self) -> None:
        self._offsets: dict[GroupPartition, CommitRecordMetadataAndOffset] = {}
        self._pending: dict[int, dict[GroupPartition, CommitRecordMetadataAndOffset]] = {}
        self._partitions_by_group: dict[str, set[TopicPartition]] = {}
        """The partitions of each group's materialized records (deletions included): a
        group's lookups cost its own partitions, not every group's."""

    def on_offset_commit(
        self, key: GroupPartition, commit: CommitRecordMetadataAndOffset, producer_id: int | None
    ) -> None:
        """An offset-commit record read from the log; ``producer_id`` None for a plain commit
        (materialized now), else the transactional producer's id (held until its marker)."""
        if producer_id is None:
            self._materialize(key, commit)
        else:
            self._pending.setdefault(producer_id, {})[key] = commit

    def complete_pending_txn(self, producer_id: int, commit: bool) -> None:
        """A COMMIT (``commit``) or ABORT marker of ``producer_id`` read from the log."""
        pending = self._pending.pop(producer_id, {})
        if commit:
            for key, record in pending.items():
                self._materialize(key, record)

    def _materialize(self, key: GroupPartition, record: CommitRecordMetadataAndOffset) -> None:
        current = self._offsets.get(key)
        if current is None or current.older_than(record):
            self._offsets[key] = record
            self._partitions_by_group.setdefault(key[0], set()).add(key[1])

    def committed(self, key: GroupPartition) -> OffsetAndMetadata | None:
        """The materialized offset of ``(group, partition)``; None if none or deleted."""
        record = self._offsets.get(key)
        return None if record is None else record.committed

    def all_committed(self) -> dict[GroupPartition, OffsetAndMetadata]:
        """Every materialized (not deleted) offset."""
        return {
            key: record.committed
            for key, record in self._offsets.items()
            if record.committed is not None
        }

    def snapshot_entries(self) -> list[GroupOffsetEntry]:
        """The whole state as ``(producer id or None, key, record)``: materialized records
        (deletions included) under None, then each producer's pending ones, sorted. Feeding
        them back through ``on_offset_commit`` into a fresh object gives an equal one (the
        group offset snapshot, ``group_offsets``); equal states give equal lists."""
        entries: list[GroupOffsetEntry] = [
            (None, key, record) for key, record in sorted(self._offsets.items())
        ]
        for producer_id in sorted(self._pending):
            entries += [
                (producer_id, key, record)
                for key, record in sorted(self._pending[producer_id].items())
            ]
        return entries

    def group_partitions(self, group_id: str) -> set[TopicPartition]:
        """The partitions for which ``group_id`` has an offset, committed (not deleted) or
        pending: empty for a group that does not exist."""
        committed = {
            tp
            for tp in self._partitions_by_group.get(group_id, ())
            if self._offsets[(group_id, tp)].committed is not None
        }
        return committed | self.pending_partitions(group_id)

    def group_ids(self) -> list[str]:
        """Every group with a committed (not deleted) offset, sorted."""
        return sorted(
            group
            for group, partitions in self._partitions_by_group.items()
            if any(self._offsets[(group, tp)].committed is not None for tp in partitions)
        )

    def pending_partitions(self, group_id: str) -> set[TopicPartition]:
        """The partitions for which ``group_id`` has a transactional offset commit waiting for
        its producer's marker."""
        return {
            tp for pending in self._pending.values() for (group, tp) in pending if group == group_id
        }

    @property
    def pending_producer_ids(self) -> frozenset[int]:
        """Producers whose transactional offsets wait for a marker (for tools and tests)."""
        return frozenset(self._pending)
