"""The reference evaluator of aggregate rules: every stored event is a trigger whose window is recomputed from
the stored events."""

from __future__ import annotations

import decimal
import functools
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from decimal import Decimal

from sparkcep.expr import ExpressionError, compile_expression
from sparkcep.ids import output_id
from sparkcep.rules.aggregate import AggregateRule, format_decimal, to_decimal
from sparkcep.testing.copies import Copies
from sparkcep.testing.lines import EXPECTED_KEY, MISSING, bad_field, is_key
from sparkcep.testing.records import Output, Record
from sparkcep.timeutil import format_duration, format_iso

# One event stored by an aggregate rule: (time_ms, event_id, crc32(line), value, key values). The first three
# items order the events; value is None for COUNT; key values are the group_by fields' JSON values.
_Entry = tuple[int, str, int, Decimal | None, tuple[object, ...]]

_NUMBER = "a number or numeric text"

# Sums are exact: no rounding at any size. Averages divide in Python's default context (28 digits, half
# even), fixed here so that a caller's decimal context cannot change the oracle's results.
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_AVERAGE = decimal.Context(prec=28, rounding=decimal.ROUND_HALF_EVEN)
_COMPARE: dict[str, Callable[[Decimal, Decimal], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_FUNCTION_WORDS = {"SUM": "sum", "AVG": "average", "MIN": "minimum", "MAX": "maximum"}


def _resolver(obj: dict[str, object]) -> Callable[[tuple[str, ...]], object]:
    """Field lookup for filters: a path walks nested objects; a missing field raises KeyError (null)."""

    def resolve(path: tuple[str, ...]) -> object:
        value: object = obj
        for name in path:
            if not isinstance(value, dict) or name not in value:
                raise KeyError(name)
            value = value[name]
        return value

    return resolve


class AggregateUnit:
    """All versions of one aggregate rule id, and the events the rule stores per (grouping fields, key)."""

    def __init__(self, versions: Iterable[AggregateRule]) -> None:
        self.versions = sorted(versions, key=lambda version: (version.effective_from_ms, version.version))
        self.rule_id = self.versions[0].id
        self.starts = [version.effective_from_ms for version in self.versions]
        self.filters = {v.filter: compile_expression(v.filter) for v in self.versions if v.filter is not None}
        # A DELETE acts where it is the version in effect at its own time (not when a later version shares it).
        self.deletes = [
            v.effective_from_ms
            for v in self.versions
            if (v.state == "DELETE" or v.clear_state) and self.version_at(v.effective_from_ms) is v
        ]
        self.stored: dict[tuple[tuple[str, ...], str], list[_Entry]] = {}

    def version_at(self, time_ms: int) -> AggregateRule | None:
        """The last version (by effective_from, then version) with effective_from <= time_ms."""
        index = bisect_right(self.starts, time_ms)
        return self.versions[index - 1] if index else None

    def deleted_before(self, time_ms: int) -> int | None:
        """Entries earlier than this are dropped for an evaluation at ``time_ms`` (None: none are)."""
        index = bisect_right(self.deletes, time_ms)
        return self.deletes[index - 1] if index else None

    def take(
        self, event_time: int, event_type: str, event_id: str, tie_break: int, obj: dict[str, object], in_run: bool
    ) -> str | bool:
        """Offer one valid event: a dead-letter reason, else whether the rule stored the event."""
        found = _check_for_aggregate(self, event_time, event_type, obj)
        if found is None:
            return False
        if isinstance(found, str):
            return found
        if in_run:
            version, key, value, key_values = found
            entry = (event_time, event_id, tie_break, value, key_values)
            self.stored.setdefault((version.group_by, key), []).append(entry)
        return in_run

    def outputs(self, end: int | None, copies: Copies) -> list[Output]:
        """Every stored event's alert, if its window fires (the end of the run changes nothing)."""
        found: list[Output] = []
        for (_, key), entries in self.stored.items():
            entries.sort(key=lambda entry: entry[:3])
            found.extend(_replay_aggregate(self, key, copies.first_copies(self.rule_id, entries)))
        return found


def _number(raw: object) -> Decimal | None:
    """The exact value of a JSON number or numeric text, None for anything else."""
    try:
        value = to_decimal(raw)
    except ValueError:
        return None
    return value if value.is_finite() else None  # json reads 1e999 as an infinite float


def _check_for_aggregate(
    aggregate: AggregateUnit, event_time: int, event_type: str, obj: dict[str, object]
) -> tuple[AggregateRule, str, Decimal | None, tuple[object, ...]] | str | None:
    """(version, key, value, key values) of an event the rule stores, a dead-letter reason, or None if ignored."""
    rule = aggregate.version_at(event_time)
    if rule is None or rule.state != "ACTIVE" or not (rule.event_types is None or event_type in rule.event_types):
        return None
    prefix = f"rule {rule.id!r}, "
    if rule.filter is not None:
        try:
            passed = aggregate.filters[rule.filter].test(_resolver(obj))
        except ExpressionError as exc:
            return prefix + f"field 'filter': {exc}"
        if passed is not True:
            return None
    key_values = tuple(obj.get(name, MISSING) for name in rule.group_by)
    for name, key_value in zip(rule.group_by, key_values, strict=True):
        if not is_key(key_value):
            return prefix + bad_field(name, EXPECTED_KEY, key_value)
    value = None
    if rule.function != "COUNT":
        assert rule.field is not None
        raw = obj.get(rule.field, MISSING)
        value = _number(raw)
        if value is None:
            return prefix + bad_field(rule.field, _NUMBER, raw)
    return rule, "\x1f".join(str(key_value) for key_value in key_values), value, key_values


def _compute(function: str, values: list[Decimal]) -> Decimal:
    if function == "MIN":
        return min(values)
    if function == "MAX":
        return max(values)
    total = functools.reduce(_EXACT.add, values)
    return total if function == "SUM" else _AVERAGE.divide(total, Decimal(len(values)))


def _aggregate_output(rule: AggregateRule, key: str, entry: _Entry, result: Decimal, events_in_window: int) -> Output:
    event_time, trigger_id, _, _, key_values = entry
    name = rule.output_event
    event_id = output_id(rule.id, name, key, event_time, trigger_id)
    size = format_duration(rule.window_ms)
    for_key = ", ".join(f"{field_name}={value}" for field_name, value in zip(rule.group_by, key_values, strict=True))
    comparison = f"{rule.operator} {format_decimal(rule.limit)}"
    if rule.function == "COUNT":
        explanation = f"count of events for {for_key} over {size} is {events_in_window} {comparison}"
    else:
        word = _FUNCTION_WORDS[rule.function]
        explanation = f"{word} of {rule.field} for {for_key} over {size} is {format_decimal(result)} {comparison}"
    record: Record = {
        "event_type": name,
        "event_id": event_id,
        "occurred_at": format_iso(event_time),
        "rule_id": rule.id,
        "rule_version": rule.version,
        "key": dict(zip(rule.group_by, key_values, strict=True)),
        "trigger_event_id": trigger_id,
        "aggregate": {"function": rule.function, "field": rule.field, "value": format_decimal(result)},
        "limit": {"operator": rule.operator, "value": format_decimal(rule.limit)},
        "window": {
            "size": size,
            "start_exclusive": format_iso(event_time - rule.window_ms),
            "end_inclusive": format_iso(event_time),
        },
        "events_in_window": events_in_window,
        "explanation": explanation,
    }
    return (event_time, name, key, event_id), record


def _replay_aggregate(aggregate: AggregateUnit, key: str, entries: list[_Entry]) -> list[Output]:
    """Every stored event is a trigger: its window is recomputed from scratch under the version in effect."""
    entries.sort(key=lambda entry: entry[:3])
    times = [entry[0] for entry in entries]
    # With a resolution, an event counts from the start of its resolution step (bucketed pre-aggregation).
    resolution = aggregate.versions[0].resolution_ms
    steps = times if resolution is None else [t - t % resolution for t in times]
    found: list[Output] = []
    for entry in entries:
        event_time = entry[0]
        rule = aggregate.version_at(event_time)
        assert rule is not None  # the version that stored the entry
        first = bisect_right(steps, event_time - rule.window_ms)  # the window's start is exclusive
        deleted_before = aggregate.deleted_before(event_time)
        if deleted_before is not None:
            first = max(first, bisect_left(times, deleted_before))
        window = entries[first : bisect_right(times, event_time)]  # the end is inclusive: all events at event_time
        if rule.function == "COUNT":
            count = len(window)
            result = Decimal(count)
        else:
            # entries stored by an earlier COUNT version of the same grouping carry no value
            values = [value for _, _, _, value, _ in window if value is not None]
            count = len(values)
            result = _compute(rule.function, values)
        if _COMPARE[rule.operator](result, rule.limit):
            found.append(_aggregate_output(rule, key, entry, result, count))
    return found
