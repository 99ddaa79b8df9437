"""The README's "Use the log from Python" section runs as written (issue 13: a newcomer's first
hour), so it cannot rot.

The section's Python block and its shell block run in one empty directory, in the README's
order, as a reader following along would; each must print exactly the text block that follows
it. ``txnlog`` is this interpreter's ``python -m txn_log.cli`` (the console script's entry
point). The Spark query at the end needs a JVM: it is only compiled here, and checked to read
the log and topic the shell block created.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Use the log from Python"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def section_blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of the section, in order."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index(f"\n{SECTION}\n")
    end = readme.find("\n## ", start + 1)
    body = readme[start : end if end != -1 else len(readme)]
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(body)]


def block_after(blocks: list[tuple[str, str]], language: str, marker: str) -> tuple[str, str]:
    """The first ``language`` block containing ``marker``, and the text block after it."""
    for index, (lang, text) in enumerate(blocks):
        if lang == language and marker in text:
            following = blocks[index + 1] if index + 1 < len(blocks) else ("", "")
            assert following[0] == "text", f"no ```text block of output after the {marker} block"
            return text, following[1]
    raise AssertionError(f"no ```{language} block containing {marker!r} in {SECTION!r}")


def run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # as on a terminal: the summaries between the data
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout
    return result.stdout


def test_the_python_and_shell_examples_print_what_the_readme_shows(tmp_path: Path) -> None:
    blocks = section_blocks()
    python, python_prints = block_after(blocks, "python", "from txn_log import")
    shell, shell_prints = block_after(blocks, "bash", "txnlog init")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    txnlog = bin_dir / "txnlog"
    txnlog.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m txn_log.cli "$@"\n')
    txnlog.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",  # output in the order it is written, as on a terminal
    }

    assert run([sys.executable, "-c", python], work, env) == python_prints
    assert run(["bash", "-e", "-o", "pipefail", "-c", shell], work, env) == shell_prints


def test_the_spark_query_reads_what_the_shell_example_wrote() -> None:
    blocks = section_blocks()
    spark = [text for lang, text in blocks if lang == "python" and "spark.read" in text]
    assert len(spark) == 1, "one Spark query in the section"
    compile(spark[0], "README.md", "exec")
    assert '.option("subscribe", "orders")' in spark[0] and '.load("data/log")' in spark[0]
    shell = next(text for lang, text in blocks if lang == "bash" and "txnlog init" in text)
    assert "txnlog topics create data/log orders" in shell


def test_the_install_line_installs_this_project(tmp_path: Path) -> None:
    """The README's install line installs this project so that Spark finds the format from
    any directory: Spark looks for top-level ``pyspark_*`` modules with ``pkgutil`` on the
    workers' path, so the wheel must carry ``pyspark_txnlog.py`` at its top level (a plain
    editable install does not put it there, which the README says)."""
    install = [text for lang, text in section_blocks() if lang == "bash" and "pip" in text]
    assert len(install) == 1 and "pip install ." in install[0]
    assert "editable_mode=compat" in (ROOT / "README.md").read_text()
    source = tmp_path / "source"  # setuptools writes build/ beside the sources: not here
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
        ),
    )
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pyspark_txnlog.py" in names, "Spark's data source scan would not find the format"
    assert "txn_log/__init__.py" in names and "txn_sink/writer.py" in names
