"""Conformance of MATCH_RECOGNIZE with Flink SQL.

The cases live in ``tests/conformance/match_recognize/*.json``, one file per topic, most ported from the rows
Flink's own tests (``MatchRecognizeITCase``, ``MatchRecognizeValidationTest``, ``PatternTranslatorTest``) and
its MATCH_RECOGNIZE documentation expect. Each case gives a query (``sql``: a string or a list of lines), rows
(``events``: ``id``, ``rowtime`` in epoch milliseconds, columns) and either the expected ONE ROW PER MATCH
``rows`` or an ``error``: a text the refusal's message must contain (case-insensitive).

Flink keeps partial matches without limit; sparkcep asks a looping pattern for WITHIN or a pattern option, so
every case runs with ``{"unbounded": true}`` unless it gives its own ``options``. sparkcep also requires
PARTITION BY: cases ported from Flink queries without one add a constant key and say so.

Rows are compared per partition (the values of the query's partition columns in the row): the partitions as
a set, the rows of one partition in order, each row's columns in order. Numbers compare by value whatever
their type (int, Decimal, float; JSON fractions are read as Decimal).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkcep.cep.pattern_error import PatternError

CASES_DIR = Path(__file__).parents[1] / "conformance" / "match_recognize"
MIN_CASES = 40
DEFAULT_OPTIONS = {"unbounded": True}
TOPIC_NAMES = {
    "basics", "quantifiers", "reluctant", "skip", "define_navigation", "aggregates", "measures", "within",
    "partitions", "refused", "names", "ordering", "expressions",
}  # fmt: skip

Case = dict[str, Any]
TOPICS: dict[str, list[Case]] = {
    path.stem: json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)
    for path in sorted(CASES_DIR.glob("*.json"))
}
CASES: list[Case] = [case for cases in TOPICS.values() for case in cases]


def _sql(case: Case) -> str:
    sql = case["sql"]
    return "\n".join(sql) if isinstance(sql, list) else str(sql)


def _value(value: Any) -> Any:
    """Numbers by value (1 == 1.0 == Decimal('1.00')); everything else as it is."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float | Decimal):
        return Decimal(str(value)).normalize()
    return value


def _row(row: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((column, _value(value)) for column, value in row.items())


def _by_partition(rows: list[dict[str, Any]], key: tuple[str, ...]) -> dict[str, list[tuple[tuple[str, Any], ...]]]:
    partitions: dict[str, list[tuple[tuple[str, Any], ...]]] = {}
    for row in rows:
        partition = json.dumps([str(_value(row.get(column))) for column in key])
        partitions.setdefault(partition, []).append(_row(row))
    return partitions


def _lines(title: str, items: list[Any]) -> list[str]:
    return [f"{title}:", *(f"  {json.dumps(item, default=str)}" for item in items)]


def _failure(case: Case, got: list[dict[str, Any]] | None, error: BaseException | None) -> str:
    expected = _lines("expected error containing", [case["error"]]) if "error" in case else []
    expected = expected or _lines("expected rows", case["rows"])
    outcome = _lines("got rows", got) if got is not None else [f"got error: {type(error).__name__}: {error}"]
    return "\n".join([
        f"case {case['name']}: {case['why']}",
        "sql:",
        *(f"  {line}" for line in _sql(case).splitlines()),
        *_lines("events", case["events"]),
        *expected,
        *outcome,
    ])  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_match_recognize_conformance(case: Case) -> None:
    from sparkcep.cep.sql import compile_match_recognize, run_match_recognize

    options = case.get("options", DEFAULT_OPTIONS)
    try:
        got = run_match_recognize(_sql(case), copy.deepcopy(case["events"]), options)
    except PatternError as error:
        if "error" not in case:
            pytest.fail(_failure(case, None, error))
        assert case["error"].lower() in str(error).lower(), _failure(case, None, error)
        return
    assert "error" not in case, _failure(case, got, None)
    key = tuple(compile_match_recognize(_sql(case), options).key)
    assert _by_partition(got, key) == _by_partition(case["rows"], key), _failure(case, got, None)


def test_suite_shape() -> None:
    names = [case["name"] for case in CASES]
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    assert len(names) >= MIN_CASES, f"only {len(names)} MATCH_RECOGNIZE conformance cases, expected {MIN_CASES}+"
    assert not duplicates, f"duplicate case names: {duplicates}"
    assert set(TOPICS) == TOPIC_NAMES, f"topic files {sorted(TOPICS)}, expected {sorted(TOPIC_NAMES)}"
    assert all(TOPICS.values()), f"empty topic files: {[topic for topic, cases in TOPICS.items() if not cases]}"
    for case in CASES:
        assert {"name", "why", "sql", "events"} <= case.keys(), case.get("name")
        assert ("rows" in case) != ("error" in case), f"{case['name']}: give either rows or error"
        assert all({"id", "rowtime"} <= event.keys() for event in case["events"]), case["name"]
