"""``txnlog verify`` checks a partition with problems again under its lock before reporting:
real problems must survive that second look, and ``--repair`` must fix the repairable ones
(issue 12 item 4; X-20: index entries describing batches that are not there)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.txn_log.cli.test_cli import log_dir, txnlog
from txn_log.storage import offset_index, txn_index

__all__ = ["log_dir"]  # the fixture: committed, aborted and open transactions


def test_real_index_problems_are_reported_after_the_second_look_and_repaired(
    log_dir: Path,
) -> None:
    partition = log_dir / "orders-0"
    index = partition / "00000000000000000000.index"
    with index.open("ab") as f:  # points into the middle of the first batch
        f.write(offset_index.ENTRY.pack(0, 5))
    aborted = partition / "00000000000000000000.txnindex"
    with aborted.open("ab") as f:  # an ABORT whose marker never landed (its writer died)
        f.write(txn_index.ENTRY.pack(0, 4242, 6, 9, 6))

    found = txnlog("verify", log_dir, "--json")
    assert found.returncode == 1
    problems = {p["file"]: p for p in json.loads(found.stdout)["problems"]}
    assert set(problems) == {str(index), str(aborted)}, problems
    assert all(p["repairable"] for p in problems.values())
    assert "does not point at the batch" in problems[str(index)]["problem"]
    assert "past the segment's end 6" in problems[str(aborted)]["problem"]

    repaired = txnlog("verify", log_dir, "--json", "--repair")
    report = json.loads(repaired.stdout)
    assert repaired.returncode == 0 and report["problems"] == [], report
    assert sorted(report["repaired"]) == [f"rebuilt {index}", f"rebuilt {aborted}"]
    assert txnlog("verify", log_dir).stdout.startswith("OK: 4 partition(s)")
