"""Runs of the streaming query shared by the Spark tests: input files written one per micro-batch, and a bounded
run over them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from sparkcep.io.files import FileSource
from sparkcep.rules.model import RuleSet
from sparkcep.runfiles.summary import RunSummary
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def write_batches(directory: Path, batches: list[list[str]]) -> None:
    """One file per micro-batch, with increasing modification times (Spark reads files in that order)."""
    directory.mkdir(parents=True, exist_ok=True)
    for index, lines in enumerate(batches):
        path = directory / f"batch-{index:03d}.jsonl"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def bounded_run(
    spark: SparkSession, rules: RuleSet, input_dir: Path, base: Path, max_files_per_trigger: int = 1, **kw: int
) -> RunSummary:
    # File after file (not aligned in event time), as the callers' arrivals: a file that comes later may be late.
    source = FileSource(input_dir, max_files_per_trigger, aligned=False)
    config = RunConfig(source, base / "out", base / "ck", buckets=8, **kw)
    return Pipeline(spark, rules, config).run_until_caught_up()
