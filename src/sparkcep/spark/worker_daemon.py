"""The Python worker daemon sparkcep's sessions start (``spark.python.daemon.module``): PySpark's own daemon, warm.

Spark starts a daemon per worker module and the daemon forks a process for each worker. Spark 4.3 starts only
the data workers (``pyspark.worker``) from this module: the planners of a Python data source
(``pyspark.sql.worker.create_data_source``, ``plan_data_source_read``, ...) come from ``pyspark.daemon`` itself,
whatever ``spark.python.daemon.module`` says (py-spy over a 1M-order run, 2026-11-28), so they import what they
need anew; sparkcep's package imports lazily for them (``sparkcep/__init__.py``).

Left as it is, every forked data worker imports pyspark, pandas, pyarrow and sparkcep itself, and imports
pyspark from ``$SPARK_HOME/python/lib/pyspark.zip``, which Spark puts first on the workers' ``PYTHONPATH``:
Python cannot cache compiled code for a zip, so each worker compiles pyspark's SQL modules from source. Measured
on the 1M-order backfill (bench/README.md, "Where the time goes"): about 2 s of CPU per worker process, 36 % of
all Python CPU of the run, and most of the first micro-batch's extra seconds.

This daemon imports all of that once, from the installed (compiled) package when the zip is a copy of it, then
runs PySpark's daemon unchanged: its forks start with everything imported. ``gc.freeze`` keeps the imported
objects out of the collector's sight, so the forks do not copy the pages it would otherwise touch.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

# What a worker of each kind imports before its first task (the data workers run sparkcep's processor and
# sources). Another kind (none in Spark 4.3, see the module docs) gets the data sources' modules and its own.
_PRELOAD = {
    "pyspark.worker": (
        "pyspark.worker",
        "pandas",
        "pyarrow",
        "pyspark.sql.pandas.serializers",
        "pyspark.sql.streaming.stateful_processor",
        "sparkcep.spark.processor",
        "sparkcep.io.file_reader",
        "sparkcep.io.kafka.reader",
    ),
}
_DEFAULT_PRELOAD = ("pyspark.sql.datasource", "sparkcep.io.file_reader", "sparkcep.io.kafka.reader")


def installed_pyspark_dir() -> str | None:
    """The directory of the pyspark package installed beside this one (not the zip), or None."""
    for entry in sys.path:
        if entry.endswith(".zip"):
            continue
        candidate = os.path.join(entry or ".", "pyspark")
        if os.path.isfile(os.path.join(candidate, "__init__.py")):
            return os.path.realpath(candidate)
    return None


def without_bundled_copy(path: list[str], installed: str | None) -> list[str]:
    """``path`` without the zips of ``$SPARK_HOME/python/lib`` when SPARK_HOME is the installed package itself
    (pip's pyspark), whose compiled modules are the same code. A separate Spark installation keeps its zips."""
    if installed is None:
        return path
    bundled = os.path.join(installed, "python", "lib")
    return [entry for entry in path if not (entry.endswith(".zip") and os.path.realpath(entry).startswith(bundled))]


def preload(worker_module: str | None) -> None:
    """Import what workers of ``worker_module`` need; a module that fails to import is left to the worker (which
    reports the error where Spark shows it)."""
    for name in _PRELOAD.get(worker_module or "pyspark.worker", (*_DEFAULT_PRELOAD, worker_module or "")):
        if not name:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # noqa: S112 - the worker imports it again and fails where Spark reports it
            continue


def main() -> None:
    sys.path[:] = without_bundled_copy(sys.path, installed_pyspark_dir())
    preload(sys.argv[1] if len(sys.argv) > 1 else None)
    gc.collect()
    gc.freeze()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
