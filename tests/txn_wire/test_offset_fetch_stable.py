"""OffsetFetch v7 ``require_stable`` (KIP-447): a partition whose offset the group is
committing in a transaction still open is UNSTABLE_OFFSET_COMMIT (88), offset -1, until the
transaction ends; read_committed consumers (librdkafka's default, the Java client's) send it
after each rebalance so that a new owner never starts from the offset before the previous
owner's commit, which would duplicate that owner's output (O-04)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

OFFSET_FETCH, UNSTABLE_OFFSET_COMMIT = 9, 88
P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def _fetched(raw: RawClient, stable: bool, all_topics: bool = False) -> dict[int, tuple[int, int]]:
    """partition -> (error code, offset) of group ``copier``'s offsets of ``orders``."""
    body: dict[str, Any] = {
        "group_id": "copier",
        "topics": None if all_topics else [{"name": "orders", "partition_indexes": [0, 1]}],
        "require_stable": stable,
    }
    answer = raw.request(OFFSET_FETCH, 7, body)
    assert answer["error_code"] == 0, answer
    return {
        p["partition_index"]: (p["error_code"], p["committed_offset"])
        for t in answer["topics"]
        for p in t["partitions"]
    }


def test_an_offset_committed_in_an_open_transaction_is_unstable_until_it_ends(
    log_dir: Path, server: ServeProcess
) -> None:
    """The group committed 2 and 3 plainly; a transaction then commits 5 for partition 0 and
    stays open: require_stable answers 88 for partition 0 (3 for partition 1, untouched), a
    fetch without it the stable 2; after the COMMIT, 5 for both kinds; after an aborted one,
    the committed offset again. Before: 0 and the old offset while the transaction was open."""
    raw = RawClient(server.port)
    with Log.open(log_dir) as log:
        log.group_offsets.commit("copier", {P0: 2, P1: 3})
        producer = log.producer("copier-0")
        producer.init_transactions()
        try:
            producer.begin_transaction()
            producer.send_offsets_to_transaction({P0: 5}, "copier")
            producer.flush()
            for all_topics in (False, True):
                assert _fetched(raw, True, all_topics) == {
                    0: (UNSTABLE_OFFSET_COMMIT, -1),
                    1: (0, 3),
                }
                assert _fetched(raw, False, all_topics) == {0: (0, 2), 1: (0, 3)}
            producer.commit_transaction()
            assert _fetched(raw, True) == {0: (0, 5), 1: (0, 3)}
            producer.begin_transaction()
            producer.send_offsets_to_transaction({P1: 9}, "copier")
            producer.flush()
            assert _fetched(raw, True)[1] == (UNSTABLE_OFFSET_COMMIT, -1)
            producer.abort_transaction()
            assert _fetched(raw, True) == {0: (0, 5), 1: (0, 3)}
        finally:
            producer.close()
            raw.close()
