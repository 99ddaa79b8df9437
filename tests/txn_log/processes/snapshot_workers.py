"""Worker program for the snapshot process tests (``test_state_snapshot_processes.py``).

Run from the repository root as
``python -m tests.txn_log.processes.snapshot_workers LOG SEED STEPS INTERVAL PREFIX``: opens the
log, snapshots every ``INTERVAL`` records (coordinator and group offsets), runs ``STEPS`` random
operations of ``run_history`` on ids named ``PREFIX...``, and prints one JSON line with what it
acknowledged. With ``TXNLOG_CRASH_POINT`` set (``coordinator_snapshot.*``,
``offsets_snapshot.*``) it SIGKILLs itself in the middle of writing a snapshot.
"""

from __future__ import annotations

import json
import random
import sys

from tests.txn_log.snapshot_history import run_history, set_intervals
from txn_log.log import Log


def main(argv: list[str]) -> None:
    path, seed, steps, interval, prefix = argv
    with Log.open(path, housekeeping_interval_ms=None) as log:
        set_intervals(log, int(interval))
        done = run_history(log, random.Random(int(seed)), int(steps), prefix)
    print(json.dumps(done), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
