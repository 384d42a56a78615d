"""The checkpoint file manager a query over a local checkpoint starts with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sparkcep.storage import Location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Spark's default checkpoint file manager goes through Hadoop's FileContext, which on a local file system (without
# Hadoop's native library, as in pip's pyspark) starts a `readlink` process for every rename it makes: with the
# `chmod` Hadoop starts for every file it creates, 20-45 processes per micro-batch, each a fork of the JVM. The
# FileSystem-based manager renames with rename(2), atomic on a local disk, and starts none: a live batch's
# offset-log and commit-log writes went from 40-46 to 11 ms each, the whole batch from 625 to 456 ms (median of
# 23 small batches, bench/README.md "Fixed cost of a live batch"). Other file systems (HDFS, S3) keep Spark's
# choice, whose renames are atomic there; a setting of the user's wins everywhere.
_CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
_RENAMING_FILE_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


@contextmanager
def checkpoint_files_for(spark: SparkSession, checkpoint: Location) -> Iterator[None]:
    """While a query over ``checkpoint`` starts: the checkpoint file manager for its file system (see above).

    A query keeps the settings it started with (Spark copies the session's), so the session gets its own back
    right after, for the other queries it may run."""
    mine = spark.conf.get(_CHECKPOINT_FILE_MANAGER, None)
    if mine or not checkpoint.is_local:
        yield
        return
    spark.conf.set(_CHECKPOINT_FILE_MANAGER, _RENAMING_FILE_MANAGER)
    try:
        yield
    finally:
        spark.conf.unset(_CHECKPOINT_FILE_MANAGER)
