"""Kafka topics as the input of a run: sparkcep's own reader (:mod:`sparkcep.io.kafka.reader`) by default, or
Spark's official connector where the cluster has its jar (``implementation: spark-connector``; no aligned
backfill there)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkcep.arrival import is_arrival
from sparkcep.core.routing import RoutingSpec
from sparkcep.io.kafka.client import KafkaError, resolve_properties
from sparkcep.io.lag import SourceLag

# Options of the source that are not the reader's: the consumer group its progress is committed to.
_PROGRESS_OPTIONS = ("commitgroup",)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class KafkaSource:
    """Records of ``options["topics"]``; ``options`` are the reader's (see :mod:`sparkcep.io.kafka.reader`).

    With ``time_field_fallback`` an event without the rules' time field takes its record timestamp. Option
    ``commitgroup``: the consumer group :meth:`progress` commits the job's position to (none: no commits);
    ``progress_timeout_s`` bounds each of its waits for the brokers.
    """

    options: tuple[tuple[str, str], ...]
    time_field_fallback: bool = False
    progress_timeout_s: float = 5.0

    @property
    def directory(self) -> Path | None:
        return None

    def reader_options(self, time_field: str) -> dict[str, str]:
        options = {name: value for name, value in self.options if name not in _PROGRESS_OPTIONS}
        # Arrival time reads no field: a record timestamp written into the line would only change the line.
        if self.time_field_fallback and not is_arrival(time_field):
            options["timefield"] = time_field
        return dict(sorted(options.items()))

    def packed(self, spark: SparkSession, routing: RoutingSpec) -> DataFrame:
        from pyspark.sql import functions as F

        options = self.reader_options(routing.time_field)
        if options.get("implementation", "python") != "spark-connector":
            from sparkcep.io.cores import stage_cores
            from sparkcep.io.kafka.reader import SOURCE_NAME, KafkaDataSource

            spark.dataSource.register(KafkaDataSource)
            options = {**options, "parallelism": str(stage_cores(spark)), "routing": routing.to_json()}
            return spark.readStream.format(SOURCE_NAME).options(**options).load()
        from sparkcep.io.packed import pack_in_spark

        records = kafka_records(spark, options)
        origin = F.to_json(F.struct("topic", "partition", "offset"))
        return pack_in_spark(records.where(F.col("value").isNotNull()).select("value", origin.alias("origin")), routing)

    def progress(self, offset: Mapping[str, Any] | None, time_field: str) -> list[SourceLag]:
        """Lag per topic-partition behind ``offset`` (the batch's end, either reader's form), in records and in
        event time (record timestamps), and the offsets committed to the ``commitgroup`` consumer group (see
        :mod:`sparkcep.io.kafka.progress`). The records' timestamps are their event times: ``time_field`` is
        not needed."""
        from sparkcep.io.kafka.progress import source_progress

        return source_progress(dict(self.options), offset, self.progress_timeout_s)


def kafka_records(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """``value, topic, partition, offset``: from sparkcep's Python Kafka reader, or from the official connector."""
    from pyspark.sql import functions as F

    if options.pop("implementation", "python") != "spark-connector":
        from sparkcep.io.kafka.reader import SOURCE_NAME, KafkaDataSource

        spark.dataSource.register(KafkaDataSource)
        records = spark.readStream.format(SOURCE_NAME).options(**options).load()
        return records.withColumn("value", F.col("value").cast("string"))  # the bytes as they are, as text
    if "alignstepms" in options:
        raise KafkaError("aligned backfill needs implementation: python (the official connector cannot align)")
    connector = {"kafka.bootstrap.servers": options["bootstrap.servers"], "subscribe": options["topics"]}
    starting = options.get("startingoffsets", "earliest")
    if starting in ("earliest", "latest"):
        connector["startingOffsets"] = starting
    else:
        from sparkcep.timeutil import parse_event_time

        connector["startingTimestamp"] = str(parse_event_time(starting))
    if "maxrecordsperbatch" in options:
        connector["maxOffsetsPerTrigger"] = options["maxrecordsperbatch"]
    properties = {k: v for k, v in options.items() if k.startswith("kafka.") and k != "kafka.bootstrap.servers"}
    connector.update(resolve_properties(properties))
    try:
        frame = spark.readStream.format("kafka").options(**connector).load()
    except Exception as exc:  # Spark's error when the jar is missing names the data source
        if "kafka" in str(exc).lower() and "data source" in str(exc).lower():
            raise KafkaError(
                "implementation 'spark-connector' needs the spark-sql-kafka connector on Spark's classpath "
                "(not found); use implementation: python"
            ) from None
        raise
    return frame.select(
        F.col("value").cast("string").alias("value"), "topic", "partition", "offset",
        F.unix_millis("timestamp").alias("timestamp"),
    )  # fmt: skip
