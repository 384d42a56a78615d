"""Sliding event-time aggregates evaluated on every event, with rule versions that take effect in event time.

For an in-scope event at time ``t`` the rule aggregates the same key's stored events with time in
``(t - window, t]``: exclusive start, inclusive end, and *every* event at exactly ``t`` included. To see all
events at ``t`` before evaluating, an event only records a pending evaluation and sets the key's timer to
``t``; the engine fires a timer at ``t`` after all events at ``t`` (and before anything later), so all
triggers at ``t`` see the same window. Sums are exact (``Decimal``) and kept as prefix sums, so a trigger
costs a binary search, not a pass over the window (MIN/MAX scan the window).

The version in effect at an event's time decides everything about it (scope, filter, window, limit), so a
replay with the same rule log reproduces the same alerts, rule changes included.

State per key: ``(timer, data)`` where ``data`` is a list mutated in place (copying a window per event would
make every event cost as much as the window):
``[times, values, prefix sums, first live index, pending triggers, pending time, last seen time]``.

With a ``resolution`` (bucketed pre-aggregation, e.g. 1 minute) a rule stores one entry per resolution step
instead of one per event: state shrinks to ``window / resolution`` entries per key, and the window includes or
excludes a whole step at its start (a step counts when its start lies inside ``(t - window, t]``). Exact mode,
one entry per event, is the default.
"""

from __future__ import annotations

import bisect
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_HALF_EVEN, Context, Decimal
from typing import Any

from sparkcep.core.logic import (
    SKIP,
    FieldProblem,
    Record,
    RuleLogic,
    State,
    describe,
    trigger_origin,
    whole_problem,
)
from sparkcep.expr import ExpressionError, compile_expression
from sparkcep.ids import output_id
from sparkcep.rules.aggregate import AggregateRule, expected_number, format_decimal, to_decimal
from sparkcep.timeutil import format_duration, format_iso

_ZERO = Decimal(0)
# Sums are exact whatever their size; averages use a fixed context so a caller's settings change nothing.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
_AVERAGE = Context(prec=28, rounding=ROUND_HALF_EVEN)
_WORDS = {"SUM": "sum", "AVG": "average", "MIN": "minimum", "MAX": "maximum"}
_COMPARE = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}
# data slots
_TIMES, _VALUES, _PREFIX, _START, _PENDING, _PENDING_AT, _LAST = range(7)


class AggregateLogic(RuleLogic):
    """All versions of one aggregate rule id that group by the same fields."""

    def __init__(self, versions: list[AggregateRule], group_by: tuple[str, ...]) -> None:
        ordered = sorted(versions, key=lambda v: (v.effective_from_ms, v.version))
        mine = [v for v in ordered if v.group_by == group_by]
        types: set[str] = set()
        for version in mine:
            types.update(version.event_types or ("*",))
        super().__init__(ordered[0].id, group_by, tuple(sorted(types)))
        self.versions = ordered
        self._starts = [v.effective_from_ms for v in ordered]
        self._filters = [compile_expression(v.filter) if v.filter else None for v in ordered]
        # Keep what the widest window of this grouping may still need.
        self.retention_ms = max(v.window_ms for v in mine)
        self.resolution_ms = mine[0].resolution_ms  # the same for every version of a rule (checked on load)
        # A DELETE counts only if it is the version in effect at its own time (not tied with a later one).
        self._deletes = sorted(
            v.effective_from_ms
            for i, v in enumerate(ordered)
            if (v.state == "DELETE" or v.clear_state) and self.version_at(v.effective_from_ms) == i
        )

    def version_at(self, time: int) -> int:
        """Index of the version in effect at ``time`` (-1 before the first one)."""
        return bisect.bisect_right(self._starts, time) - 1

    def extract(self, event_type: str, obj: dict[str, Any], time: int) -> object:
        index = self.version_at(time)
        if index < 0:
            return SKIP
        version = self.versions[index]
        if version.state != "ACTIVE" or version.group_by != self.key_fields:
            return SKIP
        if version.event_types is not None and event_type not in version.event_types:
            return SKIP
        expression = self._filters[index]
        if expression is not None:
            try:
                passes = expression.test(lambda path: _lookup(obj, path))
            except ExpressionError as exc:
                raise whole_problem("filter", str(exc)) from None
            if not passes:
                return SKIP
        key_values = tuple(obj.get(field) for field in self.key_fields)
        if version.function == "COUNT":
            return (None, key_values)
        assert version.field is not None
        raw = obj.get(version.field, _MISSING)
        if raw is _MISSING:
            raise FieldProblem(version.field, "a number", "nothing (field missing)")
        try:
            amount = to_decimal(raw)
        except ValueError:
            # The reason says the real limit: 1e308 is a number, only not one a sum can take.
            raise FieldProblem(version.field, expected_number(raw), describe(raw)) from None
        return (amount, key_values)

    # -- handlers -------------------------------------------------------------------------------------

    def on_event(
        self,
        state: State | None,
        time: int,
        event_id: str,
        event_type: str,
        value: Any,
        key: str,
        out: list[Record],
        origin: str | None = None,
    ) -> State | None:
        if state is None:
            data: list[Any] = [[], [], [], 0, [], None, time]  # in slot order, _TIMES to _LAST
        else:
            _timer, data = state
        if self._deletes:
            self._forget_deleted(data, time)  # before the new entry; expiry itself waits for the timer at ``time``
        amount, key_values = value
        times, values, prefix = data[_TIMES], data[_VALUES], data[_PREFIX]
        # Prefix (sum, number of values, number of events): entries stored under a COUNT version carry no value.
        last_sum, last_values, last_events = prefix[-1] if prefix else (_ZERO, 0, 0)
        if amount is not None:
            last_sum, last_values = _EXACT.add(last_sum, amount), last_values + 1
        resolution = self.resolution_ms
        if resolution is None:
            times.append(time)
            values.append(amount)
            prefix.append((last_sum, last_values, last_events + 1))
        else:
            # Pre-aggregated: one entry per resolution step, holding [min, max] of its values.
            stamp = time - time % resolution
            if len(times) > data[_START] and times[-1] == stamp:
                prefix[-1] = (last_sum, last_values, last_events + 1)
                if amount is not None:
                    bounds = values[-1]
                    values[-1] = (
                        [amount, amount] if bounds is None else [min(bounds[0], amount), max(bounds[1], amount)]
                    )
            else:
                times.append(stamp)
                values.append(None if amount is None else [amount, amount])
                prefix.append((last_sum, last_values, last_events + 1))
        data[_PENDING].append((event_id, key_values, origin))
        data[_PENDING_AT] = time
        data[_LAST] = time
        return (time, data)

    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        _timer, data = state
        if data[_PENDING] and data[_PENDING_AT] == time:
            self._evaluate(data, time, key, out)
            data[_PENDING] = []
            data[_PENDING_AT] = None
        self._expire(data, time)
        data[_LAST] = time
        live = len(data[_TIMES]) - data[_START]
        if live == 0:
            return None
        # Wake when the oldest entry leaves the widest window, or at the next DELETE, whichever comes first.
        wake = data[_TIMES][data[_START]] + self.retention_ms
        upcoming = bisect.bisect_right(self._deletes, time)
        if upcoming < len(self._deletes):
            wake = min(wake, self._deletes[upcoming])
        return (wake, data)

    # -- internals ------------------------------------------------------------------------------------

    def _forget_deleted(self, data: list[Any], now: int) -> None:
        """Forget every entry when a DELETE took effect since this key was last seen."""
        upcoming = bisect.bisect_right(self._deletes, data[_LAST])
        if upcoming < len(self._deletes) and self._deletes[upcoming] <= now:
            data[_START] = len(data[_TIMES])

    def _expire(self, data: list[Any], now: int) -> None:
        """Drop entries no window can reach any more, and everything before a DELETE that took effect."""
        times = data[_TIMES]
        if self._deletes:
            self._forget_deleted(data, now)
        start = bisect.bisect_right(times, now - self.retention_ms, lo=data[_START])
        data[_START] = max(data[_START], start)
        if data[_START] * 2 > len(times):
            # Compact now and then: rebuild the live tail with fresh prefix sums.
            cut = data[_START]
            base_sum, base_values, base_events = data[_PREFIX][cut - 1]
            data[_TIMES] = times[cut:]
            data[_VALUES] = data[_VALUES][cut:]
            data[_PREFIX] = [
                (_EXACT.subtract(s, base_sum), v - base_values, e - base_events) for s, v, e in data[_PREFIX][cut:]
            ]
            data[_START] = 0

    def _evaluate(self, data: list[Any], time: int, key: str, out: list[Record]) -> None:
        version = self.versions[self.version_at(time)]
        times, values, prefix = data[_TIMES], data[_VALUES], data[_PREFIX]
        first = bisect.bisect_right(times, time - version.window_ms, lo=data[_START])
        last = len(times) - 1
        before_sum, before_values, before_events = prefix[first - 1] if first > 0 else (_ZERO, 0, 0)
        if version.function == "COUNT":
            count = prefix[last][2] - before_events
            result = Decimal(count)
        else:
            total, used = _EXACT.subtract(prefix[last][0], before_sum), prefix[last][1] - before_values
            count = used  # events whose value the aggregate used
            if version.function == "SUM":
                result = total
            elif version.function == "AVG":
                result = _AVERAGE.divide(total, Decimal(used))
            else:
                stored = [v for v in values[first : last + 1] if v is not None]
                if self.resolution_ms is not None:
                    stored = [bounds[0] if version.function == "MIN" else bounds[1] for bounds in stored]
                result = min(stored) if version.function == "MIN" else max(stored)
        if not _COMPARE[version.operator](result, version.limit):
            return
        for trigger_id, key_values, origin in data[_PENDING]:
            alert = self._alert(version, time, key, trigger_id, key_values, result, count)
            out.append(trigger_origin(alert, origin))

    def _alert(
        self,
        version: AggregateRule,
        time: int,
        key: str,
        trigger_id: str,
        key_values: tuple[Any, ...],
        result: Decimal,
        count: int,
    ) -> Record:
        size = format_duration(version.window_ms)
        named = ", ".join(f"{field}={value}" for field, value in zip(self.key_fields, key_values, strict=True))
        subject = "count of events" if version.function == "COUNT" else f"{_WORDS[version.function]} of {version.field}"
        shown, limit = format_decimal(result), format_decimal(version.limit)
        sentence = f"{subject} for {named} over {size} is {shown} {version.operator} {limit}"
        return {
            "event_type": version.output_event,
            "event_id": output_id(self.rule_id, version.output_event, key, time, trigger_id),
            "occurred_at": format_iso(time),
            "rule_id": self.rule_id,
            "rule_version": version.version,
            "key": dict(zip(self.key_fields, key_values, strict=True)),
            "trigger_event_id": trigger_id,
            "aggregate": {"function": version.function, "field": version.field, "value": shown},
            "limit": {"operator": version.operator, "value": limit},
            "window": {
                "size": size,
                "start_exclusive": format_iso(time - version.window_ms),
                "end_inclusive": format_iso(time),
            },
            "events_in_window": count,
            "explanation": sentence,
        }


_MISSING = object()


def _lookup(obj: dict[str, Any], path: tuple[str, ...]) -> object:
    value: object = obj
    for part in path:
        if not isinstance(value, dict) or part not in value:
            raise KeyError(part)
        value = value[part]
    return value
