"""Packed rows: what sources hand Spark, one row per bucket and Arrow batch instead of one per line.

A source routes the lines it reads (:mod:`sparkcep.core.routing`) and packs each Arrow batch of them into one
row per bucket: the bucket's Spark grouping key, its rows' keysets, lines, origins and event times (as routing
read them: the engine does not read a line's time again) in order, and the largest time among them that moves
the watermark. The JVM then only moves a few dozen rows per batch through the watermark
and the shuffle, whatever the lines hold, and PySpark's stateful operator regroups rows, not lines (it does that
in Python, row by row).

The watermark is unchanged by packing: Spark takes the largest event time over all rows, and each packed row
carries the largest of its lines. Late lines are not hidden either: the engine judges lateness per line (Spark's
own late-row filter never sees the event-time column, see :mod:`sparkcep.spark.query`).

This module needs pyarrow, not pyspark: it runs in the sources' tasks and in Python workers, and is tested
without Spark.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from sparkcep.core.routing import Routed, Router, RoutingSpec
from sparkcep.io.packed_ddl import PACKED_DDL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PACKED_SCHEMA = pa.schema(
    [
        ("bucket", pa.int32()),
        ("keysets", pa.list_(pa.int32())),
        ("lines", pa.list_(pa.string())),
        ("origins", pa.list_(pa.string())),
        ("ts_ms", pa.int64()),
        ("times", pa.list_(pa.int64())),
    ]
)
# Input of route_batches (a source Spark reads itself): the line or record value, where it came from (JSON text
# or null), and the batch's wall clock in epoch ms (Spark's current_timestamp(), fixed per micro-batch).
LINE_COLUMNS = ("value", "origin", "now_ms")


def pack(routed: Routed, spec: RoutingSpec) -> pa.RecordBatch:
    """One row per bucket of ``routed``, buckets in order; origins are one null per bucket when no line has one."""
    buckets = sorted(routed.rows)
    offsets = [0]
    keysets: list[int] = []
    lines: list[str] = []
    origins: list[str | None] = []
    times: list[int | None] = []
    for bucket in buckets:
        for keyset, line, origin, time in routed.rows[bucket]:
            keysets.append(keyset)
            lines.append(line)
            origins.append(origin)
            times.append(time)
        offsets.append(len(lines))
    offset_array = pa.array(offsets, pa.int32())
    if any(origin is not None for origin in origins):
        origin_lists = pa.ListArray.from_arrays(offset_array, pa.array(origins, pa.string()))
    else:  # files carry no origin: one null per bucket instead of a null per line
        origin_lists = pa.nulls(len(buckets), pa.list_(pa.string()))
    return pa.RecordBatch.from_arrays(
        [
            pa.array([spec.grouping_key(bucket) for bucket in buckets], pa.int32()),
            pa.ListArray.from_arrays(offset_array, pa.array(keysets, pa.int32())),
            pa.ListArray.from_arrays(offset_array, pa.array(lines, pa.string())),
            origin_lists,
            pa.array([routed.max_time.get(bucket) for bucket in buckets], pa.int64()),
            pa.ListArray.from_arrays(offset_array, pa.array(times, pa.int64())),
        ],
        schema=PACKED_SCHEMA,
    )


def packed_batches(
    router: Router,
    lines: Sequence[bytes | str],
    origins: Sequence[str | None] | None,
    now_ms: int | None,
) -> Iterator[pa.RecordBatch]:
    """The packed batch of ``lines`` (nothing for no lines)."""
    routed = router.route(lines, origins, now_ms)
    if routed.rows:
        yield pack(routed, router.spec)


def route_batches(spec_json: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that routes and packs lines Spark read itself (its text file source for old
    checkpoints, the official Kafka connector): Arrow batches of :data:`LINE_COLUMNS` in, packed batches out."""

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        router = Router(RoutingSpec.from_json(spec_json))
        for batch in batches:
            if not batch.num_rows:
                continue
            values = batch.column("value").to_pylist()
            origin_column = batch.column("origin")
            origins = None if origin_column.null_count == batch.num_rows else origin_column.to_pylist()
            now = batch.column("now_ms")[0].as_py()
            yield from packed_batches(router, values, origins, now)

    return route


def pack_in_spark(lines: DataFrame, routing: RoutingSpec) -> DataFrame:
    """Packed rows of a stream of ``value`` (text or bytes) and ``origin`` rows that Spark read itself: routed in a
    Python worker, judged against the micro-batch's wall clock (Spark fixes ``current_timestamp()`` per batch and
    keeps it in the offset log, so a batch run again after a crash judges its lines as the first run did)."""
    from pyspark.sql import functions as F

    rows = lines.select(
        F.col("value").cast("binary").alias("value"),  # the bytes as read: routing flags a line that is not UTF-8
        F.col("origin").cast("string").alias("origin"),
        F.unix_millis(F.current_timestamp()).alias("now_ms"),
    )
    return rows.mapInArrow(route_batches(routing.to_json()), PACKED_DDL)


def unpack(frame: Any, pairs: list[tuple[int, str]], origins: dict[str, str], times: list[int | None]) -> int | None:
    """Append a pandas frame of packed rows to ``(keyset, line)`` pairs and their event times to ``times`` (None:
    routing read none); return the frame's largest event time that moves the watermark.

    ``origins`` gets each line's origin (the first one seen), when the rows carry any.
    """
    largest: int | None = None
    for keysets, lines, line_origins, ts, line_times in zip(
        frame["keysets"], frame["lines"], frame["origins"], frame["ts_ms"], frame["times"], strict=True
    ):
        texts = _as_list(lines)
        pairs.extend(zip(_as_list(keysets), texts, strict=True))
        times.extend(_times(line_times, len(texts)))
        if line_origins is not None:
            for line, origin in zip(texts, _as_list(line_origins), strict=True):
                if isinstance(origin, str):
                    origins.setdefault(line, origin)
        if ts is not None and not math.isnan(ts) and (largest is None or int(ts) > largest):  # NaN: no time
            largest = int(ts)
    return largest


def _times(values: Any, count: int) -> list[int | None]:
    """A ``times`` cell as Python ints and Nones: pandas makes a list of int64 with a null a float array (NaN)."""
    if values is None:
        return [None] * count
    dtype = getattr(values, "dtype", None)
    found = _as_list(values)
    if dtype is not None and dtype.kind == "i":  # no nulls: numpy ints, converted in C
        return found
    return [None if value is None or math.isnan(value) else int(value) for value in found]


def _as_list(values: Any) -> list[Any]:
    """Python values of a list cell (pandas gives numpy arrays; ``tolist`` converts them in C)."""
    return values.tolist() if hasattr(values, "tolist") else list(values)
