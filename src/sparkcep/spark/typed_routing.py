"""Routing a typed frame's rows with Spark expressions: the batch plan without a JSON parse per line to route.

A frame of typed columns (a Parquet table) holds the time, the event type and the key fields as columns, so its
rows' buckets, groupings and times can be computed by Spark, in the JVM, instead of parsing each row's JSON text in
Python (:meth:`sparkcep.core.routing.Router.read`, about 40 % of the batch plan's time at 1M orders).

The routing rules stay exactly the engine's: a row takes this path only where the answer is the one the Router
would give its JSON text (``to_json`` of the row, which the engine still reads), and every other row is routed by
the Router itself (:func:`sparkcep.spark.batch_eval.route_rows`):

- time: a ``timestamp`` column (``to_json`` writes it as ISO-8601 in UTC with milliseconds, which the time grammar
  reads as ``unix_millis``) or an integer column (epoch ms as is), within the engine's range and, when the run
  bounds it, not beyond the batch's wall clock plus ``max_ahead_ms``;
- event type: a non-null ``string`` column (compared as the Router does, byte for byte);
- keys: for every grouping that takes the event type, each key field a non-null ``string`` column without
  U+001F or an integer column (the Router's ``require_key``); its text is the grouping's number, U+001F and
  the fields' texts joined by U+001F, and the bucket that text's CRC-32 modulo the buckets (``zlib.crc32``
  and Spark's ``crc32`` are the same function);
- a row that no grouping takes goes unrouted once, in the bucket of its JSON text's CRC-32, with its time.

A frame for which this cannot be decided column by column (arrival time, a column named like a control field,
column names that differ only in case, a time, type or bucket function of another kind) is routed wholly by
the Router: :func:`typed_plan` returns None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkcep.arrival import is_arrival
from sparkcep.core.control import BUCKET_FIELD, CONTROL_FIELD
from sparkcep.core.logic import KEY_SEPARATOR
from sparkcep.core.routing import CRC32, UNROUTED, RoutingSpec
from sparkcep.timeutil import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


def quoted(name: str) -> str:
    """A column reference that Spark reads as this one top-level name: unquoted, ``a.b`` would name the field b of
    a column a, and a typed frame's column may be called ``a.b`` (backticks in the name are doubled)."""
    return "`" + name.replace("`", "``") + "`"


def _column(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(quoted(name))


def _routable(types: dict[str, str], routing: RoutingSpec, names: list[str]) -> bool:
    """Whether Spark can route the frame at all (else the Router routes every row)."""
    return not (
        is_arrival(routing.time_field)
        or routing.bucket_function != CRC32
        or len({name.lower() for name in names}) != len(names)  # Spark resolves names without regard to case
        or CONTROL_FIELD in types
        or BUCKET_FIELD in types
        or types.get(routing.time_field) not in ("timestamp", *_INTEGRAL)
        or (routing.type_field is not None and types.get(routing.type_field) != "string")
    )


def _time(types: dict[str, str], routing: RoutingSpec, now: Column) -> tuple[Column, Column]:
    """The event time in epoch ms, and whether the Router would read that time and let it move the watermark."""
    from pyspark.sql import functions as F

    column = _column(routing.time_field)
    time = F.unix_millis(column) if types[routing.time_field] == "timestamp" else column.cast("bigint")
    fast = time.isNotNull() & time.between(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS)
    if routing.max_ahead_ms is not None:
        fast = fast & (time <= now + F.lit(routing.max_ahead_ms))
    return time, fast


def _grouping(
    types: dict[str, str], keyset: int, fields: tuple[str, ...], takes: Column, buckets: int
) -> tuple[Column, Column]:
    """A grouping's route (null where it does not take the row's type), and whether every key field is a key as
    the Router reads it (``require_key``)."""
    from pyspark.sql import functions as F

    keyed, texts = F.lit(True), []
    for field in fields:
        field_type = types.get(field)
        if field_type == "string":
            keyed = keyed & _column(field).isNotNull() & ~_column(field).contains(KEY_SEPARATOR)
            texts.append(_column(field))
        elif field_type in _INTEGRAL:
            keyed = keyed & _column(field).isNotNull()
            texts.append(_column(field).cast("string"))
        else:  # missing, or a type the Router never keys by: the Router says why
            keyed = F.lit(False)
    text = F.concat(F.lit(f"{keyset}{KEY_SEPARATOR}"), F.concat_ws(KEY_SEPARATOR, *texts))
    bucket = F.pmod(F.crc32(text.cast("binary")), F.lit(buckets)).cast("int")
    return F.when(takes, F.struct(F.lit(keyset).alias("keyset"), bucket.alias("bucket"))), keyed


@dataclass(frozen=True)
class TypedPlan:
    """A typed frame's rows for the batch plan, in frames that each read the table again, only the columns they
    need (Spark computes a row's JSON text only where that text is used):

    - ``routed``: the rows Spark routes, one per route, as the batch plan's routed rows (``ROUTED_DDL``);
    - ``lines``: the other rows' JSON text, for the Router (``value``, ``origin``, ``now_ms``); None when there
      are none (counted with ``largest``), so that no task reads the table for nothing;
    - ``recent``: the routed rows whose time lies within the watermark delay of ``largest``: where the bounded
      run ends needs the largest time a rule accepts only when it lies there, so only these rows are decoded for
      it (sparkcep.spark.batch_eval.end_of_routed), not every row;
    - ``largest``: the largest time among the routed rows (None: no row is routed by Spark).
    """

    routed: DataFrame
    lines: DataFrame | None
    recent: DataFrame
    largest: int | None


def typed_plan(
    events: DataFrame, value: Column, routing: RoutingSpec, parts: list[int], delay_ms: int
) -> TypedPlan | None:
    """``events`` routed by Spark where its columns allow (see the module docs); ``value``: the rows' JSON text;
    ``parts``: each bucket's grouping key. None: the frame is for the Router alone."""
    from pyspark.sql import functions as F

    types = dict(events.dtypes)
    if not _routable(types, routing, list(events.columns)):
        return None
    now = F.unix_millis(F.current_timestamp())
    time, fast = _time(types, routing, now)
    event_type = None if routing.type_field is None else _column(routing.type_field)
    if event_type is not None:
        fast = fast & event_type.isNotNull()
    routes: list[Column] = []
    for keyset, (fields, taken) in enumerate(zip(routing.keysets, routing.keyset_types, strict=True)):
        if taken is None:
            takes = F.lit(True)
        elif event_type is None:
            takes = F.lit("" in taken)  # no type field: every event's type is ""
        else:
            takes = event_type.isin(list(taken))
        route, keyed = _grouping(types, keyset, fields, takes, routing.buckets)
        fast = fast & (~takes | keyed)  # a grouping that takes the row but cannot key it: the Router says why
        routes.append(route)
    fast = F.coalesce(fast, F.lit(False))

    unrouted = F.array(
        F.struct(
            F.lit(UNROUTED).alias("keyset"),
            F.pmod(F.crc32(value.cast("binary")), F.lit(routing.buckets)).cast("int").alias("bucket"),
        )
    )
    if routes:
        taken_routes = F.filter(F.array(*routes), lambda route: route.isNotNull())
        routed_routes = F.when(F.size(taken_routes) > 0, taken_routes).otherwise(unrouted)
    else:
        routed_routes = unrouted
    part_of = F.array(*[F.lit(part) for part in parts])

    def routed(rows: DataFrame) -> DataFrame:
        if len(routes) == 1:  # one grouping (the common case): one route per row, without an array to explode
            route = F.coalesce(routes[0], unrouted[0])
            exploded = rows.select(value.alias("line"), time.alias("ts"), route.alias("route"))
        else:
            exploded = rows.select(value.alias("line"), time.alias("ts"), F.explode(routed_routes).alias("route"))
        return exploded.select(
            F.element_at(part_of, F.col("route.bucket") + 1).alias("part"),
            F.col("route.bucket").alias("bucket"),
            F.col("route.keyset").alias("keyset"),
            "line",
            F.lit(None).cast("string").alias("origin"),
            "ts",
        )

    fast_rows = events.where(fast)
    # One pass over the table for both: the largest routed time, and whether any row is left for the Router.
    largest, slow = events.select(F.max(F.when(fast, time)), F.count_if(~fast)).first() or (None, 0)
    recent = routed(fast_rows.where(time >= F.lit(largest) - F.lit(delay_ms)))
    lines = None
    if slow:
        lines = events.where(~fast).select(
            value.alias("value"), F.lit(None).cast("string").alias("origin"), now.alias("now_ms")
        )
    return TypedPlan(routed(fast_rows), lines, recent, largest)
