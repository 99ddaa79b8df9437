"""The set-up step that takes ``pyspark.zip`` off Spark's Python worker path
(demo/worker_pythonpath.py); that workers then import the installed pyspark is checked with a
real Spark session in integration/test_spark_workers.py."""

from __future__ import annotations

from pathlib import Path

from demo.worker_pythonpath import ASIDE_SUFFIX, move_aside


def test_the_zip_is_renamed_not_deleted_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    zip_path = tmp_path / "python" / "lib" / "pyspark.zip"
    zip_path.parent.mkdir(parents=True)
    zip_path.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip
    aside = move_aside(zip_path)
    assert aside == zip_path.with_name("pyspark.zip" + ASIDE_SUFFIX)
    assert not zip_path.exists() and aside.read_bytes() == b"PK\x05\x06" + bytes(18)
    assert move_aside(zip_path) is None  # already aside: nothing to do, nothing lost
    assert aside.exists()
