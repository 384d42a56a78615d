"""Typed columns routed by Spark (sparkcep.spark.typed_routing) route every row as the Router routes its JSON text.

The Router (sparkcep.core.routing) is the contract: the rows Spark routes must land in the same bucket, grouping
and time, and every row Spark cannot decide must reach the Router; detect() on the typed frame and on the same
rows as JSON text give the same outputs and dead letters with the same reasons.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from sparkcep.api import detect
from sparkcep.api_input import event_lines, typed_json, with_clock
from sparkcep.core.program import Program
from sparkcep.rules.model import load_rules
from sparkcep.spark import batch_eval
from sparkcep.spark.batch_eval import ROUTED_DDL, STATS, bucket_parts, end_of_routed, route_rows
from sparkcep.spark.typed_routing import typed_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RULES = load_rules(Path(__file__).resolve().parents[2] / "examples" / "patterns.rules.json")  # two groupings
SCHEMA = "event_type string, event_id string, occurred_at timestamp, card_id string, user_id bigint, amount double"
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def typed_rows() -> list[tuple[Any, ...]]:
    """Rows of every kind routing tells apart: routed by both groupings, by one, unkeyed, untyped, untimed, too
    early, too far ahead, keys Spark and Python write alike (negative integers, non-ASCII text)."""
    rows: list[tuple[Any, ...]] = []
    for i in range(60):
        at = T0 + timedelta(seconds=7 * i, microseconds=123_456 * (i % 3))
        rows.append(("PAYMENT", f"p{i}", at, f"card-{i % 7}", 1000 + i % 5, float(i % 11) * 9.5))
        rows.append(("LOGIN", f"l{i}", at, None, -(i % 4), None))
        rows.append(("TWO_FACTOR_OK" if i % 2 else "UNKNOWN_TYPE", f"t{i}", at, None, i % 4, None))
    rows += [
        ("PAYMENT", "nocard", T0, None, 7, 3.0),  # one grouping cannot key it: routed once, unrouted once
        ("PAYMENT", "sep", T0, "a\x1fb", 7, 3.0),  # a key with the key separator
        ("PAYMENT", "ünï", T0, "kärtchen-☃", 8, 4.0),
        (None, "untyped", T0, "c", 1, 1.0),
        ("PAYMENT", "untimed", None, "c", 1, 1.0),
        ("PAYMENT", "early", datetime(1969, 12, 31, 23, 0, tzinfo=UTC), "c", 1, 1.0),
        ("PAYMENT", "ahead", datetime(2200, 1, 1, tzinfo=UTC), "c", 1, 1.0),
        ("LOGIN", "nouser", T0, None, None, None),
    ]
    return rows


def without_stats(frame: DataFrame) -> list[tuple[Any, ...]]:
    rows = frame.where(frame["keyset"] != STATS).collect()
    return sorted((tuple(row) for row in rows), key=repr)


def test_spark_routes_each_row_as_the_router_routes_its_json_text(spark: SparkSession) -> None:
    frame = spark.createDataFrame(typed_rows(), SCHEMA)
    program = Program(RULES)
    routing = program.routing(8, max_ahead_ms=3_600_000)
    parts = bucket_parts(routing, 2)
    route = route_rows(program.rules.to_json(), routing.to_json(), orjson.dumps(parts).decode())

    by_router = with_clock(event_lines(frame, None)).mapInArrow(route, ROUTED_DDL)
    plan = typed_plan(frame, typed_json(frame), routing, parts, 5000)
    assert plan is not None
    assert plan.lines is not None  # some rows are for the Router
    by_spark = plan.routed.unionByName(plan.lines.mapInArrow(route, ROUTED_DDL))

    expected = without_stats(by_router)
    assert without_stats(by_spark) == expected
    assert plan.routed.count() > 0.9 * len(expected)  # the Router routed only the rows Spark could not decide


def test_typed_and_json_text_give_the_same_outputs_and_dead_letters(spark: SparkSession, tmp_path: Path) -> None:
    frame = spark.createDataFrame(typed_rows(), SCHEMA)
    frame.write.parquet(str(tmp_path / "typed"))
    typed = spark.read.parquet(str(tmp_path / "typed"))
    as_text = typed.select(typed_json(typed).alias("value"))
    results = []
    for events in (typed, as_text):
        found = detect(events, RULES, buckets=8, max_time_ahead="1h").frame
        rows = found.select("kind", "rule_id", "reason", "record").collect()
        results.append(sorted((tuple(row) for row in rows), key=repr))
    assert results[0] == results[1]
    kinds = {row[0] for row in results[0]}
    assert {"output", "dead_letter"} <= kinds, kinds
    reasons = " ".join(str(row[2]) for row in results[0] if row[0] == "dead_letter")
    assert "max time ahead" in reasons and "'card_id'" in reasons, reasons


ORDERS = load_rules(Path(__file__).resolve().parents[2] / "examples" / "orders.rules.json")
ORDERS_SCHEMA = "event_type string, event_id string, occurred_at timestamp, order_number string, parcels_to_ship bigint"


def orders_rows(last_count: int) -> list[tuple[Any, ...]]:
    """Orders whose deadlines pass at the end of the run; the latest event's count is ``last_count``."""
    rows: list[tuple[Any, ...]] = [
        ("ORDER_CREATED", f"o{i}", T0 + timedelta(days=i), f"order-{i}", 2) for i in range(10)
    ]
    rows.append(("ORDER_CREATED", "last", T0 + timedelta(days=20), "order-last", last_count))
    return rows


def test_the_driver_finds_where_the_run_ends_from_the_latest_routed_rows(spark: SparkSession) -> None:
    frame = spark.createDataFrame(orders_rows(0), ORDERS_SCHEMA)  # the latest row is refused: no parcel to ship
    program = Program(ORDERS)
    routing = program.routing(4)
    plan = typed_plan(frame, typed_json(frame), routing, bucket_parts(routing, 2), 5000)
    assert plan is not None and plan.lines is None  # Spark routes every row: no task reads the table for the Router
    last = int((T0 + timedelta(days=20)).timestamp() * 1000)
    accepted = int((T0 + timedelta(days=9)).timestamp() * 1000)
    # The rows within the delay of the largest time are all refused: the largest accepted is not among them.
    assert end_of_routed(program, plan) == (last, None)
    assert end_of_routed(program, plan, limit=1) is None  # more rows than looked at: the buckets must decide
    accepted_plan = typed_plan(frame.where("event_id != 'last'"), typed_json(frame), routing, [0, 1, 0, 1], 5000)
    assert accepted_plan is not None and end_of_routed(program, accepted_plan) == (accepted, accepted)


@pytest.mark.parametrize("last_count", [1, 0])
def test_the_end_found_on_the_driver_and_by_the_buckets_give_the_same_outputs(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, last_count: int
) -> None:
    frame = spark.createDataFrame(orders_rows(last_count), ORDERS_SCHEMA)
    results = []
    for by_buckets in (False, True):
        if by_buckets:
            monkeypatch.setattr(batch_eval, "end_of_routed", lambda program, plan: None)
        rows = detect(frame, ORDERS, buckets=4).frame.select("kind", "rule_id", "reason", "record").collect()
        results.append(sorted((tuple(row) for row in rows), key=repr))
    assert results[0] == results[1]
    assert sum(1 for row in results[0] if row[0] == "output") >= 10, results[0]  # the deadlines passed at the end


def test_a_column_name_with_a_dot_is_one_column(spark: SparkSession) -> None:
    """``order.note`` is a column of its own (not the field ``note`` of a column ``order``): its row's JSON text
    names it as it is, and the rules see the rest of the row."""
    schema = ORDERS_SCHEMA + ", `order.note` string, `back``tick` string"
    frame = spark.createDataFrame([(*row, "gift", "x") for row in orders_rows(1)], schema)
    lines = [orjson.loads(row[0]) for row in frame.select(typed_json(frame)).collect()]
    assert all(line["order.note"] == "gift" and line["back`tick"] == "x" for line in lines), lines[:1]
    found = detect(frame, ORDERS, buckets=4).frame
    assert found.where("kind = 'output'").count() >= 10
    assert found.where("kind = 'dead_letter'").count() == 0


def test_bucket_and_time_as_one_sort_key_order_as_the_keys_one_by_one(spark: SparkSession) -> None:
    """The batch plan sorts by ``bucket * 2^44 + time + 1`` (0 without a time) where that fits a long: the same order
    as bucket, time (none first), keyset and line, at the ends of the time range too."""
    from sparkcep.spark.batch_eval import _bucket_time_order
    from sparkcep.timeutil import MAX_EVENT_TIME_MS

    times = [None, 0, 1, 2, 1_709_294_400_000, MAX_EVENT_TIME_MS - 1, MAX_EVENT_TIME_MS]
    rows = [
        (bucket, keyset, f"line-{(bucket * 7 + index) % 5}", time)
        for bucket in (0, 1, 5, 31)
        for index, time in enumerate(times * 2)
        for keyset in (STATS, -1, 0, 2)
    ]
    frame = spark.createDataFrame(rows, "bucket int, keyset int, line string, ts long").repartition(3)
    one_by_one = [tuple(r) for r in frame.coalesce(1).sortWithinPartitions(*_bucket_time_order(1 << 20)).collect()]
    combined = [tuple(r) for r in frame.coalesce(1).sortWithinPartitions(*_bucket_time_order(32)).collect()]
    assert _bucket_time_order(1 << 20) == ["bucket", "ts", "keyset", "line"]  # too many buckets for one long
    assert combined == one_by_one
    assert one_by_one == sorted(rows, key=lambda r: (r[0], r[3] is not None, r[3] or 0, r[1], r[2]))
