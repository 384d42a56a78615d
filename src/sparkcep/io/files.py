"""JSON-lines files: the file source and the file sink.

The source is read by sparkcep's reader (:mod:`sparkcep.io.file_reader`): files in a fixed order, whole or
aligned in event time, planned in :mod:`sparkcep.io.file_plan`; compressed files (``.gz``, ``.bz2``, ``.zst``,
``.deflate``) decompressed, counted in decompressed bytes (:mod:`sparkcep.io.compressed`).

The sink has the tasks that computed a batch write its records, one file per task and output name,
``OUTPUT/<name>/part-<batch id>-<task>.jsonl``, so no record passes through the driver. A file's name carries
the batch id and the task, and its lines are sorted, so when Spark re-runs a batch after a crash (same offsets,
same state version, deterministic engine) it rewrites the very same files: nothing is lost and nothing is
duplicated. Files appear atomically (written in a hidden staging area, then renamed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

from sparkcep.core.routing import RoutingSpec
from sparkcep.io.alignment import DEFAULT_MAX_BATCH_RECORDS, DEFAULT_STEP_MS, DEFAULT_TARGET_RECORDS
from sparkcep.io.lag import SourceLag
from sparkcep.runfiles.layout import staging_dir
from sparkcep.storage import Location, location
from sparkcep.timeutil import DEFAULT_MAX_AHEAD_MS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


# sparkcep's reader (sparkcep.io.file_reader): name order at equal times, alignment in event time.
SPARKCEP_READER: Literal["sparkcep"] = "sparkcep"
# Spark's text file stream: what checkpoints written before sparkcep's reader existed keep using.
SPARK_READER: Literal["spark"] = "spark"


@dataclass(frozen=True)
class FileSource:
    """Every file in ``path`` (one JSON event per line), not named ``.*`` or ``_*``; a compressed one (``.gz``,
    ``.bz2``, ``.zst``, ``.deflate``) decompressed, its byte caps and lag in decompressed bytes.

    Files are read oldest modification time first, equal times in name order. A micro-batch takes what is
    waiting up to ``max_batch_records`` lines and ``max_batch_bytes`` bytes (None: no bound; whole lines, a file
    read in part where a cap falls inside it) and ``max_files_per_trigger`` files: a backlog drains in batches of
    about the cap. With ``aligned`` (the default) every micro-batch instead advances every file to one event-time
    horizon, ``step_ms`` or more past the earliest waiting event (the step grows while batches hold fewer than
    ``target_records`` lines, and stays within the caps but for one step): a directory of files that overlap in
    event time then gives no late events and the output of one sorted file (see :mod:`sparkcep.io.file_plan`), live
    or backfilled. ``reader`` :data:`SPARK_READER` is Spark's own file source (modification time only, no
    alignment, no caps), kept for checkpoints that were written with it; ``max_ahead_ms`` is the run's bound on
    event times past the wall clock (later ones are dead letters and do not hold a file back).
    """

    path: Path | str  # a local path or a URI (sparkcep.storage)
    max_files_per_trigger: int | None = None
    aligned: bool = True
    step_ms: int = DEFAULT_STEP_MS
    target_records: int = DEFAULT_TARGET_RECORDS
    reader: Literal["sparkcep", "spark"] = SPARKCEP_READER
    max_ahead_ms: int | None = DEFAULT_MAX_AHEAD_MS
    # The reader's offsets (JSON) to start from while the query has none: a rescaled checkpoint's first start.
    starting_offsets: str | None = None
    max_batch_records: int | None = DEFAULT_MAX_BATCH_RECORDS
    max_batch_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_files_per_trigger", "step_ms", "target_records", "max_batch_records", "max_batch_bytes"):
            value = getattr(self, name)
            if value is None and name.startswith("max_"):
                continue
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"file source option {name!r}: expected a positive integer, got {value!r}")
        if self.reader not in (SPARKCEP_READER, SPARK_READER):
            raise ValueError(f"file source option 'reader': expected 'sparkcep' or 'spark', got {self.reader!r}")

    @property
    def directory(self) -> Path | None:
        place = location(self.path)
        return place.local_path if place.is_local else None

    def reader_options(self, time_field: str) -> dict[str, str]:
        """The options of sparkcep's reader (see :mod:`sparkcep.io.file_reader`)."""
        options = {"path": str(location(self.path)), "timefield": time_field}
        if self.aligned:
            options["alignstepms"] = str(self.step_ms)
            options["aligntargetrecords"] = str(self.target_records)
        elif self.max_files_per_trigger is not None:
            options["maxfilespertrigger"] = str(self.max_files_per_trigger)
        if self.max_batch_records is not None:
            options["maxbatchrecords"] = str(self.max_batch_records)
        if self.max_batch_bytes is not None:
            options["maxbatchbytes"] = str(self.max_batch_bytes)
        if self.max_ahead_ms is not None:
            options["maxaheadms"] = str(self.max_ahead_ms)
        if self.starting_offsets is not None:
            options["startingoffsets"] = self.starting_offsets
        return options

    def progress(self, offset: Mapping[str, Any] | None, time_field: str) -> list[SourceLag]:
        """Lines and bytes of the directory not read yet, and how far their newest event time is ahead of the
        newest read (see :mod:`sparkcep.io.file_lag`). Spark's own file source (old checkpoints) says nothing."""
        if self.reader == SPARK_READER:
            return []
        from sparkcep.io.file_lag import directory_lag

        return [directory_lag(self.path, time_field, offset)]

    def packed(self, spark: SparkSession, routing: RoutingSpec) -> DataFrame:
        from pyspark.sql import functions as F

        if self.reader == SPARK_READER:
            from sparkcep.io.packed import pack_in_spark

            reader = spark.readStream
            if self.max_files_per_trigger is not None:
                reader = reader.option("maxFilesPerTrigger", self.max_files_per_trigger)
            files = reader.text(location(self.path).uri)
            return pack_in_spark(files.select("value", F.lit(None).cast("string").alias("origin")), routing)
        from sparkcep.io.cores import stage_cores
        from sparkcep.io.file_reader import SOURCE_NAME, FilesDataSource

        spark.dataSource.register(FilesDataSource)
        options = {
            **self.reader_options(routing.time_field),
            "parallelism": str(stage_cores(spark)),
            "routing": routing.to_json(),
        }
        return spark.readStream.format(SOURCE_NAME).options(**options).load()


METRICS_NAME = "_metric"  # the rows that carry a batch's metrics: staged, read by the driver, never published
_PART = re.compile(r"part-(\d+)-")


class FileSink:
    """Writes a batch's outputs under ``output``: ``OUTPUT/<name>/part-<batch id>-<task>.jsonl``.

    The tasks that computed a batch write its records (Spark's writer, through its Hadoop file system layer, so
    any URI Spark reaches works), each task one file per output name, lines sorted by time and record. The
    driver then renames the files to their place: a file's name carries the batch id and the task number, and
    the engine is deterministic, so a batch Spark runs again after a crash rewrites the very same files.
    """

    def __init__(self, output: Location) -> None:
        self.output = output

    def __repr__(self) -> str:
        return f"FileSink({self.output.uri!r})"

    def stage(self, frame: DataFrame, batch_id: int) -> StagedBatch:
        """Have the tasks write ``frame`` (``kind, name, time, payload`` rows) into this batch's staging area."""
        staging = staging_dir(self.output, batch_id)
        (
            frame.sortWithinPartitions("name", "time", "payload")
            .select("name", "payload")
            .write.mode("overwrite")
            .option("maxRecordsPerFile", 0)  # one file per task and name: its number is the task's
            # The staging area is published by renames of the driver's: Hadoop's committer need not move each
            # file once more at job commit (algorithm 2 moves it at task commit) nor mark the job done.
            .option("mapreduce.fileoutputcommitter.algorithm.version", "2")
            .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
            .partitionBy("name")
            .text(staging.uri)
        )
        return StagedBatch.listed(staging, batch_id)


@dataclass(frozen=True)
class StagedBatch:
    """A batch's files as the tasks wrote them: ``name=<output name>/part-<task>-<uuid>.c000.txt``, listed once
    (``names``: output name -> its part files)."""

    staging: Location
    batch_id: int
    names: dict[str, list[Location]]

    @classmethod
    def listed(cls, staging: Location, batch_id: int) -> StagedBatch:
        """The staging area as it is now (Spark escapes a partition value as ``%XX``)."""
        found: dict[str, list[Location]] = {}
        for directory in staging.children("name=*"):
            parts = [part for part in directory.children("part-*") if _PART.match(part.name)]
            if parts:
                found[unquote(directory.name.removeprefix("name="))] = parts
        return cls(staging, batch_id, found)

    def publish(self, output: Location) -> dict[str, list[Location]]:
        """Move every output's files to ``OUTPUT/<name>/``; return the published files by name (metrics stay)."""
        published: dict[str, list[Location]] = {}
        for name, parts in self.names.items():
            if name == METRICS_NAME:
                continue
            directory = output / name
            directory.mkdir()
            # A checkpoint that a version writing one file per batch left mid-batch: that batch now runs again.
            (directory / f"part-{self.batch_id:08d}.jsonl").remove()
            targets = []
            for part in parts:
                match = _PART.match(part.name)
                assert match is not None
                target = directory / f"part-{self.batch_id:08d}-{int(match.group(1)):05d}.jsonl"
                part.replace(target)
                targets.append(target)
            published[name] = targets
        return published

    def lines(self, name: str) -> list[str]:
        """The records of one staged output (for small ones: the metrics, rule errors)."""
        return [line for part in self.names.get(name, []) for line in part.read_text().splitlines() if line]

    def remove(self) -> None:
        self.staging.remove()
