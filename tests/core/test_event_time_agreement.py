"""One reading of event time: routing (the watermark) and the engine (the events) agree on every value.

A time one side reads and the other does not moves the watermark for an event the engine refuses, or keeps
an accepted event from moving it. Both sides are fed one adversarial corpus, generated and hand-picked, and
must give the same epoch milliseconds or the same "no time" for every line: routing as a run does it (in the
file reader's Spark tasks) and as the pure core does it.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.core.program import Program
from sparkcep.core.routing import Router, RoutingSpec
from sparkcep.rules.model import parse_rules
from sparkcep.timeutil import MAX_EVENT_TIME_MS, format_iso, parse_event_time, read_event_time, read_formatted

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Every line with a readable time is an event of this rule (any type, key "t"): routed, so the engine decodes it.
RULES = {
    "input": {"time_field": "t"},
    "rules": [
        {
            "id": "offline",
            "type": "inactivity",
            "key": "t",
            "event_types": ["*"],
            "timeout": "1m",
            "offline_event": "OFF",
            "online_event": "ON",
        }
    ],
}

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


def _lines_of_one_line_each(spark: SparkSession, directory: Path, routing: RoutingSpec) -> list[tuple[str, int | None]]:
    """Every packed row sparkcep's file reader gives Spark for ``directory``, one line a row: (line, its time)."""
    from sparkcep.io.file_reader import SOURCE_NAME, FilesDataSource

    spark.dataSource.register(FilesDataSource)
    options = {"path": str(directory), "routing": routing.to_json(), "packlines": "1", "maxfilespertrigger": "1"}
    stream = spark.readStream.format(SOURCE_NAME).options(**options).load()
    rows: list[tuple[str, int | None]] = []

    def collect(frame: DataFrame, _batch: int) -> None:
        for row in frame.collect():
            assert len(row["lines"]) == 1
            assert row["times"] == [row["ts_ms"]]  # the time shipped for the engine is the watermark's
            rows.append((row["lines"][0], row["ts_ms"]))

    stream.writeStream.foreachBatch(collect).trigger(availableNow=True).start().awaitTermination()
    return rows


def test_routing_at_the_source_and_the_engine_read_every_time_alike(spark: SparkSession, tmp_path: Path) -> None:
    """Through the path a run takes: the lines of a file read and routed by sparkcep's reader in a Spark task, the
    time each packed row gives the watermark against the engine's reading of the same line."""
    lines = _lines(HAND_PICKED + _generated(7, 3000))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    routing = Program(parse_rules(RULES)).routing(buckets=4)
    read = _lines_of_one_line_each(spark, tmp_path / "in", routing)
    assert sorted(line for line, _ in read) == sorted(lines)  # every line once: one keyset, no blank line
    disagreements = [(line, ms, _python_reading(line)) for line, ms in read if ms != _python_reading(line)]
    assert disagreements == []
    accepted = sum(1 for _, ms in read if ms is not None)
    assert 1000 < accepted < len(lines) - 1000  # the corpus really tests both answers


def test_routing_and_the_engine_read_every_time_alike() -> None:
    """The same corpus without Spark: the router's time is the engine's (a line the engine decodes as an event
    has the time routing gave the watermark), and decoding with the time routing shipped gives what decoding
    alone gives, event and refusals."""
    program = Program(parse_rules(RULES))
    router = Router(program.routing(buckets=4))
    for line in _lines(HAND_PICKED + _generated(11, 3000)):
        _text, ms, routes = router.read(line, None)
        assert ms == _python_reading(line), line
        for keyset, _key in routes:
            decoded = program.decode(line, keyset)
            assert decoded.event is None or decoded.event[0] == ms, line
            assert program.decode(line, keyset, ms) == decoded, line


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


def test_a_known_minute_reads_its_times_as_the_pattern_does() -> None:
    """Wire-format times of a minute read before take a shortcut past the pattern: every value reads the same with
    the minutes known as without them, mutations of the seconds, milliseconds and separators included."""
    from sparkcep import timeutil

    rng = random.Random(5)
    base = datetime(2024, 2, 28, 23, 58, tzinfo=UTC)
    values: list[str] = []
    for _ in range(4000):
        moment = base + timedelta(milliseconds=rng.randrange(0, 4 * 60_000))
        text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        chars = list(text)
        if rng.random() < 0.5:  # one character of the seconds, milliseconds or separators changed
            chars[rng.randrange(16, 24)] = rng.choice("0123456789:.Zz+-T \u0661")
        values.append("".join(chars))
    timeutil._MINUTE_MS.clear()
    cold = [read_event_time(value) for value in values]  # each minute's first value fills the table
    warm = [read_event_time(value) for value in values]
    timeutil._MINUTE_MS.clear()
    fresh = [read_event_time(value) for value in values[::-1]]
    assert cold == warm == fresh[::-1]
    assert len(timeutil._MINUTE_MS) >= 4
    assert sum(ms is None for ms in warm) > 100  # the mutations really test refusals


@settings(max_examples=300, derandomize=True)
@given(st.integers(min_value=-(10**13), max_value=MAX_EVENT_TIME_MS + 10**11))
def test_a_time_formatted_a_moment_ago_is_looked_up_as_it_would_be_read(ms: int) -> None:
    """read_formatted answers from the texts format_iso made, exactly as read_event_time reads them: also for a
    time outside the supported range (no time), and once the texts are forgotten."""
    from sparkcep import timeutil

    text = format_iso(ms)
    assert read_formatted(text) == read_event_time(text) == (ms if 0 <= ms <= MAX_EVENT_TIME_MS else None)
    timeutil._FORMATTED.clear()
    assert read_formatted(text) == read_event_time(text)
    assert read_formatted(ms) == read_event_time(ms)


def test_the_texts_kept_for_lookup_are_bounded() -> None:
    from sparkcep import timeutil

    times = range(1_700_000_000_000, 1_700_000_000_000 + timeutil._FORMATTED_KEPT + 10)
    texts = [format_iso(ms) for ms in times]
    assert len(timeutil._FORMATTED) <= timeutil._FORMATTED_KEPT
    assert [read_formatted(text) for text in texts] == list(times)
