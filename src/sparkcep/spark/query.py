"""The streaming plan: a source's packed rows (and the control stream's) -> watermark -> stateful processor.

Sources route the lines they read in Python (sparkcep.core.routing, sparkcep.io.packed): Spark moves one row per
bucket and batch and reads no JSON per line. Each line goes to every grouping whose rules consume its event type,
so an event is keyed once per distinct grouping, not once per rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkcep.core.control import BUCKET_FIELD
from sparkcep.core.pages import DEFAULT_PAGE_KEYS, PageLimits
from sparkcep.core.program import Program
from sparkcep.core.routing import CONTROL, CRC32, RoutingSpec
from sparkcep.io.source import Source
from sparkcep.spark.processor import OUTPUT_SCHEMA, EngineProcessor

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, GroupedData, SparkSession


@dataclass(frozen=True)
class QuerySpec:
    source: Source  # the input lines (files, Kafka: sparkcep.io)
    control_dir: str
    watermark_delay_ms: int
    buckets: int
    # Spark grouping-key value of each bucket (see sparkcep.spark.placement); empty: the bucket number itself.
    bucket_keys: tuple[int, ...] = ()
    # How a key's bucket is computed (sparkcep.core.routing): part of the checkpoint, as its state is keyed by it.
    bucket_function: str = CRC32
    rules_seq: int = 0  # rule-store position of the rules the query starts with (0: a rule file)
    # Event times more than this past the micro-batch's wall clock are dead letters (None: no bound).
    max_ahead_ms: int | None = None
    page_keys: int = DEFAULT_PAGE_KEYS  # most engine keys on one page of a bucket's state
    # A rescaled checkpoint's first start (sparkcep.spark.rescale): the old query's state, grouped by the new
    # bucket keys, and its watermark, which the new query does not have yet.
    initial_state: GroupedData | None = None
    watermark_floor_ms: int | None = None


def control_rows(lines: DataFrame, routing: RoutingSpec) -> DataFrame:
    """The control stream's lines as packed rows, one per line (sparkcep writes them: a few per run).

    A rule-log record names its bucket; a flush or an advance goes to any one bucket (a hash of the line) and
    carries its event time, as epoch ms, which moves the watermark."""
    from pyspark.sql import functions as F

    parsed = lines.select("value", F.json_tuple("value", routing.time_field, BUCKET_FIELD).alias("time", "named"))
    number = F.coalesce(F.col("named").try_cast("int"), F.pmod(F.hash("value"), F.lit(routing.buckets)))
    bucket = number
    if routing.bucket_keys:
        bucket = F.element_at(F.array(*[F.lit(key) for key in routing.bucket_keys]), number + 1)
    return parsed.select(
        bucket.cast("int").alias("bucket"),
        F.array(F.lit(CONTROL)).alias("keysets"),
        F.array("value").alias("lines"),
        F.lit(None).cast("array<string>").alias("origins"),
        F.col("time").try_cast("bigint").alias("ts_ms"),
        F.lit(None).cast("array<bigint>").alias("times"),  # the engine reads a control record's time itself
    )


def build_stream(spark: SparkSession, program: Program, spec: QuerySpec) -> DataFrame:
    """The whole streaming plan up to (and including) the stateful processor."""
    from pyspark.sql import functions as F

    routing = program.routing(spec.buckets, spec.bucket_keys, spec.bucket_function, spec.max_ahead_ms)
    # The source routes and packs its lines where it reads them (sparkcep.io.packed): one row per bucket and batch.
    events = spec.source.packed(spark, routing)
    # The engine's own control records (the end-of-input flush, rule logs) come from a second file stream kept
    # inside the checkpoint directory, so they are replayed exactly like input after a restart. Only lines of
    # that stream are control records: input that imitates one is a dead letter.
    control = control_rows(spark.readStream.text(spec.control_dir), routing)
    packed = events.unionByName(control)
    with_time = packed.withColumn("ts", F.timestamp_millis("ts_ms"))
    with_watermark = with_time.withWatermark("ts", f"{spec.watermark_delay_ms} milliseconds")
    # Projecting the event-time column away keeps the watermark (timers still fire) but stops Spark from
    # silently dropping rows behind it: the engine sees late lines and reports them in _late/.
    # ts_ms is routing's reading of event time (the largest of a packed row's lines), which lets the processor
    # know how far the next watermark is sure to move (see Engine.process); times is each line's reading of it.
    stripped = with_watermark.select("bucket", "keysets", "lines", "origins", "ts_ms", "times")
    processor = EngineProcessor(
        program.rules.to_json(),
        spec.watermark_delay_ms,
        spec.rules_seq,
        PageLimits(keys=spec.page_keys),
        spec.watermark_floor_ms,
    )
    return stripped.groupBy("bucket").transformWithStateInPandas(
        processor, OUTPUT_SCHEMA, "Append", "EventTime", initialState=spec.initial_state
    )
