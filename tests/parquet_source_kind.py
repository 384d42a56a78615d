"""A throwaway source kind, "parquet": a directory of Parquet files whose ``value`` column holds one JSON event per
row, read by Spark's own Parquet stream. Its config model, its source and its one kind class, as a new source
would have them in its own module of ``io/``; nothing in the package names it. tests/io/test_source_kinds.py
registers it for the duration of a test and runs a job from a pipeline file over it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from sparkcep.core.routing import RoutingSpec
from sparkcep.io.checks import Origin, require_input_directory
from sparkcep.io.lag import SourceLag
from sparkcep.io.packed import pack_in_spark
from sparkcep.io.source_kinds import SourceConfig, SourceKind
from sparkcep.storage import location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class ParquetSourceConfig(SourceConfig):
    """``source: {type: parquet, path: DIR}``."""

    type: Literal["parquet"]
    path: str  # a path (relative to the pipeline file) or a URI


@dataclass(frozen=True)
class ParquetSource:
    """Every Parquet file in ``path``, its ``value`` column the lines; Spark lists and reads them."""

    path: str

    @property
    def directory(self) -> Path | None:
        place = location(self.path)
        return place.local_path if place.is_local else None

    def packed(self, spark: SparkSession, routing: RoutingSpec) -> DataFrame:
        from pyspark.sql import functions as F

        rows = spark.readStream.schema("value string").parquet(location(self.path).uri)
        return pack_in_spark(rows.select("value", F.lit(None).cast("string").alias("origin")), routing)

    def progress(self, offset: Mapping[str, Any] | None, time_field: str) -> list[SourceLag]:
        return []  # Spark's file source tells nothing of what waits


class ParquetKind(SourceKind[ParquetSourceConfig, ParquetSource]):
    name: ClassVar[str] = "parquet"
    config_model: ClassVar[type[SourceConfig]] = ParquetSourceConfig
    source_class: ClassVar[type[Any]] = ParquetSource

    def build(self, config: ParquetSourceConfig, checkpoint: str) -> ParquetSource:
        return ParquetSource(config.path)

    def resolved(self, config: ParquetSourceConfig, place: Callable[[str], str]) -> ParquetSourceConfig:
        return config.model_copy(update={"path": place(config.path)})

    def input_place(self, config: ParquetSourceConfig) -> str | None:
        return config.path

    def check_places(self, config: ParquetSourceConfig, origin: Origin) -> None:
        require_input_directory(location(config.path), origin.name("source.path"), None)


PARQUET = ParquetKind()
