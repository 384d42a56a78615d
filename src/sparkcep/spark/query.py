"""The streaming plan: JSON-lines files -> routing columns -> watermark -> stateful processor.

Spark reads only what routing needs (event time, event type, key fields) with ``json_tuple``; the full
event is decoded once, in Python, by the core. Each line becomes one row per grouping field whose rules
consume its event type, so an event is keyed once per distinct grouping field, not once per rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkcep.core.program import KEY_SEPARATOR, UNROUTED, Program
from sparkcep.spark.packing import PACKED_DDL, ROUTED_COLUMNS, pack_batches
from sparkcep.spark.processor import BUCKET_FIELD, OUTPUT_SCHEMA, EngineProcessor

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class QuerySpec:
    input_dir: str
    control_dir: str
    watermark_delay_ms: int
    buckets: int
    max_files_per_trigger: int
    # Spark grouping-key value of each bucket (see sparkcep.spark.placement); empty: the bucket number itself.
    bucket_keys: tuple[int, ...] = ()
    rules_seq: int = 0  # rule-store position of the rules the query starts with (0: a rule file)
    # Options of the Kafka source (sparkcep.kafka.source); None: JSON-lines files from input_dir.
    kafka_options: tuple[tuple[str, str], ...] | None = None


def event_time_column(raw: Column) -> Column:
    """Spark's reading of the time field, for the watermark only: ISO-8601 text or integer epoch ms."""
    from pyspark.sql import functions as F

    # ISO text first: digits-only text is not a timestamp Spark reads, so it falls through to epoch ms.
    return F.coalesce(F.try_to_timestamp(raw), F.timestamp_millis(raw.try_cast("bigint")))


def routed_rows(
    lines: DataFrame, program: Program, buckets: int, bucket_keys: tuple[int, ...] = ()
) -> DataFrame:
    """``(bucket, keyset, line, ts, ts_ms, origin)``: one row per grouping of each line, or one unrouted row.

    ``bucket`` is the Spark grouping key: ``bucket_keys[b]`` for bucket number ``b`` (the number itself when
    ``bucket_keys`` is empty). ``origin`` (where a record came from, e.g. its Kafka topic, partition and
    offset) travels along so that dead letters and late events can say it."""
    from pyspark.sql import functions as F

    lines = lines.where(F.length(F.trim("value")) > 0)  # blank lines are not events
    key_fields = sorted({field for fields in program.keysets for field in fields})
    # Without a type field every event has the type "" (the json_tuple slot then reads the time twice).
    type_field = program.type_field or program.time_field
    column = {field: f"c{i + 2}" for i, field in enumerate(key_fields)}
    control_bucket = f"c{len(key_fields) + 2}"
    parsed = lines.select(
        F.col("value").alias("line"),
        "origin",
        F.json_tuple("value", program.time_field, type_field, *key_fields, BUCKET_FIELD),
    )
    event_type = F.col("c1") if program.type_field else F.lit("")
    parsed = parsed.select(
        "line",
        "origin",
        event_time_column(F.col("c0")).alias("ts"),
        event_type.alias("etype"),
        *column.values(),
        F.col(control_bucket).cast("int").alias("control_bucket"),
    )

    def key(keyset: int) -> Column:
        # Same text as Program.key_of: json_tuple renders integers as digits, like Python's str(int).
        parts = [F.col(column[field]) for field in program.keysets[keyset]]
        return parts[0] if len(parts) == 1 else F.concat_ws(KEY_SEPARATOR, *parts)

    def typed(keyset: int) -> Column:
        """The line is an event (it has a time) of a type the keyset's rules consume."""
        types = program.keyset_types(keyset)
        condition = F.col("ts").isNotNull()
        if types is not None:
            condition = condition & F.col("etype").isin(list(types))
        return condition

    def keyed(keyset: int) -> Column:
        condition = F.lit(True)
        for field in program.keysets[keyset]:
            condition = condition & F.col(column[field]).isNotNull()
        return condition

    def wanted(keyset: int) -> Column:
        return typed(keyset) & keyed(keyset)

    if len(program.keysets) == 1:
        # One grouping (the common case): no arrays, no explode.
        routed = parsed.select(
            "line",
            "origin",
            "ts",
            F.when(wanted(0), F.lit(0)).otherwise(F.lit(UNROUTED)).alias("keyset"),
            key(0).alias("key"),
            "control_bucket",
        )
    else:
        candidates = [
            F.when(wanted(ks), F.struct(F.lit(ks).alias("keyset"), key(ks).alias("key")))
            for ks in range(len(program.keysets))
        ]
        unrouted_route = F.struct(F.lit(UNROUTED).alias("keyset"), F.lit(None).cast("string").alias("key"))
        # An event some groupings cannot key also goes unrouted, once, so its dead letters name those rules
        # (as Program.route does); the groupings that can key it still get it.
        unkeyed = [typed(ks) & ~keyed(ks) for ks in range(len(program.keysets))]
        any_unkeyed = unkeyed[0]
        for condition in unkeyed[1:]:
            any_unkeyed = any_unkeyed | condition
        candidates.append(F.when(any_unkeyed, unrouted_route))
        routes = F.array_compact(F.array(*candidates))
        unrouted = F.array(unrouted_route)
        routed = parsed.select(
            "line",
            "origin",
            "ts",
            F.explode(F.when(F.size(routes) > 0, routes).otherwise(unrouted)).alias("route"),
            "control_bucket",
        ).select(
            "line", "origin", "ts", F.col("route.keyset").alias("keyset"), F.col("route.key").alias("key"),
            "control_bucket",
        )  # fmt: skip
    # Control records name their bucket: a rule-log record goes to every bucket, one line each.
    bucket = (
        F.when(F.col("control_bucket").isNotNull(), F.col("control_bucket"))
        .when(F.col("keyset") >= 0, F.pmod(F.hash(F.col("keyset"), F.col("key")), F.lit(buckets)))
        .otherwise(F.pmod(F.hash(F.col("line")), F.lit(buckets)))
    )
    if bucket_keys:
        if len(bucket_keys) != buckets:
            raise ValueError(f"{len(bucket_keys)} bucket keys for {buckets} buckets")
        bucket = F.element_at(F.array(*[F.lit(key) for key in bucket_keys]), bucket.cast("int") + 1)
    return routed.select(
        bucket.cast("int").alias("bucket"),
        F.col("keyset").cast("int").alias("keyset"),
        "line",
        "ts",
        F.unix_millis("ts").alias("ts_ms"),
        "origin",
    )


def kafka_records(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """``value, topic, partition, offset``: from sparkcep's Python Kafka source, or from the official connector
    where the cluster has its jar (``implementation: spark-connector``; no aligned backfill there)."""
    from pyspark.sql import functions as F

    if options.pop("implementation", "python") != "spark-connector":
        from sparkcep.kafka.source import SOURCE_NAME, KafkaSource

        spark.dataSource.register(KafkaSource)
        return spark.readStream.format(SOURCE_NAME).options(**options).load()
    from sparkcep.kafka.client import KafkaError

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
    from sparkcep.kafka.client import resolve_properties

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


def build_stream(spark: SparkSession, program: Program, spec: QuerySpec) -> DataFrame:
    """The whole streaming plan up to (and including) the stateful processor."""
    from pyspark.sql import functions as F

    no_origin = F.lit(None).cast("string").alias("origin")
    if spec.kafka_options is not None:
        records = kafka_records(spark, dict(spec.kafka_options))
        origin = F.to_json(F.struct("topic", "partition", "offset"))
        events = records.where(F.col("value").isNotNull()).select("value", origin.alias("origin"))
    else:
        files = spark.readStream.option("maxFilesPerTrigger", spec.max_files_per_trigger).text(spec.input_dir)
        events = files.select("value", no_origin)
    # The engine's own control records (the end-of-input flush) come from a second file stream kept
    # inside the checkpoint directory, so they are replayed exactly like input after a restart.
    control = spark.readStream.text(spec.control_dir).select("value", no_origin)
    rows = routed_rows(events.unionByName(control), program, spec.buckets, spec.bucket_keys)
    # One row per bucket and Arrow batch instead of one per line and grouping (see sparkcep.spark.packing).
    packed = rows.select(*ROUTED_COLUMNS).mapInArrow(pack_batches, PACKED_DDL)
    with_time = packed.withColumn("ts", F.timestamp_millis("ts_ms"))
    with_watermark = with_time.withWatermark("ts", f"{spec.watermark_delay_ms} milliseconds")
    # Projecting the event-time column away keeps the watermark (timers still fire) but stops Spark from
    # silently dropping rows behind it: the engine sees late lines and reports them in _late/.
    # ts_ms is Spark's own reading of event time (the largest of a packed row's lines), which lets the
    # processor know how far the next watermark is sure to move (see Engine.process).
    stripped = with_watermark.select("bucket", "keysets", "lines", "origins", "ts_ms")
    processor = EngineProcessor(program.rules.to_json(), spec.watermark_delay_ms, spec.rules_seq)
    return stripped.groupBy("bucket").transformWithStateInPandas(processor, OUTPUT_SCHEMA, "Append", "EventTime")
