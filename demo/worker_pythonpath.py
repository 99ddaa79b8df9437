"""Set-up step (``make setup``): Spark's Python workers import the installed pyspark, with its
bytecode, instead of compiling ``pyspark.zip`` from source in every worker daemon.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' ``PYTHONPATH``
(``PythonUtils.sparkPythonPath``), whether or not the workers' interpreter has pyspark
installed. That zip holds only sources, so each worker daemon Spark starts (one per worker
module: the tasks', and the data source's ``create_data_source``, ``plan_data_source_read``,
``write_into_data_source``, the streaming source and sink runners) compiles pyspark anew,
and each new worker re-reads the zip's directory of 1,485 entries (``importlib.
invalidate_caches`` in ``setup_spark_files``). Measured with py-spy on a fresh driver's first
query (another job on the second core): about 8 s of CPU in ``zipimport`` compiling, and the
query took 27 s with the zip and 19.5 s without.

With pip-installed pyspark (this project's venv) ``$SPARK_HOME`` is the installed package
itself and the workers run this interpreter (``PYSPARK_PYTHON``), which has the very same
pyspark installed with its bytecode. So the zip is moved aside (kept, renamed): Python skips a
``sys.path`` entry that does not exist, and the workers import the installed pyspark. Run again
after pyspark is reinstalled; running it twice is harmless.

    python -m demo.worker_pythonpath
"""

from __future__ import annotations

import os
from pathlib import Path

ASIDE_SUFFIX = ".not-on-worker-path"


def worker_zip() -> Path:
    """The ``pyspark.zip`` Spark puts on its workers' path for this interpreter's pyspark."""
    import pyspark

    return Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"


def move_aside(zip_path: Path) -> Path | None:
    """Rename ``zip_path`` to ``<name>.not-on-worker-path``; None when it is not there."""
    if not zip_path.exists():
        return None
    aside = zip_path.with_name(zip_path.name + ASIDE_SUFFIX)
    os.replace(zip_path, aside)
    return aside


def main() -> int:
    zip_path = worker_zip()
    aside = move_aside(zip_path)
    done = f"{zip_path} is not there" if aside is None else f"moved {zip_path.name} to {aside}"
    print(f"{done}: Spark's Python workers import the installed pyspark")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
