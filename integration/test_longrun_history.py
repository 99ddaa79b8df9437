"""The long run's correctness part (issue 14; ``bench/longrun_history.py``).

A history of micro-batch commits driven through the sink's commit protocol under a real Spark
query's identity, then that query restarted on the log in a fresh driver process: its output
holds every source record exactly once, and the ledger, the group offsets, the source's end
offsets and Spark's checkpoint agree. Figures are printed by ``make longrun``, not asserted
here. Slow (two Spark drivers): ``make test`` skips it; the count is
``TXNLOG_LONGRUN_COMMITS`` (default 300; ``make longrun`` drives 100,000 in its own run).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.longrun_history import RESTART_RECORDS, TASKS, long_run

pytestmark = [pytest.mark.slow, pytest.mark.spark]

COMMITS = int(os.environ.get("TXNLOG_LONGRUN_COMMITS", "300"))


def test_a_query_restarted_on_a_long_history_writes_every_record_once(tmp_path: Path) -> None:
    run = long_run(tmp_path, COMMITS)
    print(run)
    verdict = run.verdict
    end = COMMITS + RESTART_RECORDS  # batch b consumed offset b; the restart the new records
    assert run.restart_batches == [COMMITS]  # resumed after the driven batches, one batch
    assert verdict.source_records == TASKS * end
    assert verdict.output_records == verdict.source_records
    assert (verdict.duplicates, verdict.missing, verdict.unexpected) == (0, 0, 0)
    assert verdict.ledger_batch == verdict.spark_last_batch == COMMITS
    expected = {str(p): end for p in range(TASKS)}
    assert verdict.source_end_offsets == expected
    assert verdict.ledger_offsets == expected
    assert verdict.group_offsets == expected
