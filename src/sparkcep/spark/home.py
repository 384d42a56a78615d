"""The SPARK_HOME a local session starts from: pip's pyspark, without the zipped copy of itself.

pip's pyspark is its own SPARK_HOME, and Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the
``PYTHONPATH`` of every Python process it starts: the data workers, the planners of a Python data source, the
streaming source's process, the stateful processor's schema worker. Python cannot cache compiled code for a zip,
so each of them compiled pyspark's SQL modules from source before doing anything: about 1.2 s of CPU per process,
several of them one after the other while a query starts (bench/README.md, "Where the time goes").

A local session therefore starts from a home of links to pip's ``bin``, ``jars`` and the rest, without
``python/``: Spark then finds no zip, and every process imports the installed, compiled pyspark, the very same
code. Nothing changes where SPARK_HOME is set (a Spark installation), under spark-submit, or for a cluster master
(executors build their path from their own SPARK_HOME); a home that cannot be made is simply not used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

# What the zip copy lives in; every other entry of pip's pyspark directory is linked.
_PYTHON_COPY = "python"


def user_temp_dir() -> Path:
    """This user's directory of what local sessions keep between runs: the linked home, the JVM's class archive
    (sparkcep.spark.class_archive) and the sockets (sparkcep.spark.session)."""
    return Path(tempfile.gettempdir()) / f"sparkcep-{os.getuid()}"


def pip_spark_home() -> Path | None:
    """pip's pyspark directory when it is a SPARK_HOME holding the zip copy of itself, else None."""
    try:
        import pyspark
    except ImportError:
        return None
    home = Path(pyspark.__file__).resolve().parent
    if (home / "bin" / "spark-submit").is_file() and (home / _PYTHON_COPY / "lib" / "pyspark.zip").is_file():
        return home
    return None


def linked_home(real: Path, parent: Path) -> Path:
    """A directory under ``parent`` of links to every entry of ``real`` but its zip copy of pyspark (made once per
    installation, kept while it still matches)."""
    tag = hashlib.sha256(str(real).encode()).hexdigest()[:12]
    home = parent / f"spark-home-{tag}"
    entries = sorted(entry.name for entry in real.iterdir() if entry.name != _PYTHON_COPY)
    if home.is_dir():
        if all(os.path.realpath(home / name) == str(real / name) for name in entries):
            return home
        shutil.rmtree(home)  # links of another installation at the same path: made again below
    parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".spark-home-", dir=parent))
    for name in entries:
        (building / name).symlink_to(real / name)
    try:
        os.replace(building, home)  # atomic; another process may have made the same home first
    except OSError:
        for name in entries:
            (building / name).unlink()
        building.rmdir()
    return home


def use_compiled_pyspark() -> None:
    """Point SPARK_HOME at a linked home (see the module docs) unless the environment already chose one."""
    if "SPARK_HOME" in os.environ or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    real = pip_spark_home()
    if real is None:
        return
    try:
        home = linked_home(real, user_temp_dir())
    except OSError:
        return  # no place for links: the zip it is
    os.environ["SPARK_HOME"] = str(home)
