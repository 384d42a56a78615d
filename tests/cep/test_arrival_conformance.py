"""Conformance on arrival time (Flink's processing time): cases in ``tests/conformance/arrival/``.

Flink's processing-time tests feed rows one after another: one row is one arrival, the clock only moves forward.
Each case here says so in its rows: ``arrival`` is the wall clock (epoch ms, strictly increasing) of the
micro-batch that reads the row. A case runs through the whole engine as a job runs it on arrival time: a rule set
with ``input.time_field`` ``"@arrival"``, routed and processed by :class:`sparkcep.core.local.LocalRunner` one
micro-batch per row, its clock injected (nothing reads the machine's clock), then the end of input. No row
carries a time field: the time is the arrival.

- ``cep.json``: pattern cases in the layout of ``tests/conformance/*.json`` (``pattern``, ``events`` with ``id``,
  ``matches`` as stage -> ids, optional ``timeouts`` as ``{"time", "stages"}``), plus ``arrival`` per event and an
  optional ``key`` (the key fields; without one every event gets one constant key).
- ``match_recognize.json``: queries ordering by ``proctime`` in the layout of
  ``tests/conformance/match_recognize/*.json`` (``sql``, ``events`` with ``id``, expected ``rows``), plus
  ``arrival`` per row. Each also runs through ``run_match_recognize``, which reads the ``proctime`` column as
  the rows' times: the one-go reference and the engine on arrival time must agree.
- The ports of Flink's ITCase queries that Flink runs on processing time (``tests/conformance/match_recognize/``,
  kept there with an event-time column in arrival order) run here as Flink runs them: ORDER BY proctime, each row
  arriving at its old rowtime.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import parse_rules
from sparkcep.timeutil import parse_event_time

CASES_DIR = Path(__file__).parents[1] / "conformance" / "arrival"
CEP_CASES: list[dict[str, Any]] = json.loads((CASES_DIR / "cep.json").read_text(encoding="utf-8"))
SQL_CASES: list[dict[str, Any]] = json.loads(
    (CASES_DIR / "match_recognize.json").read_text(encoding="utf-8"), parse_float=Decimal
)
DEFAULT_OPTIONS = {"unbounded": True}
_NUMBER = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")


def _run(document: dict[str, Any], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of a rule set on arrival time: one micro-batch per event at its ``arrival``, then the end."""
    runner = LocalRunner(Program(parse_rules(document)), delay_ms=0, buckets=2)
    records: list[dict[str, Any]] = []
    for event in events:
        fields = {name: value for name, value in event.items() if name != "arrival"}
        # Fractions are read as Decimal for the comparisons; a line carries them as JSON numbers.
        result = runner.run_batch([json.dumps(fields, default=float)], now_ms=event["arrival"])
        assert not result.dead and not result.late and not result.errors, (result.dead, result.late, result.errors)
        records.extend(result.outputs)
    records.extend(runner.finish().outputs)
    return records


def _ids(record: dict[str, Any]) -> dict[str, list[str]]:
    return {stage: [str(item["event_id"]) for item in items] for stage, items in record["stages"].items()}


def _check_arrivals(events: list[dict[str, Any]]) -> None:
    clocks = [event["arrival"] for event in events]
    assert clocks == sorted(set(clocks)), "arrival clocks must increase strictly (one row, one arrival)"


@pytest.mark.parametrize("case", CEP_CASES, ids=[case["name"] for case in CEP_CASES])
def test_pattern_on_arrival_time(case: dict[str, Any]) -> None:
    _check_arrivals(case["events"])
    key = case.get("key")
    events = [{**event, "k": "k1"} for event in case["events"]] if key is None else case["events"]
    rule = {
        "type": "pattern", "id": "arrival-case", "key": key or ["k"], "pattern": copy.deepcopy(case["pattern"]),
        "output": {"event_type": "MATCHED", "timeout_event_type": "TIMED_OUT"},
    }  # fmt: skip
    document = {"input": {"time_field": "@arrival", "type_field": None, "id_field": "id"}, "rules": [rule]}
    records = _run(document, events)
    got = Counter(json.dumps(_ids(r), sort_keys=True) for r in records if r["event_type"] == "MATCHED")
    expected = Counter(json.dumps(match, sort_keys=True) for match in case["matches"])
    assert got == expected, f"{case['name']}: {case['why']}\ngot {sorted(got)}\nexpected {sorted(expected)}"
    if "timeouts" in case:
        timeouts = Counter(
            json.dumps({"time": parse_event_time(r["occurred_at"]), "stages": _ids(r)}, sort_keys=True)
            for r in records
            if r["event_type"] == "TIMED_OUT"
        )
        assert timeouts == Counter(json.dumps(t, sort_keys=True) for t in case["timeouts"]), case["name"]


def _value(value: Any) -> Any:
    """Numbers by value, also as the canonical text the engine writes exact decimals (and text keys) in."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return Decimal(value).normalize() if _NUMBER.match(value) else value
    if isinstance(value, int | float | Decimal):
        return Decimal(str(value)).normalize()
    return value


def _rows(rows: list[dict[str, Any]], key: tuple[str, ...]) -> dict[str, list[list[tuple[str, Any]]]]:
    partitions: dict[str, list[list[tuple[str, Any]]]] = {}
    for row in rows:
        partition = json.dumps([str(_value(row.get(column))) for column in key])
        partitions.setdefault(partition, []).append([(column, _value(value)) for column, value in row.items()])
    return partitions


def _sql(case: dict[str, Any]) -> str:
    sql = case["sql"]
    return "\n".join(sql) if isinstance(sql, list) else str(sql)


@pytest.mark.parametrize("case", SQL_CASES, ids=[case["name"] for case in SQL_CASES])
def test_match_recognize_on_arrival_time(case: dict[str, Any]) -> None:
    from sparkcep.cep.sql import compile_match_recognize, run_match_recognize

    _check_arrivals(case["events"])
    sql, options = _sql(case), case.get("options", DEFAULT_OPTIONS)
    compiled = compile_match_recognize(sql, options)
    rule = {"type": "pattern", "id": "arrival-query", "sql": sql, "pattern_options": options}
    document = {"input": {"time_field": "@arrival", "type_field": None, "id_field": "id"}, "rules": [rule]}
    records = _run(document, case["events"])
    got = []
    for record in records:
        row = {**record["key"], **record["measures"]}
        got.append({column: row[column] for column in compiled.columns})
    expected = _rows(case["rows"], compiled.key)
    assert _rows(got, compiled.key) == expected, f"{case['name']}: {case['why']}\ngot {got}"
    # The one-go reference, reading each row's time from its proctime column, gives the same rows.
    rows = [{**event, "proctime": event["arrival"]} for event in case["events"]]
    assert _rows(run_match_recognize(sql, rows, options), compiled.key) == expected, case["name"]


# The ports of Flink's ITCase queries that Flink runs on processing time, kept in tests/conformance/match_recognize/
# with an event-time column in arrival order: run here as Flink runs them, ORDER BY proctime, each row arriving
# at its old rowtime.
PORTED_BY_PROCTIME = [
    case
    for path in sorted((CASES_DIR.parent / "match_recognize").glob("*.json"))
    for case in json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)
    if "orders by processing time" in case["why"] and "rows" in case
]


@pytest.mark.parametrize("case", PORTED_BY_PROCTIME, ids=[case["name"] for case in PORTED_BY_PROCTIME])
def test_flinks_processing_time_ports_give_the_same_rows_by_proctime(case: dict[str, Any]) -> None:
    sql = _sql(case)
    assert sql.count("ORDER BY rowtime") == 1, case["name"]
    events = [
        {**{name: value for name, value in event.items() if name != "rowtime"}, "arrival": event["rowtime"]}
        for event in case["events"]
    ]
    test_match_recognize_on_arrival_time({**case, "sql": sql.replace("ORDER BY rowtime", "ORDER BY proctime"),
                                          "events": events})  # fmt: skip


def test_suite_shape() -> None:
    names = [case["name"] for case in (*CEP_CASES, *SQL_CASES)]
    assert len(CEP_CASES) >= 5 and len(SQL_CASES) >= 4 and len(PORTED_BY_PROCTIME) >= 10
    assert len(names) == len(set(names)), "duplicate case names"
    for case in (*CEP_CASES, *SQL_CASES):
        assert {"name", "why", "events"} <= case.keys(), case.get("name")
        assert all({"id", "arrival"} <= event.keys() for event in case["events"]), case["name"]
        assert not any("rowtime" in event or "time" in event for event in case["events"]), case["name"]
