"""librdkafka's own ``rdkafka_performance`` against ``txnlog serve``: the C client's
throughput through the server, produce (idempotent, acks=all) then consume (read_committed).

Three cases, each on a fresh server and log (``--auto-create-topics --default-partitions 4``):
100-byte records on 4 partitions and on one, and 1 KB records compressed with lz4. Each
direction runs twice on the same server: a lead run of a quarter of ``--records``, then
``--records``. Printed per case: the whole run's messages/s as the tool reports them (from
its start), and the steady rate, the extra records of the long run over its extra time
(``(N - N/4) / (t_N - t_N/4)``), which cancels what every run of the tool spends before its
first message moves. librdkafka 2.15 spends about one second there with any broker (its
debug log, ``-d broker,eos``): it drops the bootstrap connection once it knows broker 0,
its idempotent producer then waits for its 500 ms PID timer, and its broker thread sends
the first batch at its next wake-up about 0.5 s later; the server answers each request
of that start in about a millisecond. So a run of 1M records spends about half its time
before the first produce. The targets (issue 27: produce >= 1,000,000 and consume >=
1,100,000 messages/s, 100 B, idempotent, 4 partitions) are judged on the steady rates,
the whole-run rates printed beside them. Never asserts.

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


@dataclass(frozen=True)
class Rate:
    """One direction of a case: the whole long run as the tool reports it, and steady."""

    whole: float  # msgs/s
    whole_mb: float  # MB/s
    steady: float  # msgs/s


def run_case(tool: Path, case: Case, records: int) -> tuple[Rate, Rate]:
    """(produce, consume) on a fresh server: each a lead run of ``records // 4``, then
    ``records`` (module docstring)."""
    lead = records // 4
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
            produce = [*base, "-P", "-s", str(case.size), "-a", "-1",
                       "-X", "enable.idempotence=true", *case.extra]  # fmt: skip
            produced = [_run([*produce, "-c", str(count)], PRODUCED) for count in (lead, records)]
            for count, match in zip((lead, records), produced, strict=True):
                if int(match.group(1)) != count:
                    raise SystemExit(f"{case.name}: {match.group(1)} of {count} delivered")
            partitions = [arg for p in range(case.partitions) for arg in ("-p", str(p))]
            consume = [*base, "-C", *partitions, "-o", "beginning",
                       "-X", "isolation.level=read_committed"]  # fmt: skip
            consumed = [_run([*consume, "-c", str(count)], CONSUMED) for count in (lead, records)]
        finally:
            server.stop()
    return (
        _rate(produced, records - lead, time_group=2, rate_group=3, mb_group=4),
        _rate(consumed, records - lead, time_group=3, rate_group=4, mb_group=5),
    )


def _rate(
    runs: list[re.Match[str]], extra: int, *, time_group: int, rate_group: int, mb_group: int
) -> Rate:
    short, long = runs
    extra_ms = int(long.group(time_group)) - int(short.group(time_group))
    steady = extra / (extra_ms / 1000) if extra_ms > 0 else float("inf")
    return Rate(float(long.group(rate_group)), float(long.group(mb_group)), steady)


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
        produce, consume = run_case(tool, case, args.records)
        target = ""
        if case is CASES[0]:
            passed = produce.steady >= PRODUCE_TARGET and consume.steady >= CONSUME_TARGET
            target = (
                f"  (targets, steady: produce >= {PRODUCE_TARGET:,}, consume >= "
                f"{CONSUME_TARGET:,}) {'PASS' if passed else 'MISS'}"
            )
        print(
            f"{case.name:<24} produce (idempotent, acks=all) steady {produce.steady:>11,.0f} "
            f"msgs/s (whole run {produce.whole:>9,.0f}, {produce.whole_mb:.1f} MB/s); consume "
            f"read_committed steady {consume.steady:>11,.0f} msgs/s (whole run "
            f"{consume.whole:>9,.0f}, {consume.whole_mb:.1f} MB/s){target}"
        )


if __name__ == "__main__":
    main()
