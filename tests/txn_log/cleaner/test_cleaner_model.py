"""A compacted partition against a key → value model under random transactions, aborts,
cleanings, clock moves and reopening (C-02, B-11, B-17, B-18, P-29, T-05).

After every step, what read_committed delivers must agree with the model: offsets strictly
increasing, every record one that was committed at that offset, and for each key the newest
record delivered is the newest committed one (a tombstone may be gone once delete.retention.ms
passed, and then the key has no record at all). Cleaning may only remove records; it never
changes one, moves one or brings back an aborted one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tests.txn_log.cleaner.helpers import committed_records, end_txn, keyed, open_compacted
from txn_log.clock import ManualClock
from txn_log.storage.log_cleaner import NOTHING_CLEANABLE, clean_partition

KEYS = [b"a", b"b", b"c", b"d"]
RETENTION_MS = 10_000
TXN_PRODUCER, IDEMPOTENT_PRODUCER = 1, 2
writes = st.lists(
    st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=4))),
    min_size=1,
    max_size=4,
)


class CompactedTopic(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="cleaner-model-"))
        self.clock = ManualClock()
        self.log = open_compacted(
            self.root, self.clock, **{"delete.retention.ms": str(RETENTION_MS)}
        )
        self.sequences = {TXN_PRODUCER: 0, IDEMPOTENT_PRODUCER: 0}
        self.committed: dict[int, tuple[bytes, bytes | None, int]] = {}  # offset -> k, v, time
        self.newest: dict[bytes, int] = {}  # key -> offset of its newest committed record
        self.open_txn: list[tuple[int, bytes, bytes | None]] = []

    def _append(self, producer_id: int, pairs: list[tuple[bytes, bytes | None]], *,
                transactional: bool) -> int:  # fmt: skip
        batch = keyed(pairs, self.clock, producer_id=producer_id, epoch=0,
                      seq=self.sequences[producer_id], transactional=transactional)  # fmt: skip
        result = self.log.append(batch)
        assert not result.duplicate
        self.sequences[producer_id] += len(pairs)
        return result.base_offset

    def _commit(self, offset: int, key: bytes, value: bytes | None) -> None:
        self.committed[offset] = (key, value, self.clock.time_ms())
        self.newest[key] = offset

    @rule(pairs=writes, commit=st.booleans())
    def transaction(self, pairs: list[tuple[bytes, bytes | None]], commit: bool) -> None:
        base = self._append(TXN_PRODUCER, pairs, transactional=True)
        end_txn(self.log, TXN_PRODUCER, 0, commit=commit)
        if commit:
            for index, (key, value) in enumerate(pairs):
                self._commit(base + index, key, value)

    @rule(pairs=writes)
    def idempotent_write(self, pairs: list[tuple[bytes, bytes | None]]) -> None:
        base = self._append(IDEMPOTENT_PRODUCER, pairs, transactional=False)
        for index, (key, value) in enumerate(pairs):
            self._commit(base + index, key, value)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(ms=st.sampled_from([1, RETENTION_MS // 2, RETENTION_MS + 1]))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def clean(self) -> None:
        stats = clean_partition(self.log, self.clock.time_ms(), force=True)
        assert stats.skipped in (None, NOTHING_CLEANABLE)  # forced: never the ratio

    @rule(drop_snapshots=st.booleans())
    def reopen(self, drop_snapshots: bool) -> None:
        self.log.close()
        if drop_snapshots:
            for snapshot in self.root.glob("*.snapshot"):
                snapshot.unlink()
        self.log = open_compacted(
            self.root, self.clock, **{"delete.retention.ms": str(RETENTION_MS)}
        )

    @rule()
    def retry_last_idempotent_batch_is_a_duplicate(self) -> None:
        """P-29, X-14: the last batch survives cleaning as a header; its retry is a duplicate."""
        if self.sequences[IDEMPOTENT_PRODUCER] == 0:
            return
        entry = self.log.producer_state.last_entry(IDEMPOTENT_PRODUCER)
        assert entry is not None and entry.last_seq == self.sequences[IDEMPOTENT_PRODUCER] - 1

    @invariant()
    def reads_agree_with_the_model(self) -> None:
        records = committed_records(self.log)
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets)), "T-05: offsets kept, none duplicated"
        for offset, key, value in records:
            assert offset in self.committed, f"B-17: offset {offset} was never committed"
            assert self.committed[offset][:2] == (key, value), f"offset {offset} changed"
        newest_read: dict[bytes, int] = {}
        for offset, key, _ in records:
            assert key is not None
            newest_read[key] = offset
        for key, offset in self.newest.items():
            _, value, written = self.committed[offset]
            if key in newest_read:
                assert newest_read[key] == offset, f"newest of {key!r} is {offset}"
            else:
                assert value is None, f"committed {key!r} at {offset} is missing"
                assert self.clock.time_ms() - written >= RETENTION_MS, "tombstone went early"

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


def test_compacted_topic_matches_key_value_model() -> None:
    run_state_machine_as_test(
        CompactedTopic,
        settings=settings(
            max_examples=int(os.environ.get("TXNLOG_MODEL_EXAMPLES", "40")),
            stateful_step_count=30,
            deadline=None,
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
