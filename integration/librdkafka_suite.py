"""librdkafka's own test suite against ``txnlog serve`` (``make librdkafka-suite``; not part of
``make test``).

librdkafka's ``tests/`` directory is the regression suite of the C client under
confluent-kafka and kcat; its ``test-runner`` runs against any existing cluster named in a
``test.conf``. This script runs it test number by test number, each against a fresh
``txnlog serve --auto-create-topics --default-partitions 4`` on a temporary log directory,
bound to 127.0.0.1 on a free port, with an empty ACL file and its anonymous clients super
users (``--super-users User:ANONYMOUS``: every request allowed, and an authorizer for the ACL
APIs, as the suite's cluster has) (the ``noautocreate`` scenario's numbers against a server
without ``--auto-create-topics``), in full mode (never ``-Q``, quick mode, which skips most
sub-tests), once in the suite's default mode and once with ``-P`` (every producer
idempotent). The server is stopped by its pid after each run. Which numbers apply to one
plaintext broker, and why the others do not, is read from librdkafka's test table
(``librdkafka_catalogue``); local tests (no broker: unit tests, the mock cluster) are left out
unless ``--include-local``.

It needs a *built* librdkafka source tree, tag v2.15.0, outside this repository::

    LIBRDKAFKA_TESTS=/path/to/librdkafka/tests python -m integration.librdkafka_suite \\
        [--tests 0001,0030-0045] [--modes default,idempotent] [--timeout 1800] \\
        [--broker-version 3.9.0] [--out build/librdkafka-suite] [--jobs 1] [--list] \\
        [--subtests NAME] [--timeout-multiplier X] [--include-local]

Without it, it says what it needs and exits 0 ("skipped: ..."). It prints a table (a row
per test number, a column per mode, the first error), writes ``summary.json`` and
``summary.md`` and keeps each run's test-runner output and server log under ``--out``;
it exits 1 if any run failed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from integration import librdkafka_report as report
from integration.librdkafka_catalogue import (
    Excluded,
    Plan,
    parse_version,
    plan,
    read_catalogue,
    select_numbers,
)
from integration.librdkafka_run import MODES, PARTITIONS, SUPER_USER, Context, run_one

EXPECTED_VERSION = "2.15.0"
SUITE_TIMEOUT_MULTIPLIER = 2.0
"""librdkafka runs its suite against a cluster with a multiplier of at least 2: its harness
(``tests/LibrdkafkaTestApp.py``, used by ``broker_version_tests.py`` and
``interactive_broker_version.py``) writes ``test.timeout.multiplier=2`` into the test.conf it
hands the test-runner, and on its CI the test-runner adds 2 to the multiplier itself
(``CI`` set, ``test.c``). This runner scrubs ``CI`` and writes the harness's value."""
NEEDS = f"""skipped: librdkafka's test suite needs LIBRDKAFKA_TESTS=<librdkafka>/tests, the tests
directory of a built librdkafka {EXPECTED_VERSION} source tree (its test-runner). {{problem}}

To build one, outside this repository: take librdkafka's source at tag v{EXPECTED_VERSION}
(github.com/confluentinc/librdkafka); install a C/C++ toolchain and the -dev packages of zlib,
zstd, lz4, OpenSSL and Cyrus SASL, and RapidJSON (tests 0053 and 0110 check statistics with
it); on Debian: build-essential, zlib1g-dev, libzstd-dev, liblz4-dev, libssl-dev,
libsasl2-dev, rapidjson-dev. Run its ./configure (--disable-curl is enough: OIDC does not
apply here), then make libs in the tree's root and make build in its tests/ directory, which
leaves tests/test-runner. No Kafka, Java or trivup is needed."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tests_dir = Path(args.tests_dir or os.environ.get("LIBRDKAFKA_TESTS", "")).expanduser()
    problem = _missing(tests_dir, bool(args.tests_dir or os.environ.get("LIBRDKAFKA_TESTS")))
    if problem:
        print(NEEDS.format(problem=problem))
        return 0
    version = librdkafka_version(tests_dir)
    if version != EXPECTED_VERSION:
        print(f"warning: {tests_dir} is librdkafka {version}, not {EXPECTED_VERSION}")
    variants = read_catalogue(tests_dir)
    try:
        numbers = select_numbers(args.tests, variants)
        the_plan = plan(
            variants,
            numbers,
            parse_version(args.broker_version),
            include_local=args.include_local,
        )
        modes = _modes(args.modes)
    except ValueError as error:
        print(f"librdkafka_suite: {error}", file=sys.stderr)
        return 2
    if args.list:
        _print_plan(the_plan)
        return 0
    context = Context(
        tests_dir.resolve(),
        Path(args.out).resolve(),
        args.broker_version,
        args.timeout,
        args.timeout_multiplier,
        args.include_local,
        args.subtests,
    )
    return _run_suite(context, the_plan, modes, args.jobs, version)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.librdkafka_suite",
        description="Run librdkafka's test suite against fresh txnlog serve processes.",
    )
    parser.add_argument(
        "--tests-dir", help="librdkafka's built tests/ directory (default: $LIBRDKAFKA_TESTS)"
    )
    parser.add_argument("--tests", help="test numbers and ranges, e.g. 0001,0030-0045 (all)")
    parser.add_argument(
        "--modes", default="default,idempotent", help="default and/or idempotent (-P)"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds one test-runner run may take"
    )
    parser.add_argument(
        "--timeout-multiplier",
        type=float,
        default=SUITE_TIMEOUT_MULTIPLIER,
        help="test.timeout.multiplier in test.conf, which scales the test-runner's own "
        f"timeouts (default {SUITE_TIMEOUT_MULTIPLIER:g}, as librdkafka's own harness runs "
        "its suite against a cluster; 1 is the bare test-runner's value)",
    )
    parser.add_argument(
        "--broker-version",
        default="3.9.0",
        help="TEST_KAFKA_VERSION: the Kafka version the tests may assume (default 3.9.0)",
    )
    parser.add_argument(
        "--subtests",
        help="SUBTESTS: run only the sub-tests whose name contains this (to look past a "
        "test's first failing sub-test; a test stops at its first failure)",
    )
    parser.add_argument("--out", default="build/librdkafka-suite", help="results directory")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument(
        "--include-local",
        action="store_true",
        help="also run the local tests (no broker: unit tests, librdkafka's mock cluster)",
    )
    parser.add_argument(
        "--list", action="store_true", help="print what would run and what does not apply"
    )
    return parser


def _missing(tests_dir: Path, given: bool) -> str:
    if not given:
        return "LIBRDKAFKA_TESTS is not set."
    if not (tests_dir / "test.c").is_file():
        return f"{tests_dir} is not librdkafka's tests directory (no test.c)."
    if not os.access(tests_dir / "test-runner", os.X_OK):
        return f"{tests_dir} has no built test-runner."
    return ""


def librdkafka_version(tests_dir: Path) -> str:
    """The version in ``src/rdkafka.h`` (``RD_KAFKA_VERSION 0x020f00ff`` -> ``2.15.0``)."""
    header = tests_dir.parent / "src" / "rdkafka.h"
    match = re.search(r"#define RD_KAFKA_VERSION\s+0x([0-9a-fA-F]{8})", header.read_text())
    if not match:
        return "unknown"
    value = int(match.group(1), 16)
    return f"{value >> 24}.{(value >> 16) & 0xFF}.{(value >> 8) & 0xFF}"


def _modes(text: str) -> list[str]:
    modes = [mode.strip() for mode in text.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown or not modes:
        raise ValueError(f"expected modes among {', '.join(MODES)}, got {text!r}")
    return modes


def excluded_rows(excluded: list[Excluded]) -> list[tuple[str, str]]:
    """(label, the distinct reasons of its variants) for each number that does not apply."""
    rows = []
    for item in excluded:
        reasons = list(dict.fromkeys(reason for _, reason in item.reasons))
        rows.append((item.label, "; ".join(reasons)))
    return rows


def _print_plan(the_plan: Plan) -> None:
    print(f"{len(the_plan.runs)} runs per mode:")
    for run in the_plan.runs:
        print(f"  {run.label:<18} {', '.join(run.variants)}")
    print(f"\n{len(the_plan.excluded)} not applicable:")
    for label, reason in excluded_rows(the_plan.excluded):
        print(f"  {label:<18} {reason}")


def _run_suite(context: Context, the_plan: Plan, modes: list[str], jobs: int, version: str) -> int:
    started = datetime.now(UTC)
    clock = time.monotonic()
    records = _execute(context, the_plan, modes, jobs)
    header: dict[str, object] = {
        "librdkafka": version,
        "tests_dir": str(context.tests_dir),
        "broker_version (TEST_KAFKA_VERSION)": context.broker_version,
        "started": started.isoformat(timespec="seconds"),
        "duration": f"{time.monotonic() - clock:.0f}s",
        "modes": ", ".join(modes),
        "subtests (SUBTESTS)": context.subtests or "all",
        "test.timeout.multiplier": context.timeout_multiplier,
        "server": (
            f"txnlog serve --auto-create-topics --default-partitions {PARTITIONS} "
            f"--acl-file <empty> --super-users {SUPER_USER}"
        ),
    }
    excluded = excluded_rows(the_plan.excluded)
    print()
    print(report.render_table(records, modes))
    for mode in modes:
        print(f"{mode}: {report.counts(records, mode)}")
    took = header["duration"]
    print(f"\n{len(excluded)} test numbers do not apply (see summary.md); took {took}")
    report.write_json(
        context.out_dir / "summary.json", {**header, "not_applicable": dict(excluded)}, records
    )
    report.write_markdown(context.out_dir / "summary.md", header, records, modes, excluded)
    print(f"summary: {context.out_dir / 'summary.md'}, {context.out_dir / 'summary.json'}")
    return 1 if any(record.result in ("fail", "error") for record in records) else 0


def _execute(
    context: Context, the_plan: Plan, modes: list[str], jobs: int
) -> list[report.RunRecord]:
    """Every run of the plan in every mode (mode by mode), ``jobs`` at once, printing each
    result as it comes."""
    (context.out_dir / "logs").mkdir(parents=True, exist_ok=True)
    work = [(run, mode) for mode in modes for run in the_plan.runs]
    records: list[report.RunRecord] = []
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(run_one, run, mode, context) for run, mode in work]
        for index, future in enumerate(futures, 1):
            record = future.result()
            records.append(record)
            note = f": {record.first_error[:160]}" if record.result != "pass" else ""
            print(
                f"[{index}/{len(work)}] {record.label} {record.mode}: {record.result} "
                f"({record.duration_s:.0f}s){note}",
                flush=True,
            )
    return records


if __name__ == "__main__":
    sys.exit(main())
