"""One attempt of a sink write task in a process of its own, as a Spark executor runs it
(``txn_sink.task_writer.write_task``), for the stale-attempt fault scenario.

    python -m integration.stale_attempt LOG_DIR ATTEMPT ROWS [--pause-after N] [--bootstrap B]

Writes ``ROWS`` rows (``row-<i>``, keyed, to topic ``orders_clean``) as task 0 of batch 0 of
sink ``stale-test``, one appended batch per row. With ``--pause-after N`` the process stops
itself with SIGSTOP after N rows are in the log, as a task frozen by a long GC pause or a
swapped-out executor; when the test sends SIGCONT it goes on with the rest. On success it
prints the commit message (base64 pickle) on stdout; on failure it exits 1 with the error.
With ``--bootstrap`` the task writes in Kafka mode, to the ``txnlog serve`` at that address
(the task then commits its own transaction).
"""

from __future__ import annotations

import argparse
import base64
import os
import pickle
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from commit_protocol.batch_commit import SinkIdentity
from txn_sink.input_schema import InputColumns
from txn_sink.options import SinkOptions
from txn_sink.task_writer import write_task

SINK = SinkIdentity("stale-test", "stale-test", None)
TOPIC = "orders_clean"


def rows(count: int, pause_after: int | None) -> Iterator[Any]:
    for i in range(count):
        if i == pause_after:
            print("paused", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
        yield pa.record_batch(
            [pa.array([b"key-%d" % i]), pa.array([b"row-%d" % i])], names=["key", "value"]
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir")
    parser.add_argument("attempt", type=int)
    parser.add_argument("rows", type=int)
    parser.add_argument("--pause-after", type=int)
    parser.add_argument("--bootstrap")
    args = parser.parse_args()
    where = (
        {"kafka.bootstrap.servers": args.bootstrap} if args.bootstrap else {"path": args.log_dir}
    )
    options = SinkOptions.parse({**where, "topic": TOPIC, "batch.size": "1"})
    try:
        message, _ = write_task(
            options,
            InputColumns(("key", "value")),
            SINK,
            0,
            (0, args.attempt),
            rows(args.rows, args.pause_after),
        )
    except Exception as exc:  # the attempt failed: say why, as Spark's task failure would
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(base64.b64encode(pickle.dumps(message)).decode(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
