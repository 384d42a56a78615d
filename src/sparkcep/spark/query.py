"""The streaming plan: a source's lines -> routing columns -> watermark -> stateful processor.

Spark reads only what routing needs (event time, event type, key fields) with ``json_tuple``; the full
event is decoded once, in Python, by the core. Each line becomes one row per grouping field whose rules
consume its event type, so an event is keyed once per distinct grouping field, not once per rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkcep.core.control import BUCKET_FIELD, CONTROL_FIELD
from sparkcep.core.lines import BLANK_LINE_PATTERN
from sparkcep.core.logic import KEY_SEPARATOR
from sparkcep.core.pages import DEFAULT_PAGE_KEYS, PageLimits
from sparkcep.core.program import (
    CONTROL,
    INVALID_TEXT,
    RESERVED,
    TIME_AHEAD,
    UNROUTED,
    Program,
)
from sparkcep.io.source import Source
from sparkcep.spark.packing import PACKED_DDL, ROUTED_COLUMNS, pack_batches
from sparkcep.spark.processor import OUTPUT_SCHEMA, EngineProcessor
from sparkcep.timeutil import (
    CANONICAL_TIME_PATTERN,
    EPOCH_MS_PATTERN,
    ISO_TIME_PATTERN,
    MAX_EVENT_TIME_MS,
    MIN_EVENT_TIME_MS,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, GroupedData, SparkSession


@dataclass(frozen=True)
class QuerySpec:
    source: Source  # the input lines (files, Kafka: sparkcep.io)
    control_dir: str
    watermark_delay_ms: int
    buckets: int
    # Spark grouping-key value of each bucket (see sparkcep.spark.placement); empty: the bucket number itself.
    bucket_keys: tuple[int, ...] = ()
    rules_seq: int = 0  # rule-store position of the rules the query starts with (0: a rule file)
    # Event times more than this past the micro-batch's wall clock are dead letters (None: no bound).
    max_ahead_ms: int | None = None
    page_keys: int = DEFAULT_PAGE_KEYS  # most engine keys on one page of a bucket's state
    # A rescaled checkpoint's first start (sparkcep.spark.rescale): the old query's state, grouped by the new
    # bucket keys, and its watermark, which the new query does not have yet.
    initial_state: GroupedData | None = None
    watermark_floor_ms: int | None = None


def _anchored(pattern: str) -> str:
    """A whole-value Java regex (``rlike`` finds a match anywhere; Python's ``fullmatch`` is the twin)."""
    return f"^(?:{pattern})\\z"  # Java's $ also matches before a final line break; \z is the very end


def event_time_ms_column(raw: Column) -> Column:
    """Spark's reading of the time field in epoch ms, *before* the range check (see :func:`in_event_time_range`):
    exactly :func:`sparkcep.timeutil.read_event_time`.

    The same patterns and range as the engine's reading, so the watermark only ever moves for times the engine
    accepts too (``tests/test_event_time_agreement.py`` feeds both one adversarial corpus). Every part of the
    expression appears once: Spark would evaluate a repeated part again for each use."""
    from pyspark.sql import functions as F

    def field(start: int, length: int) -> Column:
        return F.substring(raw, start, length).cast("int")

    # The wire format sparkcep writes: fixed positions, no regex groups to extract.
    day_and_time = (field(1, 4), field(6, 2), field(9, 2), field(12, 2), field(15, 2), field(18, 2))
    canonical = F.unix_millis(F.try_make_timestamp(*day_and_time, F.lit("UTC"))) + field(21, 3)

    iso = _anchored(ISO_TIME_PATTERN)

    def number(index: int) -> Column:  # an absent group extracts as "", read as 0
        return F.coalesce(F.regexp_extract(raw, iso, index).try_cast("int"), F.lit(0))

    fraction_ms = F.rpad(F.substring(F.regexp_extract(raw, iso, 7), 1, 3), 3, "0").cast("int")
    offset_sign = F.when(F.regexp_extract(raw, iso, 8) == "-", F.lit(-1)).otherwise(F.lit(1))
    general = (
        F.unix_millis(
            F.try_make_timestamp(number(1), number(2), number(3), number(4), number(5), number(6), F.lit("UTC"))
        )
        + fraction_ms
        - offset_sign * (number(9) * 3_600_000 + number(10) * 60_000)
    )
    return (
        F.when((F.length(raw) == 24) & raw.rlike(_anchored(CANONICAL_TIME_PATTERN)), canonical)
        .when(raw.rlike(_anchored(EPOCH_MS_PATTERN)), raw.try_cast("bigint"))
        .when(raw.rlike(iso), general)
    )


def in_event_time_range(ms: Column) -> Column:
    """``ms`` where it lies in the supported range, else null (give it a column of an earlier ``select``)."""
    from pyspark.sql import functions as F

    return F.when(ms.between(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS), ms)


def _read_routing_fields(
    lines: DataFrame, program: Program, key_fields: list[str], max_ahead_ms: int | None
) -> DataFrame:
    """``line, origin, ts_ms, etype, c2.. (key fields), control_bucket, unrouted``: what routing reads of a line.

    ``unrouted`` is :data:`UNROUTED` for a line routing may key, else the code of its problem (or
    :data:`CONTROL`); only events and control records keep their time."""
    from pyspark.sql import functions as F

    valid_text = F.is_valid_utf8("value")
    # Spark's text source keeps a line's bytes as they are; Python could not decode a line that is not UTF-8,
    # so it travels with U+FFFD in place of the bad bytes, flagged, to become a dead letter.
    lines = lines.select(
        F.when(valid_text, F.col("value")).otherwise(F.make_valid_utf8("value")).alias("value"),
        "origin",
        "control",
        valid_text.alias("valid_text"),
    ).where(~F.col("value").rlike(_anchored(BLANK_LINE_PATTERN)))  # blank lines are not events
    # Without a type field every event has the type "" (the json_tuple slot then reads the time twice).
    type_field = program.type_field or program.time_field
    control_bucket = f"c{len(key_fields) + 2}"
    control_kind = f"c{len(key_fields) + 3}"
    parsed = lines.select(
        F.col("value").alias("line"),
        "origin",
        "control",
        "valid_text",
        F.json_tuple("value", program.time_field, type_field, *key_fields, BUCKET_FIELD, CONTROL_FIELD),
    )
    # A select of its own: each later use of the reading then refers to it instead of evaluating it again.
    parsed = parsed.select("*", event_time_ms_column(F.col("c0")).alias("time_read"))
    parsed = parsed.select("*", in_event_time_range(F.col("time_read")).alias("time_ranged"))
    event_type = F.col("c1") if program.type_field else F.lit("")
    read_time = F.col("time_ranged")
    reserved = ~F.col("control") & (F.col(control_bucket).isNotNull() | F.col(control_kind).isNotNull())
    problem = F.when(~F.col("valid_text"), F.lit(INVALID_TEXT)).when(reserved, F.lit(RESERVED))
    if max_ahead_ms is not None:
        # The batch's wall clock: Spark fixes it per micro-batch and keeps it in the offset log, so a batch
        # re-run after a crash judges its lines exactly as the first run did.
        horizon = F.unix_millis(F.current_timestamp()) + F.lit(max_ahead_ms)
        problem = problem.when(~F.col("control") & (read_time > horizon), F.lit(TIME_AHEAD))
    problem = problem.when(F.col("control"), F.lit(CONTROL))
    parsed = parsed.select(
        "*",
        event_type.alias("etype"),
        F.when(F.col("control"), F.col(control_bucket).try_cast("int")).alias("control_bucket"),
        F.coalesce(problem, F.lit(UNROUTED)).alias("unrouted"),
    )
    # Only an event or a control record has a time for the watermark.
    time_kept = (F.col("unrouted") == UNROUTED) | (F.col("unrouted") == CONTROL)
    parsed = parsed.select(
        "line",
        "origin",
        F.when(time_kept, read_time).alias("ts_ms"),
        "etype",
        *[f"c{i + 2}" for i in range(len(key_fields))],
        "control_bucket",
        "unrouted",
    )
    return parsed


def routed_rows(
    lines: DataFrame,
    program: Program,
    buckets: int,
    bucket_keys: tuple[int, ...] = (),
    max_ahead_ms: int | None = None,
) -> DataFrame:
    """``(bucket, keyset, line, ts_ms, origin)``: one row per grouping of each line, or one unrouted row.

    ``lines`` has ``value``, ``origin`` and ``control`` (true for the engine's own control stream). ``bucket`` is
    the Spark grouping key: ``bucket_keys[b]`` for bucket number ``b`` (the number itself when ``bucket_keys`` is
    empty). ``origin`` (where a record came from, e.g. its Kafka topic, partition and offset) travels along so
    that dead letters and late events can say it. A line gets no event time (it cannot move the watermark) and
    goes unrouted with the code of its problem when its bytes are not UTF-8, when it carries a field reserved
    for control records, or when its time lies more than ``max_ahead_ms`` past the micro-batch's wall clock.
    """
    from pyspark.sql import functions as F

    key_fields = sorted({field for fields in program.keysets for field in fields})
    column = {field: f"c{i + 2}" for i, field in enumerate(key_fields)}
    parsed = _read_routing_fields(lines, program, key_fields, max_ahead_ms)

    def key(keyset: int) -> Column:
        # Same text as Program.key_of: json_tuple renders integers as digits, like Python's str(int).
        parts = [F.col(column[field]) for field in program.keysets[keyset]]
        return parts[0] if len(parts) == 1 else F.concat_ws(KEY_SEPARATOR, *parts)

    def typed(keyset: int) -> Column:
        """The line is an event (it has a time) of a type the keyset's rules consume."""
        types = program.keyset_types(keyset)
        condition = F.col("ts_ms").isNotNull() & (F.col("unrouted") == UNROUTED)
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
            "ts_ms",
            F.when(wanted(0), F.lit(0)).otherwise(F.col("unrouted")).alias("keyset"),
            key(0).alias("key"),
            "control_bucket",
        )
    else:
        candidates = [
            F.when(wanted(ks), F.struct(F.lit(ks).alias("keyset"), key(ks).alias("key")))
            for ks in range(len(program.keysets))
        ]
        unrouted_route = F.struct(F.col("unrouted").alias("keyset"), F.lit(None).cast("string").alias("key"))
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
            "ts_ms",
            F.explode(F.when(F.size(routes) > 0, routes).otherwise(unrouted)).alias("route"),
            "control_bucket",
        ).select(
            "line", "origin", "ts_ms", F.col("route.keyset").alias("keyset"), F.col("route.key").alias("key"),
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
        "ts_ms",
        "origin",
    )


def build_stream(spark: SparkSession, program: Program, spec: QuerySpec) -> DataFrame:
    """The whole streaming plan up to (and including) the stateful processor."""
    from pyspark.sql import functions as F

    no_origin = F.lit(None).cast("string").alias("origin")
    events = spec.source.lines(spark, program.time_field)
    # The engine's own control records (the end-of-input flush, rule logs) come from a second file stream kept
    # inside the checkpoint directory, so they are replayed exactly like input after a restart. Only lines of
    # that stream are control records: input that imitates one is a dead letter.
    control = spark.readStream.text(spec.control_dir).select("value", no_origin, F.lit(True).alias("control"))
    events = events.select("value", "origin", F.lit(False).alias("control"))
    rows = routed_rows(events.unionByName(control), program, spec.buckets, spec.bucket_keys, spec.max_ahead_ms)
    # One row per bucket and Arrow batch instead of one per line and grouping (see sparkcep.spark.packing).
    packed = rows.select(*ROUTED_COLUMNS).mapInArrow(pack_batches, PACKED_DDL)
    with_time = packed.withColumn("ts", F.timestamp_millis("ts_ms"))
    with_watermark = with_time.withWatermark("ts", f"{spec.watermark_delay_ms} milliseconds")
    # Projecting the event-time column away keeps the watermark (timers still fire) but stops Spark from
    # silently dropping rows behind it: the engine sees late lines and reports them in _late/.
    # ts_ms is Spark's own reading of event time (the largest of a packed row's lines), which lets the
    # processor know how far the next watermark is sure to move (see Engine.process).
    stripped = with_watermark.select("bucket", "keysets", "lines", "origins", "ts_ms")
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
