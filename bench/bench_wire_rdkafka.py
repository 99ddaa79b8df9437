"""librdkafka's own ``rdkafka_performance`` against ``txnlog serve``: the C client's
throughput through the server, produce (idempotent, acks=all) then consume (read_committed).

Three runs, each on a fresh server and log (``--auto-create-topics --default-partitions 4``):
100-byte records on 4 partitions and on one, and 1 KB records compressed with lz4. Prints each
run's messages/s and MB/s and the targets beside them (issue 27: produce >= 1,000,000 and
consume >= 1,100,000 messages/s, 100 B, idempotent, 4 partitions). Never asserts.

It needs ``rdkafka_performance``, built from librdkafka's source (``examples/``; not in this
repository): ``RDKAFKA_PERFORMANCE=/path/to/rdkafka_performance``, or
``LIBRDKAFKA_TESTS=<librdkafka>/tests`` (the suite runner's variable) with the tool built
beside it in ``<librdkafka>/examples``. Without it, it says how to build it and exits 0.

    .venv/bin/python bench/bench_wire_rdkafka.py [--records N]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo.served import start_serve

BUILD = """skipped: rdkafka_performance not found ({why}).
Build it from librdkafka's source (github.com/confluentinc/librdkafka, the README's
"librdkafka's test suite" says which packages): ./configure --disable-curl && make libs, then
make -C examples rdkafka_performance; point RDKAFKA_PERFORMANCE at it, or LIBRDKAFKA_TESTS at
that tree's tests/ directory."""
PRODUCED = re.compile(r"(\d+) delivered .*? in (\d+)ms: (\d+) msgs/s and ([\d.]+) MB/s")
CONSUMED = re.compile(
    r"(\d+) messages \((\d+) bytes\) consumed in (\d+)ms: (\d+) msgs/s \(([\d.]+) MB/s\)"
)
TIMEOUT_S = 600


@dataclass(frozen=True)
class Case:
    name: str
    size: int
    partitions: int
    extra: tuple[str, ...] = ()


CASES = (
    Case("100 B, 4 partitions", 100, 4),
    Case("100 B, 1 partition", 100, 1),
    Case("1 KB lz4, 4 partitions", 1000, 4, ("-X", "compression.codec=lz4")),
)


def find_tool() -> tuple[Path | None, str]:
    given = os.environ.get("RDKAFKA_PERFORMANCE")
    if given:
        path = Path(given)
        return (path, "") if os.access(path, os.X_OK) else (None, f"{given} is not executable")
    tests = os.environ.get("LIBRDKAFKA_TESTS")
    if not tests:
        return None, "neither RDKAFKA_PERFORMANCE nor LIBRDKAFKA_TESTS is set"
    path = Path(tests).parent / "examples" / "rdkafka_performance"
    return (path, "") if os.access(path, os.X_OK) else (None, f"{path} is not built")


def run_case(tool: Path, case: Case, records: int) -> tuple[float, float, float, float]:
    """(produce msgs/s, produce MB/s, consume msgs/s, consume MB/s) on a fresh server."""
    with tempfile.TemporaryDirectory() as tmp:
        server = start_serve(
            Path(tmp) / "log",
            "--auto-create-topics",
            "--default-partitions",
            str(case.partitions),
            stderr=subprocess.DEVNULL,
        )
        try:
            base = [str(tool), "-t", "bench", "-b", server.bootstrap]
            produced = _run(
                [*base, "-P", "-s", str(case.size), "-c", str(records), "-a", "-1",
                 "-X", "enable.idempotence=true", *case.extra],
                PRODUCED,
            )  # fmt: skip
            if int(produced.group(1)) != records:
                raise SystemExit(f"{case.name}: {produced.group(1)} of {records} delivered")
            partitions = [arg for p in range(case.partitions) for arg in ("-p", str(p))]
            consumed = _run(
                [*base, "-C", *partitions, "-o", "beginning", "-c", str(records),
                 "-X", "isolation.level=read_committed"],
                CONSUMED,
            )  # fmt: skip
        finally:
            server.stop()
    return (
        float(produced.group(3)),
        float(produced.group(4)),
        float(consumed.group(4)),
        float(consumed.group(5)),
    )


def _run(command: list[str], pattern: re.Pattern[str]) -> re.Match[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    matches = list(pattern.finditer(done.stdout + done.stderr))
    if done.returncode != 0 or not matches:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return matches[-1]


PRODUCE_TARGET, CONSUME_TARGET = 1_000_000, 1_100_000  # msgs/s, issue 27


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    tool, why = find_tool()
    if tool is None:
        print(BUILD.format(why=why))
        return
    print(f"rdkafka_performance ({tool}) through txnlog serve, {args.records:,} records a run")
    for case in CASES:
        produce, produce_mb, consume, consume_mb = run_case(tool, case, args.records)
        target = ""
        if case is CASES[0]:
            passed = produce >= PRODUCE_TARGET and consume >= CONSUME_TARGET
            target = (
                f"  (targets: produce >= {PRODUCE_TARGET:,}, consume >= {CONSUME_TARGET:,}) "
                f"{'PASS' if passed else 'MISS'}"
            )
        print(
            f"{case.name:<24} produce (idempotent, acks=all) {produce:>11,.0f} msgs/s "
            f"{produce_mb:>7.1f} MB/s; consume read_committed {consume:>11,.0f} msgs/s "
            f"{consume_mb:>7.1f} MB/s{target}"
        )


if __name__ == "__main__":
    main()
