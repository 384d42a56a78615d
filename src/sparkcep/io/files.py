"""JSON-lines files: the file source and the file sink.

The source is read by sparkcep's reader (:mod:`sparkcep.io.file_reader`): files in a fixed order, whole or
aligned in event time, planned in :mod:`sparkcep.io.file_plan`.

The sink writes one file per output name and batch, ``OUTPUT/<name>/part-<batch id>.jsonl``. A file's name
carries the batch id and its lines are sorted, so when Spark re-runs a batch after a crash (same offsets, same
state version, deterministic engine) it rewrites the very same files: nothing is lost and nothing is duplicated.
Files appear atomically (written under a temporary name, then renamed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sparkcep.io.alignment import DEFAULT_STEP_MS, DEFAULT_TARGET_RECORDS
from sparkcep.outputs import KeyFields, Outputs, write_atomically
from sparkcep.timeutil import DEFAULT_MAX_AHEAD_MS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


# sparkcep's reader (sparkcep.io.file_reader): name order at equal times, alignment in event time.
SPARKCEP_READER: Literal["sparkcep"] = "sparkcep"
# Spark's text file stream: what checkpoints written before sparkcep's reader existed keep using.
SPARK_READER: Literal["spark"] = "spark"


@dataclass(frozen=True)
class FileSource:
    """Every file in ``path`` (one JSON event per line), not named ``.*`` or ``_*``.

    Files are read oldest modification time first, equal times in name order, whole, at most
    ``max_files_per_trigger`` per micro-batch (which bounds a batch's memory). With ``aligned`` every micro-batch
    instead advances every file to one event-time horizon, ``step_ms`` or more past the earliest waiting event
    (the step grows while batches hold fewer than ``target_records`` lines): a directory of files that overlap in
    event time then gives no late events and the output of one sorted file (see :mod:`sparkcep.io.file_plan`).
    ``reader`` :data:`SPARK_READER` is Spark's own file source (modification time only, no alignment), kept for
    checkpoints that were written with it; ``max_ahead_ms`` is the run's bound on event times past the wall clock
    (later ones are dead letters and do not hold a file back).
    """

    path: Path
    max_files_per_trigger: int = 1
    aligned: bool = False
    step_ms: int = DEFAULT_STEP_MS
    target_records: int = DEFAULT_TARGET_RECORDS
    reader: Literal["sparkcep", "spark"] = SPARKCEP_READER
    max_ahead_ms: int | None = DEFAULT_MAX_AHEAD_MS

    def __post_init__(self) -> None:
        for name in ("max_files_per_trigger", "step_ms", "target_records"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"file source option {name!r}: expected a positive integer, got {value!r}")
        if self.reader not in (SPARKCEP_READER, SPARK_READER):
            raise ValueError(f"file source option 'reader': expected 'sparkcep' or 'spark', got {self.reader!r}")

    @property
    def directory(self) -> Path:
        return self.path

    def reader_options(self, time_field: str) -> dict[str, str]:
        """The options of sparkcep's reader (see :mod:`sparkcep.io.file_reader`)."""
        options = {"path": str(self.path), "timefield": time_field}
        if self.aligned:
            options["alignstepms"] = str(self.step_ms)
            options["aligntargetrecords"] = str(self.target_records)
        else:
            options["maxfilespertrigger"] = str(self.max_files_per_trigger)
        if self.max_ahead_ms is not None:
            options["maxaheadms"] = str(self.max_ahead_ms)
        return options

    def lines(self, spark: SparkSession, time_field: str) -> DataFrame:
        from pyspark.sql import functions as F

        no_origin = F.lit(None).cast("string").alias("origin")  # a line's place says nothing a record needs
        if self.reader == SPARK_READER:
            files = spark.readStream.option("maxFilesPerTrigger", self.max_files_per_trigger).text(str(self.path))
            return files.select("value", no_origin)
        from sparkcep.io.file_reader import SOURCE_NAME, FilesDataSource

        spark.dataSource.register(FilesDataSource)
        options = {**self.reader_options(time_field), "parallelism": str(_parallelism(spark))}
        records = spark.readStream.format(SOURCE_NAME).options(**options).load()
        # The bytes as they are, as text (like Spark's text source): routing flags a line that is not UTF-8.
        return records.select(F.col("value").cast("string").alias("value"), no_origin)


def _parallelism(spark: SparkSession) -> int:
    """The cores Spark runs a stage on (as its file source counts them to size its tasks)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # a session without a SparkContext (Spark Connect): two tasks at least
        return 2


class FileWriter:
    """Writes a batch's outputs under ``output_dir``, one file per output name."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir

    def __repr__(self) -> str:
        return f"FileWriter({str(self.output_dir)!r})"

    def write_batch(self, batch_id: int, outputs: Outputs, key_fields: KeyFields) -> int:
        written = 0
        for name, items in outputs.items():
            text = "".join(payload + "\n" for _, payload in items)
            write_atomically(self.output_dir / name / f"part-{batch_id:08d}.jsonl", text)
            written += len(items)
        return written
