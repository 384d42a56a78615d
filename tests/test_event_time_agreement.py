"""One reading of event time: Spark's routing (the watermark) and the engine (the events) agree on every value.

A time one side reads and the other does not moves the watermark for an event the engine refuses, or keeps
an accepted event from moving it. Both sides are fed one adversarial corpus, generated and hand-picked, and
must give the same epoch milliseconds or the same "no time" for every line.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.timeutil import MAX_EVENT_TIME_MS, format_iso, parse_event_time, read_event_time

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HAND_PICKED: list[object] = [
    "2024-01-01T00:00:00.000Z", "2024-01-01T00:00:00.250Z", "2024-01-01", "2024-01-01T06:00",
    "2024-01-01T06:00:01", "2024-01-01 06:00:01.5", "2024-01-01t06:00:01,123456789z", "2024-01-01T06:00+02:00",
    "2024-01-01T06:00:00-0530", "2024-01-01T06:00:00+05", "2024-02-29T00:00:00.000Z", "2023-02-29T00:00:00.000Z",
    "2024-02-30T00:00:00.000Z", "2024-13-01T00:00:00Z", "2024-00-10T00:00:00Z", "2024-01-00T00:00:00Z",
    "2024-01-01T24:00:00Z", "2024-01-01T23:60:00Z", "2024-01-01T23:59:60Z", "2024-01-01X06:00:00.000Z",
    "2024-01-01T06:00:00.000Z\n", " 2024-01-01T06:00:00.000Z", "2024-01-01T06:00:00.000Z ", "2024-1-1T06:00:00Z",
    "9999", "2030", "0", "-1", "1704067200000", " 1704067200000", "+1704067200000", "1704067200000.0", "1e12",
    "9999-12-31T23:59:59.999Z", "2261-12-31T23:59:59.999Z", "2262-01-01T00:00:00.000Z", "1970-01-01T00:00:00.000Z",
    "1969-12-31T23:59:59.999Z", "1970-01-01T00:00:00+00:01", "1970-01-01T00:59:00-01:00", "0001-01-01T00:00:00Z",
    "0000-01-01T00:00:00Z", "+10000-01-01T00:00:00Z", "2024-01-01T06:00:00+24:00", "2024-01-01T06:00:00+23:59",
    "2024-W01-1", "20240101T060000Z", "2024-001", "", "T", "now", "null", "true", "2024-01-01T06:00:00.000Z\u0000",
    "\uff12\uff10\uff12\uff14-01-01T06:00:00Z", "2024-01-01T06:00:00.000+", "2024-01-01T06:00:00.000Zjunk",
    "99999999999999999999", "9214646399999", "9214646400000", "-0",
    0, 1, -1, 2030, 1704067200000, 10**15, 10**18, 2**63 - 1, -(2**63), 9_214_646_399_999, 9_214_646_400_000,
    1.5, 1e12, True, False, None, [], {}, [1704067200000], {"t": 1},
]  # fmt: skip


def _generated(seed: int, count: int) -> list[object]:
    """Mutations of well-formed times: each character replaced, dropped or doubled, fields pushed past their ranges."""
    rng = random.Random(seed)
    base = datetime(1965, 1, 1, tzinfo=UTC)
    values: list[object] = []
    alphabet = "0123456789-:T Zz+.,tX/\n"
    for _ in range(count):
        moment = base + timedelta(milliseconds=rng.randrange(0, 320 * 365 * 86_400_000))
        text = moment.strftime("%Y-%m-%dT%H:%M:%S") + rng.choice(["", ".5", ".123", ".123456", "Z", ".250Z", "+01:00"])
        chars = list(text)
        position = rng.randrange(len(chars))
        action = rng.randrange(4)
        if action == 0:
            chars[position] = rng.choice(alphabet)
        elif action == 1:
            del chars[position]
        elif action == 2:
            chars.insert(position, chars[position])
        values.append("".join(chars))
        values.append(rng.randrange(-(10**14), 10**14))
    return values


def _lines(values: list[object]) -> list[str]:
    return [json.dumps({"t": value}) for value in values]


def _python_reading(line: str) -> int | None:
    return read_event_time(orjson.loads(line).get("t"))


def test_spark_and_the_engine_read_every_time_alike(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    from sparkcep.spark.query import event_time_ms_column, in_event_time_range

    lines = _lines(HAND_PICKED + _generated(7, 3000))
    frame = spark.createDataFrame([(i, line) for i, line in enumerate(lines)], "i int, value string")
    read = (
        frame.select("i", F.json_tuple("value", "t").alias("raw"))
        .select("i", event_time_ms_column(F.col("raw")).alias("read"))
        .select("i", in_event_time_range(F.col("read")).alias("ms"))
    )
    spark_reading = {row["i"]: row["ms"] for row in read.collect()}
    disagreements = [
        (line, spark_reading[i], _python_reading(line))
        for i, line in enumerate(lines)
        if spark_reading[i] != _python_reading(line)
    ]
    assert disagreements == []
    accepted = sum(1 for ms in spark_reading.values() if ms is not None)
    assert 1000 < accepted < len(lines) - 1000  # the corpus really tests both answers


@settings(max_examples=300, derandomize=True)
@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2261, 12, 31, 23, 59, 59)))
def test_iso_text_reads_as_datetime_does(moment: datetime) -> None:
    as_utc = moment.replace(tzinfo=UTC)
    expected = (as_utc - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    assert parse_event_time(as_utc.isoformat()) == expected
    assert parse_event_time(format_iso(expected)) == expected
    shifted = as_utc.astimezone(__import__("datetime").timezone(timedelta(hours=-7, minutes=-30)))
    if shifted.year >= 1:
        assert read_event_time(shifted.isoformat()) in (expected, None)


@pytest.mark.parametrize(
    "value",
    ["9999", "2030"],
)
def test_digit_text_is_epoch_milliseconds_not_a_year(value: str) -> None:
    assert parse_event_time(value) == int(value)


@pytest.mark.parametrize(
    "value",
    [-1, "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "+10000-01-01T00:00:00Z", 10**15, 10**18,
     MAX_EVENT_TIME_MS + 1, "2024-01-01X06:00:00.000Z"],
)  # fmt: skip
def test_times_outside_the_supported_range_or_grammar_are_refused(value: object) -> None:
    assert read_event_time(value) is None
