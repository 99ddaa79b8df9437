"""The coordinator's state as a snapshot file (C-22 start-up without full replay, DESIGN §2).

A coordinator snapshot (``state_snapshot``, kind COORDINATOR) holds ``CoordinatorState.
snapshot_entries()``, each encoded exactly as the state log encodes it (``state_log_format``):
one ``TransactionLogKey``/``Value`` record per live transactional id and one atomic commit record
per ledger key. Loading decodes them and replays them into a fresh state with
``CoordinatorState.apply``, the same code that replays the log, so:

    restore(snapshot taken at offset N) + replay of [N, end)  ==  replay of [0, end)

for every log (tested with random histories, including transactions and atomic commits past
their commit point but not complete, which recovery then rolls forward the same way).

Compaction (C-02, C-10, C-11): the state log's keys are the transactional id and the ledger
key, and the newest record per key is the whole state of that key (a COMPLETE_* record without
partitions after a transaction, C-10; a tombstone after expiration, C-11, C-27; a ledger's last
sequence), so a log reduced to its newest record per key replays, and snapshots, to the same
state; ``snapshot_entries`` is exactly that reduction.

Taken only of a state caught up to a batch boundary ``N`` whose records are durable, under the
coordinator lock (``TransactionCoordinator``); the file is written by ``durable_file``'s rename,
so a half-written snapshot is never read. Pure functions, no I/O.
"""

from __future__ import annotations

from txn_log.coordinator.coordinator_state import CoordinatorState
from txn_log.coordinator.state_log_format import decode_record, encode_key, encode_value
from txn_log.storage.state_snapshot import SnapshotRecord, StateSnapshot

DEFAULT_SNAPSHOT_INTERVAL_RECORDS = 2000
"""A process writes a new snapshot once the state log holds this many records past the newest
one: the replay a fresh process pays stays below this many records, whatever the history."""


def snapshot_records(state: CoordinatorState) -> list[SnapshotRecord]:
    """The records of a snapshot of ``state``; raises CorruptRecordError if it is disabled."""
    return [SnapshotRecord(encode_key(e), encode_value(e)) for e in state.snapshot_entries()]


def restore(snapshot: StateSnapshot) -> CoordinatorState:
    """The state a snapshot holds (CorruptRecordError if a record does not decode)."""
    return CoordinatorState.replay(decode_record(r.key, r.value) for r in snapshot.records)
