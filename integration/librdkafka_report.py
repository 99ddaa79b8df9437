"""What one librdkafka test-runner invocation showed, and the suite's summary (table, JSON,
markdown).

The test-runner prints, at its end, one summary row per variant it considered::

    | 0030_offset_commit                       |     FAILED |  12.345s | <failstr>

where ``failstr`` is the first failure of that variant (``subtest: function():line: message``)
or a skip's reason; every failure is also printed as ``### Test "<name> (<subtest>)" failed at
<file>:<line>:<function>() at <time>: ###`` and the message on the next line. A test that
times out or crashes may print no summary, so the failure blocks are read too.

Results: ``pass``; ``fail``; ``skip`` (the test-runner skipped every variant itself, reason
given); ``partial`` (its first failure is a step that runs Kafka's Java tools, which need
``KAFKA_PATH``: every earlier step passed, the rest did not run); ``error`` (the server did
not start).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\x1b\([A-Z]")
_SUMMARY_ROW = re.compile(
    r"^\|\s*(?P<name>\S+)\s*\|\s*(?P<state>PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|"
    r"\s*[\d.]+s\s*\|\s*(?P<why>.*)$"
)
_FAILED_AT = re.compile(r'^### Test "(?P<test>[^"]*)" failed at (?P<where>\S+) at .*###\s*$')
_SUB_PASS = re.compile(r"\[ (?P<name>.+?): PASS \(")
_SUB_SKIP = re.compile(r"\[ (?P<name>.+?): SKIP: ")
_JAVA_TOOLS = "KAFKA_PATH"
TAIL_LINES = 40
RESULTS = ("pass", "fail", "partial", "skip", "error")


@dataclass(frozen=True)
class Outcome:
    """One run's verdict. ``first_error``: the first failure of each failed variant (or the
    skip reason), one line."""

    result: str
    first_error: str
    variants: dict[str, str]
    subtests_passed: int
    subtests_skipped: int


@dataclass
class RunRecord:
    """One (test number, scenario, mode) run, as the summary keeps it."""

    label: str
    number: str
    scenario: str
    mode: str
    result: str
    first_error: str
    duration_s: float
    server_cpu_s: float = -1.0
    """CPU seconds (user + system) the run's server spent, -1 unknown: how much of the run's
    time was the server's work."""
    variants: dict[str, str] = field(default_factory=dict)
    subtests_passed: int = 0
    subtests_skipped: int = 0
    server_note: str = ""
    runner_log: str = ""
    server_log: str = ""
    tail: list[str] = field(default_factory=list)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def judge(output: str, returncode: int | None, variants: tuple[str, ...]) -> Outcome:
    """The verdict on one test-runner run of ``variants`` (``returncode`` None: it was killed
    at the per-test timeout)."""
    lines = strip_ansi(output).splitlines()
    summary = _summary(lines)
    states = {name: summary[name][0] for name in variants if name in summary}
    failures = _failures(lines)
    passed = sum(1 for line in lines if _SUB_PASS.search(line))
    skipped = sum(1 for line in lines if _SUB_SKIP.search(line))

    def outcome(result: str, first_error: str) -> Outcome:
        return Outcome(result, first_error, states, passed, skipped)

    failed = [name for name, state in states.items() if state in ("FAILED", "RUNNING")]
    if returncode is None or failed or returncode != 0:
        # each failed variant's first failure (a failed variant does not stop the next)
        first = "; ".join(f"{name}: {why}" for name in failed if (why := summary[name][1]))
        first = first or (failures[0][1] if failures else "")
        if returncode is None:
            before = f"; first failure: {first}" if first else ""
            first = f"killed at the per-test timeout{before}"
        elif not first:
            first = f"test-runner exited with status {returncode}"
        return outcome("partial" if _stopped_at_java_tools(lines) else "fail", first)
    if any(state == "PASSED" for state in states.values()):
        return outcome("pass", "")
    if states:
        reasons = sorted({summary[name][1] for name in states if summary[name][1]})
        return outcome("skip", "; ".join(reasons) or "skipped by the test-runner")
    return outcome("skip", "the test-runner ran none of these variants (not in this build?)")


def _summary(lines: list[str]) -> dict[str, tuple[str, str]]:
    rows: dict[str, tuple[str, str]] = {}
    for line in lines:
        match = _SUMMARY_ROW.match(line.strip())
        if match:
            rows[match["name"]] = (match["state"], match["why"].strip())
    return rows


def _failures(lines: list[str]) -> list[tuple[str, str]]:
    """(test and subtest, message) of every ``### Test ... failed at`` block, in order."""
    found = []
    for index, line in enumerate(lines):
        match = _FAILED_AT.match(line.strip())
        if match:
            message = lines[index + 1].strip() if index + 1 < len(lines) else ""
            found.append((match["test"], f"{match['test']}: {message}"))
    return found


def _stopped_at_java_tools(lines: list[str]) -> bool:
    """True if the first failure names Kafka's missing tools, or came after a warning that
    they are missing."""
    for index, line in enumerate(lines):
        if _FAILED_AT.match(line.strip()):
            return index + 1 < len(lines) and _JAVA_TOOLS in lines[index + 1]
        if _JAVA_TOOLS in line:
            return True
    return False


def tail(output: str, count: int = TAIL_LINES) -> list[str]:
    return strip_ansi(output).splitlines()[-count:]


def render_table(records: list[RunRecord], modes: list[str]) -> str:
    """One row per test number (and scenario): its result in each mode, the first error."""
    rows = _by_label(records)
    header = ["test", *modes, "first error (first failing mode)"]
    body = []
    for label, by_mode in rows.items():
        results = [_cell(by_mode.get(mode)) for mode in modes]
        error = next(
            (r.first_error for m in modes if (r := by_mode.get(m)) and r.result != "pass"), ""
        )
        body.append([label, *results, _shorten(error, 150)])
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header) - 1)]
    lines = [_row(header, widths), _row(["-" * w for w in widths] + ["-" * 20], widths)]
    lines += [_row(row, widths) for row in body]
    return "\n".join(lines)


def _by_label(records: list[RunRecord]) -> dict[str, dict[str, RunRecord]]:
    rows: dict[str, dict[str, RunRecord]] = {}
    for record in records:
        rows.setdefault(record.label, {})[record.mode] = record
    return rows


def _cell(record: RunRecord | None) -> str:
    if record is None:
        return "-"
    cpu = f", server {record.server_cpu_s:.0f}s cpu" if record.server_cpu_s >= 0 else ""
    return f"{record.result} ({record.duration_s:.0f}s{cpu})"


def _row(cells: list[str], widths: list[int]) -> str:
    padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
    return " | ".join([*padded, *cells[len(widths) :]]).rstrip()


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def counts(records: list[RunRecord], mode: str) -> dict[str, int]:
    tally = dict.fromkeys(RESULTS, 0)
    for record in records:
        if record.mode == mode:
            tally[record.result] += 1
    return tally


def write_json(path: Path, header: dict[str, object], records: list[RunRecord]) -> None:
    document = {**header, "runs": [asdict(record) for record in records]}
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def write_markdown(
    path: Path,
    header: dict[str, object],
    records: list[RunRecord],
    modes: list[str],
    excluded: list[tuple[str, str]],
) -> None:
    """The results table (one row per test number, a column per mode) and the numbers that
    do not apply, with why."""
    lines = ["# librdkafka's test suite against `txnlog serve`", ""]
    lines += [f"- {key}: {value}" for key, value in header.items() if not isinstance(value, dict)]
    for mode in modes:
        tally = ", ".join(f"{n} {result}" for result, n in counts(records, mode).items() if n)
        lines.append(f"- {mode} mode: {tally}")
    lines += ["", "| test | " + " | ".join(modes) + " | first error |"]
    lines.append("|---|" + "---|" * len(modes) + "---|")
    for label, by_mode in _by_label(records).items():
        cells = [_cell(by_mode.get(mode)) for mode in modes]
        error = next(
            (r.first_error for m in modes if (r := by_mode.get(m)) and r.result != "pass"), ""
        )
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {_md(_shorten(error, 300))} |")
    lines += ["", "## Not applicable to one `txnlog serve`", "", "| test | why |", "|---|---|"]
    lines += [f"| {label} | {_md(reason)} |" for label, reason in excluded]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _md(text: str) -> str:
    return text.replace("|", "\\|")
