"""One run of librdkafka's test-runner against a fresh ``txnlog serve``: a test number in one
scenario and mode.

The server gets a temporary log directory, 127.0.0.1 and a free port (``--port 0``, read from
its banner), ``--default-partitions 4`` and, outside the ``noautocreate`` scenario,
``--auto-create-topics`` (the suite's scenarios, ``tests/scenarios/*.json``). It also gets an
authorizer whose only principal is a super user, as the suite's Kafka cluster has (its
clients are super users there): an empty ACL file in the work directory (``--acl-file``) and
``--super-users User:ANONYMOUS``, the principal of every client of a server without SASL. So
every request is allowed as before, and the ACL sub-tests of 0081 find an authorizer for
CreateAcls, DescribeAcls and DeleteAcls. The test-runner
gets a ``test.conf`` with that bootstrap address, ``TESTS=<number>`` and ``-p1 -K [-L] [-P]
-s <scenario>``, never ``-Q``: full mode. It runs in its own process group, killed at the
per-run timeout; the server is stopped by its pid afterwards, and the log directory removed.
Each run keeps the test-runner's output and the server's stderr under ``<out>/logs``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from demo.served import start_serve
from integration import librdkafka_report as report
from integration.librdkafka_catalogue import Run

MODES: dict[str, list[str]] = {"default": [], "idempotent": ["-P"]}
PARTITIONS = "4"  # the suite's scenarios: num_partitions 4 (tests/scenarios/*.json)
SUPER_USER = "User:ANONYMOUS"  # every client of a server without SASL
# what the test-runner would otherwise pick up from the caller's environment
_SCRUBBED = (
    "KAFKA_PATH", "BROKERS", "ZK_ADDRESS", "TESTS", "SUBTESTS", "TESTS_SKIP",
    "TESTS_SKIP_BEFORE", "TEST_SCENARIO", "TEST_KAFKA_VERSION", "KAFKA_VERSION",
    "RDKAFKA_TEST_CONF", "TEST_REPORT", "CI",
)  # fmt: skip


@dataclass(frozen=True)
class Context:
    tests_dir: Path
    out_dir: Path
    broker_version: str
    timeout_s: float
    timeout_multiplier: float | None
    include_local: bool
    subtests: str | None = None


def run_one(run: Run, mode: str, context: Context) -> report.RunRecord:
    """One test number in one scenario and mode, against a fresh server."""
    stem = f"{run.number}-{run.scenario}-{mode}"
    runner_log = context.out_dir / "logs" / f"{stem}.runner.log"
    server_log = context.out_dir / "logs" / f"{stem}.server.log"
    record = report.RunRecord(
        run.label,
        run.number,
        run.scenario,
        mode,
        "error",
        "",
        0.0,
        runner_log=str(runner_log),
        server_log=str(server_log),
    )
    workdir = Path(tempfile.mkdtemp(prefix=f"librdkafka-{stem}-"))
    clock = time.monotonic()
    try:
        with server_log.open("w") as server_err:
            try:
                flags = _serve_flags(run, workdir)
                server = start_serve(workdir / "log", *flags, stderr=server_err)
            except RuntimeError as error:
                record.first_error = f"txnlog serve did not start: {error}"
                return record
            try:
                conf = _write_test_conf(workdir, server.bootstrap, context)
                output, returncode = _run_test_runner(run, mode, conf, context, runner_log)
                if server.process.poll() is not None:
                    record.server_note = f"server exited ({server.process.returncode}) mid-test"
            finally:
                record.server_cpu_s = _cpu_seconds(server.process.pid)
                stopped = server.stop()
        if stopped not in (0, None) and not record.server_note:
            record.server_note = f"server stop: exit status {stopped}"
        _fill(record, report.judge(output, returncode, run.variants), output)
    finally:
        record.duration_s = round(time.monotonic() - clock, 1)
        shutil.rmtree(workdir, ignore_errors=True)
    return record


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a running process (Linux ``/proc``), -1 unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return -1.0
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1)


def _serve_flags(run: Run, workdir: Path) -> list[str]:
    """The server's options; writes its (empty) ACL file into ``workdir``."""
    acl_file = workdir / "acls.txt"
    acl_file.write_text("# rules CreateAcls adds; the client, User:ANONYMOUS, is a super user\n")
    flags = ["--host", "127.0.0.1", "--default-partitions", PARTITIONS]
    flags += ["--acl-file", str(acl_file), "--super-users", SUPER_USER]
    if run.scenario != "noautocreate":
        flags.append("--auto-create-topics")
    return flags


def _write_test_conf(workdir: Path, bootstrap: str, context: Context) -> Path:
    lines = [f"bootstrap.servers={bootstrap}"]
    if context.timeout_multiplier is not None:
        lines.append(f"test.timeout.multiplier={context.timeout_multiplier}")
    conf = workdir / "test.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _run_test_runner(
    run: Run, mode: str, conf: Path, context: Context, log: Path
) -> tuple[str, int | None]:
    """Run the test-runner (its own process group, killed at the timeout); returns its
    output and exit status (None: killed at the timeout)."""
    env = {key: value for key, value in os.environ.items() if key not in _SCRUBBED}
    libs = f"{context.tests_dir.parent / 'src'}:{context.tests_dir.parent / 'src-cpp'}"
    env.update(
        RDKAFKA_TEST_CONF=str(conf),
        TESTS=run.number,  # not an argument: the test-runner frees argv's copy at exit
        TEST_KAFKA_VERSION=context.broker_version,
        LD_LIBRARY_PATH=":".join(filter(None, [libs, env.get("LD_LIBRARY_PATH")])),
    )
    if context.subtests:
        env["SUBTESTS"] = context.subtests
    command = ["./test-runner", "-p1", "-K", *MODES[mode], "-s", run.scenario]
    if not context.include_local:
        command.insert(2, "-L")
    # a failed run ends in abort(): line-buffered, its summary table is not lost with it
    line_buffered = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
    with log.open("w") as out:
        out.write(f"# {' '.join(command)}  (TESTS={run.number}, {conf.read_text().strip()})\n")
        out.flush()
        process = subprocess.Popen(
            [*line_buffered, *command],
            cwd=context.tests_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        returncode: int | None
        try:
            returncode = process.wait(timeout=context.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            returncode = None
    return log.read_text(errors="replace"), returncode


def _fill(record: report.RunRecord, outcome: report.Outcome, output: str) -> None:
    record.result = outcome.result
    record.first_error = outcome.first_error
    if record.server_note and outcome.result != "pass":
        record.first_error = f"[{record.server_note}] {record.first_error}"
    record.variants = outcome.variants
    record.subtests_passed = outcome.subtests_passed
    record.subtests_skipped = outcome.subtests_skipped
    record.tail = report.tail(output)
