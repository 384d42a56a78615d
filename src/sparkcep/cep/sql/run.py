"""Run a MATCH_RECOGNIZE query over a list of rows in one go: the reference for tests and for trying a query.

Rows are partitioned by the PARTITION BY columns (partitions in order of first appearance), ordered by the
ORDER BY column (epoch milliseconds), rows of equal time by the ORDER BY columns after it, then by ``id`` (the
input position when rows have none), and matched with the same matcher the job uses. Each match gives ONE ROW
PER MATCH: the partition columns and the measures, in the SELECT's order, as raw Python values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sparkcep.cep.compiler import compile_automaton
from sparkcep.cep.conditions import Scope
from sparkcep.cep.nfa import Matcher
from sparkcep.cep.partials import Result
from sparkcep.cep.pattern_json import parse_pattern
from sparkcep.cep.sql.errors import SqlError
from sparkcep.cep.sql.translate import compile_match_recognize
from sparkcep.cep.ties import TieField, tie_ordered
from sparkcep.expr import compile_expression


def run_match_recognize(
    sql: str, events: Iterable[Mapping[str, Any]], options: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The rows a MATCH_RECOGNIZE query gives for ``events``; raises SqlError for a bad query or time value."""
    compiled = compile_match_recognize(sql, options)
    spec = parse_pattern(compiled.pattern)
    matcher = Matcher(compile_automaton(spec, type_field=None))
    measures = {name: compile_expression(text, spec.functions) for name, text in compiled.measures.items()}
    time_field = compiled.time_field
    assert time_field is not None
    partitions: dict[tuple[Any, ...], list[tuple[int, str, dict[str, Any]]]] = {}
    for position, event in enumerate(events):
        time = event.get(time_field)
        if type(time) is not int:
            expected = f"epoch milliseconds (an int) in the ORDER BY column {time_field!r} of every row"
            raise SqlError("ORDER BY", expected, f"{time!r} in row {position}")
        event_id = str(event["id"]) if "id" in event else f"{position:012d}"
        key = tuple(_hashable(event.get(column)) for column in compiled.key)
        partitions.setdefault(key, []).append((time, event_id, dict(event)))
    rows: list[dict[str, Any]] = []
    for key, members in partitions.items():
        found: list[Result] = []
        state = matcher.initial()
        members.sort(key=lambda member: (member[0], member[1]))
        ordered = _tie_ordered(members, spec.tie_break) if spec.tie_break else members
        for time, event_id, fields in ordered:
            state = matcher.advance_through(state, time, found)
            state = matcher.process(state, time, event_id, fields, found)
        if spec.within_ms is not None and members:
            # Every partial match is over once `within` has passed: what waits for one is released.
            matcher.advance_through(state, members[-1][0] + spec.within_ms, found)
        key_values = dict(zip(compiled.key, (members[0][2].get(column) for column in compiled.key), strict=True))
        for result in found:
            if result.timed_out:
                continue
            scope = Scope(None, result.path)
            row = {**key_values, **{name: measure.evaluate(scope) for name, measure in measures.items()}}
            rows.append({column: row[column] for column in compiled.columns})
        del key
    return rows


def _tie_ordered(
    members: list[tuple[int, str, dict[str, Any]]], tie_break: tuple[TieField, ...]
) -> list[tuple[int, str, dict[str, Any]]]:
    """Rows sorted by time then id, each run of equal time reordered by the ORDER BY columns after the time."""
    ordered: list[tuple[int, str, dict[str, Any]]] = []
    start = 0
    while start < len(members):
        end = start
        while end < len(members) and members[end][0] == members[start][0]:
            end += 1
        ordered.extend(tie_ordered(members[start:end], tie_break, lambda member: member[2]))
        start = end
    return ordered


def _hashable(value: Any) -> Any:
    """Partition values as dict keys: lists and mappings by their contents."""
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    return value
