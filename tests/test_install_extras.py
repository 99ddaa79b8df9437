"""What each install gives (issue 26 item 2): the engine alone (``pip install .``: the Python
API, the CLI and ``txnlog serve``) needs neither pyspark nor confluent-kafka; the ``spark`` and
``kafka`` extras add them, and a missing one is named in one line where it is first needed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WITHOUT_EXTRAS = """
import importlib.abc, sys
class Missing(importlib.abc.MetaPathFinder):
    # as if pyspark and confluent_kafka were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"pyspark", "confluent_kafka"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Missing())
import importlib.util
_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: (
    None if name.split(".")[0] in {"pyspark", "confluent_kafka"} else _find_spec(name, *a))
"""


def run_without_extras(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS + textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_the_engine_the_cli_and_the_server_need_no_extra(tmp_path: Path) -> None:
    result = run_without_extras(
        """
        import contextlib, io
        from txn_log import Log
        from txn_log.cli import main
        import txn_wire.server  # what `txnlog serve` runs
        log = Log.open("data/log"); log.create_topic("t", partitions=1)
        producer = log.producer(); producer.send("t", b"v"); producer.flush()
        records = log.consumer("read_committed").read(log.partitions("t")[0], 0)
        assert [r.value for r in records] == [b"v"]
        log.close()
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main(["topics", "list", "data/log"]) == 0
        assert "t" in out.getvalue().split(), out.getvalue()
        assert "pyspark" not in sys.modules and "confluent_kafka" not in sys.modules
        print("ok")
        """,
        tmp_path,
    )
    assert result.returncode == 0 and result.stdout.endswith("ok\n"), result.stderr


def test_a_missing_extra_is_named_in_one_line(tmp_path: Path) -> None:
    result = run_without_extras(
        """
        try:
            import pyspark_txnlog
        except ModuleNotFoundError as error:
            print(error)
        from datasource_options.location import parse_location
        from txn_log.errors import ConfigError
        try:
            parse_location({"kafka.bootstrap.servers": "broker:9092"}, usage="")
        except ConfigError as error:
            print(error)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    spark, kafka = result.stdout.splitlines()
    assert "needs pyspark" in spark and "pip install '.[spark]'" in spark
    assert "needs confluent-kafka" in kafka and "pip install '.[kafka]'" in kafka


def test_the_package_metadata() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"  # kio's own floor
    assert project["license"] == "Apache-2.0"  # an SPDX string, not the deprecated table
    names = {dep.split(">")[0].split("<")[0].split("=")[0] for dep in project["dependencies"]}
    assert "pyspark" not in names and "confluent-kafka" not in names
    (kio,) = [dep for dep in project["dependencies"] if dep.startswith("kio")]
    assert "<0.7" in kio  # pre-1.0, its internals used: below the next minor
    extras = project["optional-dependencies"]
    assert extras["spark"] == ["pyspark>=4.2"] and extras["kafka"] == ["confluent-kafka>=2.3"]


def test_spark_finds_the_format_from_any_directory(tmp_path: Path) -> None:
    """Spark's lookup of ``pyspark_*`` modules is ``pkgutil.iter_modules()`` over
    ``sys.path``: the development install (``make setup``: ``pip install -e``, no deprecated
    compat mode) must put the module there, not behind an import hook."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pkgutil; print(sorted(m.name for m in "
            "pkgutil.iter_modules() if m.name.startswith('pyspark_')))",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "pyspark_txnlog" in found.stdout, found.stdout + found.stderr
