"""JSON-lines files: the file source and the file sink.

The sink writes one file per output name and batch, ``OUTPUT/<name>/part-<batch id>.jsonl``. A file's name
carries the batch id and its lines are sorted, so when Spark re-runs a batch after a crash (same offsets, same
state version, deterministic engine) it rewrites the very same files: nothing is lost and nothing is duplicated.
Files appear atomically (written under a temporary name, then renamed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sparkcep.outputs import KeyFields, Outputs, write_atomically

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class FileSource:
    """Every file in ``path`` (one JSON event per line), oldest modification time first; at most
    ``max_files_per_trigger`` files per micro-batch, which bounds a batch's memory."""

    path: Path
    max_files_per_trigger: int = 1

    @property
    def directory(self) -> Path:
        return self.path

    def lines(self, spark: SparkSession, time_field: str) -> DataFrame:
        from pyspark.sql import functions as F

        files = spark.readStream.option("maxFilesPerTrigger", self.max_files_per_trigger).text(str(self.path))
        return files.select("value", F.lit(None).cast("string").alias("origin"))


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
