"""How many tasks of a stage run at once: the sources cut a batch into at least that many tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def stage_cores(spark: SparkSession) -> int:
    """The cores Spark runs a stage on (as its file source counts them to size its tasks)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # a session without a SparkContext (Spark Connect): two tasks at least
        return 2
