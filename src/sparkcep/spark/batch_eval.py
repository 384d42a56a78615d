"""The batch plan of :func:`sparkcep.api.detect`: a bounded DataFrame evaluated without a streaming query.

Why not the streaming plan on a batch frame: transformWithStateInPandas in EventTime mode needs a streaming
frame (the watermark and timers exist only between micro-batches), and one batch would hand a bucket all its
history at once, unsorted. Instead:

1. A ``mapInArrow`` routes every line (the same :class:`sparkcep.core.routing.Router` as the streaming plan) to
   rows of ``(part, bucket, keyset, line, origin, ts)``. Where a bounded run ends (the watermark reaches
   ``max(largest time read - delay, largest accepted event time)``, as ``sparkcep run --until-caught-up`` ends
   with its flush record) needs every line, so each Arrow batch also sends its own largest times to every bucket
   as one statistics row per bucket (keyset :data:`STATS`): a bucket has them all when its rows end, and the
   lines are read and decoded once (a separate aggregate broadcast to the rows read them twice: the batch plan
   was 0.64x the streaming backfill's speed at 1M orders, bench/README.md). A frame of typed columns (a Parquet
   table) is routed by Spark instead where its columns allow (:mod:`sparkcep.spark.typed_routing`): only the rows
   it cannot decide reach the Router, and only the rows near the largest time are decoded for where the run ends,
   on the driver (:func:`end_of_routed`: a pass with Python tasks over the table cost about 4 CPU s at 1M
   orders), whose statistics every bucket starts with.
2. ``repartition(n, "part").sortWithinPartitions("bucket", "ts", "keyset", "line")``: every bucket's rows lie
   together in one partition, in event-time order, with a deterministic tie-break. ``part`` is the bucket's
   balanced grouping key (:mod:`sparkcep.spark.placement`): Spark's hash of the bucket numbers 0..31 puts 20 of
   them in one of two partitions, leaving a core idle for a third of the run. Bucket and time are sorted as one
   number (:func:`_bucket_time_order`), which Spark's sort compares by prefix. Spark's sort spills, so a year of
   history costs disk, not memory.
3. A ``mapInArrow`` runs the pure engine over each bucket's rows, chunk by chunk (an Arrow batch at a time), with
   the streaming run's watermark rule: a chunk is judged against the largest time of the bucket's earlier chunks
   minus the delay and releases what the next watermark is sure to pass. When the bucket's rows end, its state
   advances to the end watermark (the end-of-input flush) and is dropped: memory is one bucket's state.

Rows come in event-time order, so no event is late (as in an aligned bounded run), and the engine's output does
not depend on where chunks end (sparkcep.core.engine): the records equal the streaming run's and the oracle's.

The worker functions need pyarrow, not pyspark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep import native
from sparkcep.core.batch_result import BatchResult
from sparkcep.core.bucket_state import BucketState, collector_paused
from sparkcep.core.engine import NO_WATERMARK, Engine
from sparkcep.core.pages import BucketIndex, PageTraffic
from sparkcep.core.program import Program
from sparkcep.core.routing import Router, RoutingSpec
from sparkcep.rules.model import RuleSet
from sparkcep.spark.detection import DETECTION_DDL, detection_batch
from sparkcep.spark.placement import balanced_bucket_keys
from sparkcep.spark.typed_routing import TypedPlan
from sparkcep.timeutil import MAX_EVENT_TIME_MS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ROUTED_DDL = "part int, bucket int, keyset int, line string, origin string, ts long"
_ROUTED_SCHEMA = pa.schema(
    [("part", pa.int32()), ("bucket", pa.int32()), ("keyset", pa.int32()), ("line", pa.string()),
     ("origin", pa.string()), ("ts", pa.int64())]
)  # fmt: skip
# A statistics row's keyset (no routing keyset is this low): its line is "[largest time read, largest accepted]".
STATS = -100
# How many of the latest rows Spark routed the driver decodes to find where a bounded run ends (a larger run of
# refused rows at the end: the buckets decode them all, as statistics rows).
END_ROWS = 1000


@lru_cache(maxsize=4)
def _program(rules_json: str) -> Program:
    return Program(RuleSet.model_validate_json(rules_json))


def _routes(
    router: Router, values: list[bytes | str], now: int | None
) -> Iterator[tuple[int, int, str, int | None, int]]:
    """``(bucket, keyset, line, time, position)`` of every route of ``values``: what
    :meth:`sparkcep.core.routing.Router.route` does, keeping each line's own time (routing keeps a bucket's largest)."""
    max_ahead = router.spec.max_ahead_ms
    bound = None if now is None or max_ahead is None else now + max_ahead
    for position, raw in enumerate(values):
        line, time, routes = router.read(raw, bound, now)
        for keyset, key in routes:
            yield router.bucket(keyset, key, line), keyset, line, time, position


def _largest_accepted(program: Program, times: pa.Array, keysets: pa.Array, lines: pa.Array) -> int | None:
    """The largest time among routed rows (keyset >= 0) that a rule accepts (the engine decodes the event).

    Decoding costs, so rows are decoded from the latest time down until one is accepted: almost always the first."""
    routed = pc.and_kleene(pc.greater_equal(keysets, 0), pc.is_valid(times))
    times, keysets, lines = times.filter(routed), keysets.filter(routed), lines.filter(routed)
    for index in pc.array_sort_indices(times, order="descending").to_pylist():
        time = times[index].as_py()
        if program.decode(lines[index].as_py(), keysets[index].as_py(), time).event is not None:
            return int(time)
    return None


def _router_rows(router: Router, parts: list[int], batch: pa.RecordBatch, now: int | None) -> pa.RecordBatch:
    """The rows the Router routes: ``batch``'s ``value`` and ``origin`` columns, read line by line in Python."""
    origins = batch.column("origin").to_pylist()
    columns: tuple[list[object], ...] = ([], [], [], [], [], [])
    part_of, buckets, keysets, lines, line_origins, times = columns
    for bucket, keyset, line, time, position in _routes(router, batch.column("value").to_pylist(), now):
        part_of.append(parts[bucket])
        buckets.append(bucket)
        keysets.append(keyset)
        lines.append(line)
        line_origins.append(origins[position])
        times.append(time)
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, _ROUTED_SCHEMA, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=_ROUTED_SCHEMA)


def _stats_rows(parts: list[int], read: int | None, accepted: int | None) -> pa.RecordBatch:
    """One statistics row per bucket: the Arrow batch's largest time read and largest accepted."""
    stats = orjson.dumps([read, accepted]).decode()
    count = len(parts)
    arrays = [
        pa.array(parts, type=pa.int32()), pa.array(range(count), type=pa.int32()),
        pa.array([STATS] * count, type=pa.int32()), pa.array([stats] * count, type=pa.string()),
        pa.nulls(count, type=pa.string()), pa.nulls(count, type=pa.int64()),
    ]  # fmt: skip
    return pa.RecordBatch.from_arrays(arrays, schema=_ROUTED_SCHEMA)


def _largest(*values: int | None) -> int | None:
    return max((v for v in values if v is not None), default=None)


def route_rows(
    rules_json: str, spec_json: str, parts_json: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow``: lines (``value``, ``origin``, ``now_ms``) in; one row per route of a line out, and per
    Arrow batch one statistics row per bucket (see the module docs). ``parts_json``: each bucket's ``part``."""

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        program = _program(rules_json)
        router = Router(RoutingSpec.from_json(spec_json))
        parts: list[int] = orjson.loads(parts_json)
        for batch in batches:
            if not batch.num_rows:
                continue
            now = batch.column("now_ms")[0].as_py()
            routed = _router_rows(router, parts, batch, now)
            read = pc.max(routed.column("ts")).as_py()
            accepted = _largest_accepted(program, routed.column("ts"), routed.column("keyset"), routed.column("line"))
            yield routed
            yield _stats_rows(parts, read, accepted)

    return route


def recent_stats(rules_json: str, parts_json: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow``: routed rows in (the typed plan's ``recent``, sparkcep.spark.typed_routing), only their
    statistics rows out: what :func:`route_rows` sends for the rows Spark routed."""

    def stats(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        program = _program(rules_json)
        parts: list[int] = orjson.loads(parts_json)
        for batch in batches:
            if batch.num_rows:
                times, keysets, lines = batch.column("ts"), batch.column("keyset"), batch.column("line")
                accepted = _largest_accepted(program, times, keysets, lines)
                yield _stats_rows(parts, pc.max(times).as_py(), accepted)

    return stats


class _BucketRun:
    """One bucket's state while its sorted rows go by."""

    def __init__(self, bucket: int) -> None:
        self.bucket = bucket
        self.state = BucketState()
        self.max_seen: int | None = None
        self.max_read: int | None = None  # over every line of the input (its statistics rows)
        self.max_accepted: int | None = None

    def take_stats(self, texts: list[str]) -> None:
        for text in texts:
            read, accepted = orjson.loads(text)
            if read is not None and (self.max_read is None or read > self.max_read):
                self.max_read = read
            if accepted is not None and (self.max_accepted is None or accepted > self.max_accepted):
                self.max_accepted = accepted

    def watermark(self, delay_ms: int) -> int:
        """The watermark the bucket's next chunk is judged against: its earlier chunks' largest time less the delay."""
        return NO_WATERMARK if self.max_seen is None else self.max_seen - delay_ms

    def take(
        self,
        engine: Engine,
        keysets: list[int],
        lines: list[str],
        times: list[int | None],
        origins: dict[str, str],
        delay_ms: int,
    ) -> BatchResult:
        """One chunk of the bucket's rows (``times``: routing's reading, which the engine does not repeat),
        released up to what the next watermark is sure to pass."""
        top = max((t for t in times if t is not None), default=None)
        safe = NO_WATERMARK if top is None else top - delay_ms
        rows = list(zip(keysets, lines, strict=True))
        result = engine.process(self.state, rows, self.watermark(delay_ms), safe, origins, times)
        if top is not None and (self.max_seen is None or top > self.max_seen):
            self.max_seen = top
        return result

    def end(self, delay_ms: int) -> int | None:
        """Where the bounded run ends: ``max(largest time read - delay, largest accepted)`` (None: no time at all)."""
        ends = [
            t for t in (self.max_accepted, None if self.max_read is None else self.max_read - delay_ms) if t is not None
        ]
        return max(ends) if ends else None


def _result_rows(
    result: BatchResult, program: Program, watermark: int, origins: dict[str, str], fields: dict[str, tuple[str, ...]]
) -> pa.RecordBatch:
    """A chunk's result rows. Outputs go straight to result rows (their records are JSON values already: the JSON
    text that result_frame would make is not read back); the rest, rare, goes the streaming plan's way, and only
    when there is any (result_frame's pandas frame would hold a metrics row alone, which is dropped here)."""
    from sparkcep.spark.processor import result_frame  # the same records as a streaming run's

    records, result.outputs = result.outputs, []
    kinds: list[str] = []
    payloads: list[str] = []
    if result.late or result.dead or result.errors:
        frame = result_frame(result, program, watermark, BucketIndex(), PageTraffic(), 0.0, origins)
        kinds, payloads = list(frame["kind"]), list(frame["payload"])
    return detection_batch(kinds, payloads, fields, records=records)


def evaluate_sorted(
    rules_json: str, delay_ms: int, key_fields_json: str, stats_json: str = "[null, null]"
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` over rows sorted by (bucket, ts, ...), statistics rows included: result rows out.
    ``stats_json``: statistics every bucket starts with (``[largest time read, largest accepted]``), those of
    the rows the driver looked at (:func:`end_of_routed`)."""
    driver_compiled = native.why_not() is None  # here on the driver; evaluate runs in the workers

    def evaluate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        native.check_worker(driver_compiled)
        program = _program(rules_json)
        engine = Engine(program)
        fields = {rule: tuple(names) for rule, names in orjson.loads(key_fields_json).items()}
        current: _BucketRun | None = None

        def begin(bucket: int) -> _BucketRun:
            run = _BucketRun(bucket)
            run.take_stats([stats_json])
            return run

        def emit(result: BatchResult, watermark: int, origins: dict[str, str]) -> pa.RecordBatch:
            return _result_rows(result, program, watermark, origins, fields)

        def finish(run: _BucketRun) -> pa.RecordBatch | None:
            end = run.end(delay_ms)
            if end is None:
                return None
            final = max(end, run.watermark(delay_ms))
            return emit(engine.process(run.state, [], final), final, {})

        with collector_paused():
            for batch in batches:
                if not batch.num_rows:
                    continue
                bucket_column = batch.column("bucket")
                keysets = batch.column("keyset").to_pylist()
                lines = batch.column("line").to_pylist()
                # A typed frame's rows have no origin (and no column of it): no dict of them per chunk then.
                origin_column = batch.column("origin") if "origin" in batch.schema.names else None
                origins = None
                if origin_column is not None and origin_column.null_count < batch.num_rows:
                    origins = origin_column.to_pylist()
                times = batch.column("ts").to_pylist()
                for start, stop in _runs(bucket_column):  # one chunk per run of one bucket within the Arrow batch
                    bucket = bucket_column[start].as_py()
                    if current is None or current.bucket != bucket:
                        if current is not None and (done := finish(current)) is not None:
                            yield done
                        current = begin(bucket)
                    # Statistics rows come first in a bucket (a null time sorts first).
                    first = start
                    while first < stop and keysets[first] == STATS:
                        first += 1
                    if first > start:
                        current.take_stats(lines[start:first])
                        if first == stop:
                            continue
                    chunk_origins = {}
                    if origins is not None:
                        chunk_origins = {
                            ln: o for ln, o in zip(lines[first:stop], origins[first:stop], strict=True) if o
                        }
                    watermark = current.watermark(delay_ms)
                    result = current.take(engine, keysets[first:stop], lines[first:stop], times[first:stop],
                                          chunk_origins, delay_ms)  # fmt: skip
                    yield emit(result, watermark, chunk_origins)
            if current is not None and (done := finish(current)) is not None:
                yield done

    return evaluate


def _runs(values: pa.Array) -> list[tuple[int, int]]:
    """``(start, stop)`` of each run of equal values (a bucket's rows: they are sorted by bucket)."""
    count = len(values)
    if count == 0:
        return []
    changed = pc.not_equal(values.slice(1), values.slice(0, count - 1))
    starts = [0, *(index + 1 for index in pc.indices_nonzero(changed).to_pylist())]
    return list(zip(starts, [*starts[1:], count], strict=True))


def bucket_parts(routing: RoutingSpec, partitions: int) -> list[int]:
    """Each bucket's ``part``: its balanced grouping key over ``partitions`` (sparkcep.spark.placement)."""
    return list(balanced_bucket_keys(routing.buckets, partitions))


def evaluate_batch(
    lines: DataFrame | TypedPlan,
    program: Program,
    routing: RoutingSpec,
    delay_ms: int,
    partitions: int,
    key_fields_json: str,
) -> DataFrame:
    """The batch plan over ``lines`` (``value`` binary or text, ``origin`` string, ``now_ms`` long), or over a typed
    frame's :class:`~sparkcep.spark.typed_routing.TypedPlan` for the same partitions: result rows."""
    rules_json, spec_json = program.rules.to_json(), routing.to_json()
    parts = orjson.dumps(bucket_parts(routing, partitions)).decode()
    stats_json = "[null, null]"
    if isinstance(lines, TypedPlan):
        routed = lines.routed
        if lines.lines is not None:
            routed = routed.unionByName(lines.lines.mapInArrow(route_rows(rules_json, spec_json, parts), ROUTED_DDL))
        end = end_of_routed(program, lines)
        if end is None:  # the driver found no accepted row among the latest: the buckets learn it from the rows
            routed = routed.unionByName(lines.recent.mapInArrow(recent_stats(rules_json, parts), ROUTED_DDL))
        else:
            stats_json = orjson.dumps(end).decode()
    else:
        routed = lines.mapInArrow(route_rows(rules_json, spec_json, parts), ROUTED_DDL)
    ordered = routed.repartition(partitions, "part").sortWithinPartitions(*_bucket_time_order(routing.buckets))
    # Only the columns the engine reads: Spark writes each row into the Arrow batch field by field and measures the
    # batch after every row (a cost per column and row); a typed frame's rows have no origin.
    needed = (
        ["bucket", "keyset", "line", "ts"]
        if isinstance(lines, TypedPlan)
        else ["bucket", "keyset", "line", "origin", "ts"]
    )
    evaluate = evaluate_sorted(rules_json, delay_ms, key_fields_json, stats_json)
    return ordered.select(*needed).mapInArrow(evaluate, DETECTION_DDL)


# Bits of a time in the sort key of _bucket_time_order: every event time (0 .. MAX_EVENT_TIME_MS) plus one fits.
_TIME_BITS = 44


def _bucket_time_order(buckets: int) -> list[Column | str]:
    """The order of a partition's rows: by bucket, then time (statistics rows, without one, first), keyset and line.

    Spark's sort compares the first key's 8-byte prefix and the whole rows only where prefixes tie: bucket alone
    in front, nearly every comparison of 10M rows went to the whole rows. Bucket and time as one number in front
    (``bucket * 2^44 + time + 1``, 0 for no time) order the same way and tie only where both do."""
    from pyspark.sql import functions as F

    assert MAX_EVENT_TIME_MS + 1 < 1 << _TIME_BITS
    if buckets > 1 << (63 - _TIME_BITS):  # the number would not fit in a long: the same order, key by key
        return ["bucket", "ts", "keyset", "line"]
    time = F.coalesce(F.col("ts") + F.lit(1), F.lit(0))
    return [F.col("bucket").cast("long") * F.lit(1 << _TIME_BITS) + time, "keyset", "line"]


def end_of_routed(program: Program, plan: TypedPlan, limit: int = END_ROWS) -> tuple[int | None, int | None] | None:
    """``(largest time read, largest accepted)`` of the rows Spark routed, found on the driver from the latest
    ``limit`` of its ``recent`` rows (one top-k pass over the table, no Python task); None when none of them is
    accepted and there are more, so that the buckets find it from every recent row (:func:`recent_stats`)."""
    from pyspark.sql import functions as F

    if plan.largest is None:
        return None, None
    recent = plan.recent.where(F.col("keyset") >= 0).select("keyset", "line", "ts")
    rows = recent.orderBy(F.col("ts").desc()).limit(limit).collect()
    read = max([plan.largest, *(row["ts"] for row in rows)])  # unrouted rows (keyset < 0) are read too
    for keyset, line, time in rows:
        if program.decode(line, keyset, time).event is not None:
            return read, time
    return (read, None) if len(rows) < limit else None
