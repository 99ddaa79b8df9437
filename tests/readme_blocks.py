"""The README's code blocks, and a runner that executes them as a reader would (issue 26).

Every ```bash and ```python block of the README runs, verbatim, in a fresh directory per
section (``##`` heading), in the README's order: shell blocks through ``bash -e -o pipefail``,
Python blocks through this interpreter, Spark ones (they use ``spark``) in the test run's
SparkSession, sharing their names within a section as in one ``pyspark`` shell. A ```text
block right after a code block is what that block prints (stdout and stderr, as on a
terminal) and is compared. ``txnlog`` is this interpreter's ``python -m txn_log.cli``.

An HTML comment on the line before a block changes how it runs:

    <!-- readme-test: background: why -->   started and left running (a server), stopped by
                                            its pid when the section ends
    <!-- readme-test: skip why -->          not run; the README test keeps these few and
                                            justified (``MAX_SKIPS``, a reason each)
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CODE_LANGUAGES = ("bash", "python")
RUN_IN_TESTS = (
    "Inspecting a log",
    "Operating a log (Kafka's admin tools)",
    "Compacted topics and the cleaner",
    "Use it from any Kafka client",
)
"""Sections run by ``tests/test_readme.py`` (no Spark)."""
RUN_IN_SPARK = (
    "What txnlog is",
    "Use the log from Python",
    'Source options (`spark.readStream` / `spark.read` `.format("txnlog")`)',
)
"""Sections run by ``integration/test_readme_spark.py``, in the test run's SparkSession."""
MAX_SKIPS = 6
MARK = re.compile(r"^<!-- readme-test: (skip|background)\b[: ]*(.*?) -->$")
FENCE = re.compile(r"^```(\w*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its section, first line (1-based), language, text and mark."""

    section: str
    line: int
    language: str
    text: str
    mark: str | None = None
    reason: str = ""

    @property
    def is_code(self) -> bool:
        return self.language in CODE_LANGUAGES

    @property
    def uses_spark(self) -> bool:
        return self.language == "python" and "spark." in self.text


def readme_blocks() -> list[Block]:
    blocks: list[Block] = []
    lines = README.read_text().splitlines()
    section, index = "", 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = line[3:]
        fence = FENCE.match(line)
        if fence is None:
            index += 1
            continue
        end = lines.index("```", index + 1)
        mark = MARK.match(lines[index - 1]) if index else None
        blocks.append(
            Block(
                section,
                index + 1,
                fence.group(1),
                "".join(f"{text}\n" for text in lines[index + 1 : end]),
                mark.group(1) if mark else None,
                mark.group(2) if mark else "",
            )
        )
        index = end + 1
    return blocks


def section_blocks(section: str) -> list[Block]:
    found = [block for block in readme_blocks() if block.section == section]
    assert found, f"no README section {section!r}"
    return found


def expected_output(blocks: list[Block], index: int) -> str | None:
    """The ```text block right after code block ``index``, if any."""
    after = blocks[index + 1] if index + 1 < len(blocks) else None
    return after.text if after is not None and after.language == "text" else None


class SectionRun:
    """A fresh directory, ``txnlog`` on PATH, and the background processes started there."""

    def __init__(self, tmp_path: Path, spark: Any = None) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        txnlog = bin_dir / "txnlog"
        txnlog.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m txn_log.cli "$@"\n')
        txnlog.chmod(0o755)
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.spark = spark
        self.spark_globals: dict[str, Any] = {"spark": spark}  # one pyspark shell a section
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",  # output in the order it is written, as on a terminal
        }
        self.background: list[subprocess.Popen[bytes]] = []

    def run_section(self, blocks: list[Block]) -> None:
        """Run every block of a section in order, comparing printed output."""
        for index, block in enumerate(blocks):
            if not block.is_code or block.mark == "skip":
                continue
            if block.mark == "background":
                self.start_background(block)
                continue
            printed = self.run(block)
            expected = expected_output(blocks, index)
            if expected is not None:
                assert printed == expected, f"README.md:{block.line} printed:\n{printed}"

    def run(self, block: Block) -> str:
        if block.uses_spark:
            return self.run_spark(block)
        command = (
            [sys.executable, "-c", block.text]
            if block.language == "python"
            else ["bash", "-e", "-o", "pipefail", "-c", block.text]
        )
        result = subprocess.run(
            command,
            cwd=self.work,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # as on a terminal: the summaries between the data
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, f"README.md:{block.line} failed:\n{result.stdout}"
        return result.stdout

    def run_spark(self, block: Block) -> str:
        assert self.spark is not None, f"README.md:{block.line} needs Spark: run it in integration/"
        printed = io.StringIO()
        with working_directory(self.work), contextlib.redirect_stdout(printed):
            exec(compile(block.text, f"README.md:{block.line}", "exec"), self.spark_globals)
        return printed.getvalue()

    def start_background(self, block: Block) -> None:
        port = re.search(r"--port (\d+)", block.text)
        assert port is not None, f"README.md:{block.line}: a background block names its --port"
        address = ("127.0.0.1", int(port.group(1)))
        with socket.socket() as probe:
            if probe.connect_ex(address) == 0:
                raise AssertionError(f"port {address[1]} is taken: README.md:{block.line} needs it")
        process = subprocess.Popen(
            ["bash", "-c", block.text],
            cwd=self.work,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, stopped by its pid below
        )
        self.background.append(process)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, f"README.md:{block.line} exited {process.returncode}"
            with socket.socket() as probe:
                if probe.connect_ex(address) == 0:
                    return
            time.sleep(0.1)
        raise AssertionError(f"README.md:{block.line} did not listen on {address} within 60 s")

    def close(self) -> None:
        for process in self.background:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


@contextlib.contextmanager
def section_run(tmp_path: Path, spark: Any = None) -> Iterator[SectionRun]:
    run = SectionRun(tmp_path, spark)
    try:
        yield run
    finally:
        run.close()
