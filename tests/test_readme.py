"""Every code block of the README runs as written (issue 13, then issue 26: a newcomer's first
hour), so none can rot: ``tests/readme_blocks.py`` says how. This module checks that every
block is run here or in ``integration/test_readme_spark.py`` (the sections with Spark) or is
marked skipped for a reason, and runs the sections without Spark: the Kafka client section
against a ``txnlog serve`` it starts from the README's own line and stops by its pid."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.readme_blocks import (
    MAX_SKIPS,
    ROOT,
    RUN_IN_SPARK,
    RUN_IN_TESTS,
    readme_blocks,
    section_blocks,
    section_run,
)


def test_every_code_block_is_run_or_skipped_for_a_reason() -> None:
    blocks = readme_blocks()
    run = {block.section for block in blocks if block.is_code and block.mark != "skip"}
    assert run == set(RUN_IN_TESTS) | set(RUN_IN_SPARK), "a section no README test runs"
    skipped = [block for block in blocks if block.mark == "skip"]
    assert len(skipped) <= MAX_SKIPS, [f"README.md:{block.line}" for block in skipped]
    for block in skipped:
        assert block.is_code and len(block.reason) >= 40, f"README.md:{block.line}: why?"
    for block in blocks:
        if block.mark == "background":
            assert block.language == "bash" and "--port" in block.text


@pytest.mark.parametrize("section", RUN_IN_TESTS)
def test_a_section_without_spark_prints_what_the_readme_shows(section: str, tmp_path: Path) -> None:
    blocks = section_blocks(section)
    with section_run(tmp_path) as run:
        run.run_section(blocks)
        copiers = [b for b in blocks if b.language == "python" and "copier-1" in b.text]
        for copier in copiers:  # the Kafka client section's
            assert run.run(copier) == "copied 0 record(s)\n", "the README says a re-run copies none"


def test_the_install_line_installs_this_project(tmp_path: Path) -> None:
    """The README's install line installs this project so that Spark finds the format from
    any directory: Spark looks for top-level ``pyspark_*`` modules with ``pkgutil`` on the
    workers' path, so the wheel must carry ``pyspark_txnlog.py`` at its top level."""
    (install,) = [
        block for block in section_blocks("Use the log from Python") if "pip" in block.text
    ]
    assert "pip install '.[spark]'" in install.text
    assert "editable_mode=compat" not in (ROOT / "README.md").read_text()
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
    assert "deprecated" not in built.stderr.lower(), built.stderr  # license, editable mode
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pyspark_txnlog.py" in names, "Spark's data source scan would not find the format"
    assert "txn_log/__init__.py" in names and "txn_sink/writer.py" in names
