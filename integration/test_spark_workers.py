"""Spark's Python workers, as ``make setup`` leaves them (demo/worker_pythonpath.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyspark
import pytest

pytestmark = [pytest.mark.spark]


def _pyspark_file(_: int) -> str:
    import pyspark as worker_pyspark

    return str(worker_pyspark.__file__)


def test_python_workers_import_the_installed_pyspark_not_its_source_zip(spark: Any) -> None:
    """Spark puts pyspark.zip first on its workers' path; each worker daemon would compile it
    from source (seconds per fresh driver). After ``make setup`` a worker imports the pyspark
    installed in this interpreter, with its bytecode."""
    [worker_file] = spark.sparkContext.parallelize([0], 1).map(_pyspark_file).collect()
    assert Path(worker_file).parent == Path(pyspark.__file__).parent, (
        f"Spark's Python workers import pyspark from {worker_file}: run "
        "`python -m demo.worker_pythonpath` (part of make setup) to take pyspark.zip off "
        "their path"
    )
