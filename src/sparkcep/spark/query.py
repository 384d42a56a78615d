"""The streaming plan: JSON-lines files -> routing columns -> watermark -> stateful processor.

Spark reads only what routing needs (event time, event type, key fields) with ``json_tuple``; the full
event is decoded once, in Python, by the core. Each line becomes one row per grouping field whose rules
consume its event type, so an event is keyed once per distinct grouping field, not once per rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkcep.core.program import UNROUTED, Program
from sparkcep.spark.processor import OUTPUT_SCHEMA, EngineProcessor

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class QuerySpec:
    input_dir: str
    control_dir: str
    watermark_delay_ms: int
    buckets: int
    max_files_per_trigger: int


def event_time_column(raw: Column) -> Column:
    """Spark's reading of the time field, for the watermark only: ISO-8601 text or integer epoch ms."""
    from pyspark.sql import functions as F

    # ISO text first: digits-only text is not a timestamp Spark reads, so it falls through to epoch ms.
    return F.coalesce(F.try_to_timestamp(raw), F.timestamp_millis(raw.try_cast("bigint")))


def routed_rows(lines: DataFrame, program: Program, buckets: int) -> DataFrame:
    """``(bucket, keyset, line, ts, ts_ms)``: one row per grouping field of each line, or one unrouted row."""
    from pyspark.sql import functions as F

    lines = lines.where(F.length(F.trim("value")) > 0)  # blank lines are not events
    fields = [program.time_field, program.type_field, *program.key_fields]
    parsed = lines.select(F.col("value").alias("line"), F.json_tuple("value", *fields))
    type_raw = F.col("c1")
    parsed = parsed.select(
        "line",
        event_time_column(F.col("c0")).alias("ts"),
        *(F.col(f"c{i + 2}") for i in range(len(program.key_fields))),
        type_raw,
    )

    def wanted(keyset: int) -> Column:
        key = F.col(f"c{keyset + 2}")
        return type_raw.isin(list(program.keyset_types(keyset))) & key.isNotNull() & F.col("ts").isNotNull()

    if len(program.key_fields) == 1:
        # One grouping field (the common case): no arrays, no explode.
        routed = parsed.select(
            "line",
            "ts",
            F.when(wanted(0), F.lit(0)).otherwise(F.lit(UNROUTED)).alias("keyset"),
            F.col("c2").alias("key"),
        )
    else:
        candidates = [
            F.when(wanted(ks), F.struct(F.lit(ks).alias("keyset"), F.col(f"c{ks + 2}").alias("key")))
            for ks in range(len(program.key_fields))
        ]
        routes = F.array_compact(F.array(*candidates))
        unrouted = F.array(F.struct(F.lit(UNROUTED).alias("keyset"), F.lit(None).cast("string").alias("key")))
        routed = parsed.select(
            "line", "ts", F.explode(F.when(F.size(routes) > 0, routes).otherwise(unrouted)).alias("route")
        ).select("line", "ts", F.col("route.keyset").alias("keyset"), F.col("route.key").alias("key"))
    bucket = F.when(F.col("keyset") >= 0, F.pmod(F.hash(F.col("keyset"), F.col("key")), F.lit(buckets))).otherwise(
        F.pmod(F.hash(F.col("line")), F.lit(buckets))
    )
    return routed.select(
        bucket.cast("int").alias("bucket"),
        F.col("keyset").cast("int").alias("keyset"),
        "line",
        "ts",
        F.unix_millis("ts").alias("ts_ms"),
    )


def build_stream(spark: SparkSession, program: Program, spec: QuerySpec) -> DataFrame:
    """The whole streaming plan up to (and including) the stateful processor."""
    events = spark.readStream.option("maxFilesPerTrigger", spec.max_files_per_trigger).text(spec.input_dir)
    # The engine's own control records (the end-of-input flush) come from a second file stream kept
    # inside the checkpoint directory, so they are replayed exactly like input after a restart.
    control = spark.readStream.text(spec.control_dir)
    rows = routed_rows(events.unionByName(control), program, spec.buckets)
    with_watermark = rows.withWatermark("ts", f"{spec.watermark_delay_ms} milliseconds")
    # Projecting the event-time column away keeps the watermark (timers still fire) but stops Spark from
    # silently dropping rows behind it: the engine sees late rows and reports them in _late/.
    # ts_ms is Spark's own reading of event time, which lets the processor know how far the next watermark
    # is sure to move (see Engine.process).
    stripped = with_watermark.select("bucket", "keyset", "line", "ts_ms")
    return stripped.groupBy("bucket").transformWithStateInPandas(
        EngineProcessor(program.rules.to_json(), spec.watermark_delay_ms), OUTPUT_SCHEMA, "Append", "EventTime"
    )
