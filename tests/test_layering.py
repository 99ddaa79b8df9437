"""DESIGN §1: imports only point down the package table; the engine never imports pyspark or
confluent_kafka, so the CLI, unit tests and benchmarks run without a JVM."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = {
    "txn_log",
    "offsets",
    "commit_protocol",
    "datasource_options",
    "txn_source",
    "txn_sink",
    "pyspark_txnlog",
}
ALLOWED = {
    "txn_log": {"txn_log", "crc32c", "pyarrow", "numpy"},
    "offsets": {"offsets", "txn_log"},
    "commit_protocol": {"commit_protocol", "txn_log", "offsets", "confluent_kafka"},
    # what the source and the sink share about their options, below both (issue 13 item 5)
    "datasource_options": {"datasource_options", "txn_log"},
    "txn_source": {
        "txn_source",
        "txn_log",
        "offsets",
        "commit_protocol",
        "datasource_options",
        "pyspark",
        "pyarrow",
        "numpy",
    },
    "txn_sink": {
        "txn_sink",
        "txn_log",
        "offsets",
        "commit_protocol",
        "datasource_options",
        "pyspark",
        "pyarrow",
        "numpy",
    },
    "pyspark_txnlog": {"txn_source", "txn_sink", "pyspark"},
}
THIRD_PARTY = {"crc32c", "pyarrow", "numpy", "pyspark", "confluent_kafka"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots & (PROJECT | THIRD_PARTY)


def package_files(package: str) -> list[Path]:
    if package == "pyspark_txnlog":
        return [ROOT / "pyspark_txnlog.py"]
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down_the_table(package: str) -> None:
    files = package_files(package)
    assert files, f"package {package} has no modules"
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) - ALLOWED[package])
        for path in files
        if imported_roots(path) - ALLOWED[package]
    }
    assert offenders == {}


def test_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import pyspark.sql\nfrom txn_sink import writer\n")
    assert imported_roots(bad) == {"pyspark", "txn_sink"}


def test_importing_the_engine_loads_no_spark_no_arrow_and_no_client() -> None:
    """``import txn_log`` (for its exports, issue 13) stays cheap: pyarrow, numpy and pyspark
    load only where Arrow data is built, and ``Log`` and the clients only when first used."""
    code = (
        "import sys, txn_log; from txn_log import TopicPartition, TxnLogError, ConfigError; "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'pyarrow', 'numpy', 'pyspark', 'py4j'} or m in "
        "{'txn_log.log', 'txn_log.producer', 'txn_log.consumer'})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []
