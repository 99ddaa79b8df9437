"""Issue 27's table in one run: each pair measured side by side, each row with its target.

Runs, one after the other (never two at once: they would measure each other), and shows their
whole output as it comes:

* ``bench_serve.py``: ``Producer.send()`` in process against confluent-kafka through
  ``txnlog serve`` (target: in-process ≥ 1.0 × the wire);
* ``bench_wire_rdkafka.py``: librdkafka's ``rdkafka_performance`` through ``txnlog serve``
  (targets: produce ≥ 1M, consume read_committed ≥ 1.1M msgs/s; says how to build the tool
  when it is absent);
* ``bench_pipeline.py``: Spark ``txnlog → txnlog`` against the Python Data Source ceiling,
  by stage (target ≥ 0.9);
* ``bench_kafka_backend.py``: the main job's pipeline in Kafka mode against embedded
  (target ≥ 0.8);
* ``bench_transactions.py``: commit latency of a 4-partition transaction (target p50 ≤ 2 ms).

then repeats every line that states a target, under the script that printed it. Never
asserts; a script that fails is named in the summary with its exit status.

    .venv/bin/python bench/bench_table.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = (
    "bench_serve.py",
    "bench_wire_rdkafka.py",
    "bench_pipeline.py",
    "bench_kafka_backend.py",
    "bench_transactions.py",
)


def run(script: str) -> list[str]:
    """Run ``script``, echoing its output; the lines that state a target."""
    print(f"==> {script}", flush=True)
    process = subprocess.Popen(
        [sys.executable, str(HERE / script)],
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    rows = []
    for line in process.stdout:
        print(line, end="", flush=True)
        if "target" in line.lower() and not line.startswith(" " * 4):
            rows.append(line.strip())
    status = process.wait()
    if status:
        rows.append(f"FAILED: exit status {status}")
    return rows or ["(no target line: see its output above)"]


def main() -> None:
    table = {script: run(script) for script in SCRIPTS}
    print("\n== issue 27: each row with its target ==")
    for script, rows in table.items():
        print(f"{script}:")
        for row in rows:
            print(f"  {row}")


if __name__ == "__main__":
    main()
