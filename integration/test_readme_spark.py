"""The README's sections with Spark blocks run as written, in the test run's SparkSession
(``tests/readme_blocks.py``): each in a fresh directory, its shell and Python blocks in order,
printed output compared where the README shows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.readme_blocks import RUN_IN_SPARK, section_blocks, section_run

pytestmark = pytest.mark.spark
SESSION_SETTINGS = ("spark.sql.pyspark.worker.logging.enabled",)


@pytest.mark.parametrize("section", RUN_IN_SPARK)
def test_a_section_with_spark_prints_what_the_readme_shows(
    section: str, spark: Any, tmp_path: Path
) -> None:
    try:
        with section_run(tmp_path, spark) as run:
            run.run_section(section_blocks(section))
    finally:
        for key in SESSION_SETTINGS:  # the README's settings end with its section
            spark.conf.unset(key)
