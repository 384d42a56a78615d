"""A plain-Python reference evaluator ("oracle") for sparkcep rule sets.

Tests and benchmarks compare the engine's outputs with this module's. Its value is that it is obviously
right: it shares no code with ``sparkcep.core`` or ``sparkcep.spark``, reads everything into memory,
validates every line, then replays each rule per key in event-time order: completion and inactivity rules
with one pending timer, aggregate rules by recomputing each trigger's window from the stored events.

    python -m sparkcep.oracle --rules RULES.json --input DIR --output OUT.jsonl [--until ISO|ms]
"""

from __future__ import annotations

import argparse
import decimal
import functools
import json
import operator
import sys
import time
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson

from sparkcep.arrival import ARRIVAL_REASON, is_arrival
from sparkcep.core.control import BUCKET_FIELD, CONTROL_FIELD
from sparkcep.core.lines import INVALID_TEXT_REASON, InvalidText, UnreadableFile, is_blank, read_lines
from sparkcep.core.routing import readable_time
from sparkcep.errors import SparkcepError
from sparkcep.expr import ExpressionError, compile_expression
from sparkcep.ids import output_id
from sparkcep.rules.aggregate import AggregateRule, format_decimal, to_decimal
from sparkcep.rules.completion import CompletionRule
from sparkcep.rules.inactivity import InactivityRule
from sparkcep.rules.model import RuleSet, load_rules
from sparkcep.timeutil import EXPECTED_EVENT_TIME, format_duration, format_iso, parse_duration, parse_event_time

Record = dict[str, object]
_V = TypeVar("_V", CompletionRule, InactivityRule)
_T = TypeVar("_T")
# What a rule stores of an event starts with (time ms, event id, crc32 of the line): the order of its events.
_E = TypeVar("_E", bound=tuple[Any, ...])
# One event stored by an aggregate rule: (time_ms, event_id, crc32(line), value, key values). The first three
# items order the events; value is None for COUNT; key values are the group_by fields' JSON values.
_Entry = tuple[int, str, int, Decimal | None, tuple[object, ...]]
# (occurred_at ms, event_type, key, event_id): the order of the outputs.
_OutputKey = tuple[int, str, str, str]
_Output = tuple[_OutputKey, Record]

_MISSING = object()
_STR_OR_INT = "a string or an integer"
_KEY = "a string without the character U+001F or an integer"
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


@dataclass(frozen=True)
class OracleResult:
    outputs: list[Record]  # complex events, sorted by (occurred_at ms, event_type, key value, event_id)
    # (original line, reason): in input order, then the conflicting copies of events (see _Copies)
    dead_letters: list[tuple[str, str]]
    accepted: int  # events used by at least one rule
    max_event_time: int | None  # largest event time among accepted events
    duplicates_by_rule: dict[str, int] = field(default_factory=dict)  # copies of events a rule dropped


class _Copies:
    """Copies of an event: the same non-empty id at the same time, found per rule and key once every event is in.

    Each rule keeps, per key, the first copy in (time, id, crc32 of the line) order; a later copy with the same
    JSON value is a duplicate, one with another value a dead letter (``conflicting duplicate``). Lines are kept
    for that, keyed by (time, id, crc32).
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.lines: dict[tuple[int, str, int], str] = {}
        self.dead_letters: list[tuple[str, str]] = []
        self.duplicates_by_rule: dict[str, int] = {}

    def remember(self, event_time: int, event_id: str, tie_break: int, line: str) -> None:
        if self.enabled and event_id:
            self.lines[(event_time, event_id, tie_break)] = line

    def first_copies(self, rule_id: str, events: list[_E]) -> list[_E]:
        """``events`` of one rule and key, sorted, without the copies."""
        if not self.enabled:
            return events
        kept: list[_E] = []
        for event in events:
            previous = kept[-1] if kept else None
            if previous is None or not event[1] or (event[0], event[1]) != (previous[0], previous[1]):
                kept.append(event)
                continue
            line = self.lines[(event[0], event[1], event[2])]
            if json.loads(line) == json.loads(self.lines[(previous[0], previous[1], previous[2])]):
                self.duplicates_by_rule[rule_id] = self.duplicates_by_rule.get(rule_id, 0) + 1
            else:
                reason = (
                    f"rule {rule_id!r}: conflicting duplicate: event {event[1]!r} at {format_iso(event[0])} has "
                    "the id and time of an earlier copy with other content (each rule keeps the first copy in "
                    "(time, id, crc32 of the line) order)"
                )
                self.dead_letters.append((line, reason))
        return kept


def _is_str_or_int(value: object) -> bool:
    # bool is an int subclass in Python, but JSON true/false are not numbers
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _show(value: object) -> str:
    if value is _MISSING:
        return "nothing (field missing)"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _bad_field(name: str, expected: str, got: object) -> str:
    return f"field {name!r}: expected {expected}, got {_show(got)}"


def _reject_constant(name: str) -> object:
    # json.loads accepts NaN and Infinity by default; they are not JSON
    raise ValueError(f"{name} is not valid JSON")


# One decoder for all lines: json.loads(..., parse_constant=...) would build a new one per line.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


# one return per check of the contract, in the contract's order, reads best here
def _parse_line(  # noqa: PLR0911
    rules: RuleSet, consumed: set[str] | None, line: str, arrival: int | None = None
) -> tuple[int, str, str, dict[str, object]] | str:
    """Checks 1-5 of the contract: (time, event type, event id, object), or a dead-letter reason.

    ``consumed`` is None when some rule consumes every event type; without a type field every event's type is "".
    ``arrival``: the line's arrival time, its time when the rules run on arrival time (no field is read then).
    """
    spec = rules.input
    try:
        obj = _DECODER.decode(line)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return f"malformed JSON: {exc}"
    if not isinstance(obj, dict):
        kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        kind = kinds.get(type(obj), "a number")
        return f"not a JSON object: the line is {kind}"
    if obj.get(CONTROL_FIELD) is not None or obj.get(BUCKET_FIELD) is not None:
        return f"fields {CONTROL_FIELD!r} and {BUCKET_FIELD!r} are reserved for sparkcep's control records"
    if is_arrival(spec.time_field):
        if arrival is None:
            return f"field {spec.time_field!r}: {ARRIVAL_REASON}"
        event_time = arrival
    else:
        raw_time = obj.get(spec.time_field, _MISSING)
        if raw_time is _MISSING:
            return _bad_field(spec.time_field, "an event time", raw_time)
        try:
            event_time = parse_event_time(raw_time)
        except SparkcepError:
            return _bad_field(spec.time_field, EXPECTED_EVENT_TIME, raw_time)
    event_type = "" if spec.type_field is None else obj.get(spec.type_field, _MISSING)
    if not isinstance(event_type, str):
        assert spec.type_field is not None
        return _bad_field(spec.type_field, "an event type string", event_type)
    if consumed is not None and event_type not in consumed:
        return f"no rule consumes event_type {event_type!r}"
    event_id = obj.get(spec.id_field, _MISSING)
    if event_id is not _MISSING and not _is_str_or_int(event_id):
        return _bad_field(spec.id_field, f"{_STR_OR_INT} (or no field)", event_id)
    return event_time, event_type, "" if event_id is _MISSING else str(event_id), obj


def _output(
    rule: CompletionRule | InactivityRule, name: str, key: str, ms: int, extra: Mapping[str, object]
) -> _Output:
    event_id = output_id(rule.id, name, key, ms)
    record: Record = {"event_type": name, "event_id": event_id, "occurred_at": format_iso(ms), rule.key: key}
    record.update(extra)
    record["rule_id"] = rule.id
    record["rule_version"] = rule.version
    return (ms, name, key, event_id), record


class _Versions(Generic[_V]):
    """All versions of one completion or inactivity rule id on the event-time axis."""

    def __init__(self, versions: Iterable[_V]) -> None:
        # At a time, the last version by (effective_from, version) with effective_from <= that time is in effect.
        self.ordered: list[_V] = sorted(versions, key=lambda version: (version.effective_from_ms, version.version))
        self.starts: list[int] = [version.effective_from_ms for version in self.ordered]

    def at(self, time_ms: int) -> _V | None:
        index = bisect_right(self.starts, time_ms)
        return self.ordered[index - 1] if index else None

    def in_effect_sometime(self, version: _V) -> bool:
        """False for a version tied with a later version's effective time: it never takes effect."""
        return self.at(version.effective_from_ms) is version

    def replaced_at(self, version: _V) -> int | None:
        """When the next version takes over from ``version`` (None: it stays in effect)."""
        later = [start for start in self.starts if start > version.effective_from_ms]
        return min(later) if later else None

    def times(self, wanted: Callable[[_V], bool]) -> list[int]:
        """Sorted effective times of the versions that take effect and are ``wanted``."""
        return sorted(v.effective_from_ms for v in self.ordered if wanted(v) and self.in_effect_sometime(v))


def _first_after(times: list[int], after: int) -> int | None:
    later = [time for time in times if time > after]
    return min(later) if later else None


def _is_key(value: object) -> bool:
    # U+001F joins the fields of a composite key: a key value containing it would collide with another key
    return _is_str_or_int(value) and not (isinstance(value, str) and "\x1f" in value)


def _key_problem(rule_id: str, field_name: str, obj: dict[str, object]) -> str | None:
    value = obj.get(field_name, _MISSING)
    return None if _is_key(value) else f"rule {rule_id!r}, " + _bad_field(field_name, _KEY, value)


# One usable event for one rule and key: (time_ms, event_id, crc32(line), event_type, value). The first three
# items are the contract's processing order.
_Event = tuple[int, str, int, str, _T]


@dataclass
class _Open:
    """A completion process: opened under ``version`` at ``start``, judged by that version to its verdict."""

    version: CompletionRule
    start: int
    deadline: int
    count: int
    seen: set[str] = field(default_factory=set)  # distinct values, already text
    finished: bool = False


class _Completion:
    """The versions of one completion rule id that key by ``key_field``, and per key the events they use.

    An event's value is ``(count or None, {distinct field: text})``: the count when it opens a process under
    the version in effect at its time, its step values for each version whose processes may still be open.
    """

    def __init__(self, versions: _Versions[CompletionRule], key_field: str) -> None:
        self.versions = versions
        self.key_field = key_field
        self.rule_id = versions.ordered[0].id
        self.deletes = versions.times(lambda v: v.state == "DELETE")  # a DELETE ends processes of every keying
        # The versions that open processes of this keying, newest first, and when the next version replaces each.
        self.openers = [
            v
            for v in reversed(versions.ordered)
            if v.state == "ACTIVE" and v.key == key_field and versions.in_effect_sometime(v)
        ]
        self.replaced = {v.version: versions.replaced_at(v) for v in self.openers}
        self.events: dict[str, list[_Event[tuple[int | None, dict[str, str]]]]] = {}

    def may_be_open(self, version: CompletionRule, time_ms: int) -> bool:
        """Whether a process the opening ``version`` opened can still be open at ``time_ms``: it opened while the
        version was in effect, its deadline is not past, and no DELETE came between."""
        if time_ms < version.effective_from_ms:
            return False
        replaced = self.replaced[version.version]
        if replaced is None:
            return True
        deleted = [d for d in self.deletes if replaced <= d <= time_ms]
        return time_ms <= replaced - 1 + version.deadline_ms and not deleted

    def take(
        self, event_time: int, event_type: str, event_id: str, tie_break: int, obj: dict[str, object], in_run: bool
    ) -> str | bool:
        current = self.versions.at(event_time)
        starts = current if current in self.openers and event_type == current.start_event else None
        newest_first = [v for v in self.openers if v.step_event == event_type and self.may_be_open(v, event_time)]
        if starts is None and not newest_first:
            return False
        key_problem = _key_problem(self.rule_id, self.key_field, obj)
        if key_problem is not None:
            return key_problem
        problems: list[str] = []
        count: int | None = None
        if starts is not None:
            raw = obj.get(starts.count_field, _MISSING)
            if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1:
                count = raw
            else:
                problems.append(_bad_field(starts.count_field, "an integer >= 1", raw))
        steps: dict[str, str] = {}
        for version in newest_first:
            distinct = obj.get(version.distinct_by, _MISSING)
            # Like keys, distinct values compare as text: parcel 7 and parcel "7" are the same parcel.
            if _is_str_or_int(distinct):
                steps[version.distinct_by] = str(distinct)
            else:
                problems.append(_bad_field(version.distinct_by, _STR_OR_INT, distinct))
        if count is None and not steps:  # no version can use it
            return f"rule {self.rule_id!r}, " + problems[0]
        if in_run:
            event = (event_time, event_id, tie_break, event_type, (count, steps))
            self.events.setdefault(str(obj[self.key_field]), []).append(event)
        return in_run

    def replay(
        self, key: str, events: list[_Event[tuple[int | None, dict[str, str]]]], end: int | None
    ) -> list[_Output]:
        found: list[_Output] = []

        def verdict(process: _Open, upto: int, inclusive: bool) -> bool:
            """Settle ``process`` by time ``upto``; True when it is over (judged or dropped)."""
            deleted = _first_after(self.deletes, process.start)
            if deleted is not None and deleted <= process.deadline and deleted <= upto:
                return True  # the DELETE in effect at its time drops the process, without a verdict
            due = process.deadline <= upto if inclusive else process.deadline < upto
            if due and not process.finished:
                rule = process.version
                extra: Record = {rule.count_field: process.count, rule.progress_field: len(process.seen)}
                found.append(_output(rule, rule.timeout_event, key, process.deadline, extra))
            return due

        process: _Open | None = None
        for event_time, _, _, event_type, (count, steps) in events:
            # Events at the deadline go first: a deadline timer fires only before a strictly later event.
            if process is not None and verdict(process, event_time, inclusive=False):
                process = None
            if process is None:
                if count is not None:  # the version in effect opens it (take() checked)
                    opener = self.versions.at(event_time)
                    assert opener is not None
                    process = _Open(opener, event_time, event_time + opener.deadline_ms, count)
                continue
            rule = process.version
            value = steps.get(rule.distinct_by)
            if process.finished or event_type != rule.step_event or value is None:
                continue  # a re-sent start event, a step after the verdict, or one without this version's field
            process.seen.add(value)
            if len(process.seen) == process.count:
                process.finished = True
                extra = {rule.count_field: process.count, rule.progress_field: len(process.seen)}
                found.append(_output(rule, rule.completed_event, key, event_time, extra))
        if process is not None and end is not None:
            verdict(process, end, inclusive=True)
        return found

    def outputs(self, end: int | None, copies: _Copies) -> list[_Output]:
        """Every key's complex events, the run ending at ``end``."""
        found: list[_Output] = []
        for key, process_events in self.events.items():
            process_events.sort(key=lambda event: (event[0], event[1], event[2]))
            found.extend(self.replay(key, copies.first_copies(self.rule_id, process_events), end))
        return found


class _Inactivity:
    """The versions of one inactivity rule id that key by ``key_field``, and per key the events they take."""

    def __init__(self, versions: _Versions[InactivityRule], key_field: str) -> None:
        self.versions = versions
        self.key_field = key_field
        self.rule_id = versions.ordered[0].id
        # PAUSE, DELETE, or another key field: every key of this keying is forgotten then.
        self.stops = versions.times(lambda v: not (v.state == "ACTIVE" and v.key == key_field))
        self.events: dict[str, list[_Event[InactivityRule]]] = {}

    def take(
        self, event_time: int, event_type: str, event_id: str, tie_break: int, obj: dict[str, object], in_run: bool
    ) -> str | bool:
        current = self.versions.at(event_time)
        if current is None or current.state != "ACTIVE" or current.key != self.key_field:
            return False
        if event_type not in current.event_types:
            return False
        key_problem = _key_problem(self.rule_id, self.key_field, obj)
        if key_problem is not None:
            return key_problem
        if in_run:
            event = (event_time, event_id, tie_break, event_type, current)
            self.events.setdefault(str(obj[self.key_field]), []).append(event)
        return in_run

    def replay(self, key: str, events: list[_Event[InactivityRule]], end: int | None) -> list[_Output]:
        found: list[_Output] = []
        last: int | None = None  # None: a key not tracked now, which emits nothing on its first event
        last_version: InactivityRule | None = None
        online = True

        def offline_before(limit: int, inclusive: bool) -> None:
            nonlocal online
            assert last is not None and last_version is not None
            due = last + last_version.timeout_ms
            stop = _first_after(self.stops, last)
            in_time = due <= limit if inclusive else due < limit
            if online and in_time and (stop is None or due < stop):  # a stop at the very time wins
                extra: Record = {"last_event_at": format_iso(last)}
                found.append(_output(last_version, last_version.offline_event, key, due, extra))
                online = False

        for event_time, _, _, _, version in events:
            if last is not None:
                # The one pending timer is last + timeout; an event at exactly that time is handled first.
                offline_before(event_time, inclusive=False)
                stop = _first_after(self.stops, last)
                if stop is not None and stop <= event_time:
                    last = None  # forgotten at the stop: this event starts afresh
            if last is not None and not online:
                extra: Record = {"last_event_at": format_iso(last)}
                found.append(_output(version, version.online_event, key, event_time, extra))
            last, last_version, online = event_time, version, True
        if last is not None and end is not None:
            offline_before(end, inclusive=True)
        return found

    def outputs(self, end: int | None, copies: _Copies) -> list[_Output]:
        """Every key's complex events, the run ending at ``end``."""
        found: list[_Output] = []
        for key, device_events in self.events.items():
            device_events.sort(key=lambda event: (event[0], event[1], event[2]))
            found.extend(self.replay(key, copies.first_copies(self.rule_id, device_events), end))
        return found


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


class _Aggregate:
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

    def outputs(self, end: int | None, copies: _Copies) -> list[_Output]:
        """Every stored event's alert, if its window fires (the end of the run changes nothing)."""
        found: list[_Output] = []
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
    aggregate: _Aggregate, event_time: int, event_type: str, obj: dict[str, object]
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
    key_values = tuple(obj.get(name, _MISSING) for name in rule.group_by)
    for name, key_value in zip(rule.group_by, key_values, strict=True):
        if not _is_key(key_value):
            return prefix + _bad_field(name, _KEY, key_value)
    value = None
    if rule.function != "COUNT":
        assert rule.field is not None
        raw = obj.get(rule.field, _MISSING)
        value = _number(raw)
        if value is None:
            return prefix + _bad_field(rule.field, _NUMBER, raw)
    return rule, "\x1f".join(str(key_value) for key_value in key_values), value, key_values


def _compute(function: str, values: list[Decimal]) -> Decimal:
    if function == "MIN":
        return min(values)
    if function == "MAX":
        return max(values)
    total = functools.reduce(_EXACT.add, values)
    return total if function == "SUM" else _AVERAGE.divide(total, Decimal(len(values)))


def _aggregate_output(rule: AggregateRule, key: str, entry: _Entry, result: Decimal, events_in_window: int) -> _Output:
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


def _replay_aggregate(aggregate: _Aggregate, key: str, entries: list[_Entry]) -> list[_Output]:
    """Every stored event is a trigger: its window is recomputed from scratch under the version in effect."""
    entries.sort(key=lambda entry: entry[:3])
    times = [entry[0] for entry in entries]
    # With a resolution, an event counts from the start of its resolution step (bucketed pre-aggregation).
    resolution = aggregate.versions[0].resolution_ms
    steps = times if resolution is None else [t - t % resolution for t in times]
    found: list[_Output] = []
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


def _consumed_types(rules: RuleSet) -> set[str] | None:
    """The event types some rule consumes; None when a rule (an aggregate without event_types) consumes all."""
    consumed: set[str] = set()
    for rule in rules.rules:
        if rule.event_types is None:
            return None
        consumed.update(rule.event_types)
    return consumed


_Unit = _Completion | _Inactivity | _Aggregate


@dataclass(frozen=True)
class _Kind:
    """How the oracle evaluates one rule type: what splits a rule id into units (the keying of a version), and
    the unit over all versions of an id, made where a keying first appears."""

    keying: Callable[[Any], str]
    unit: Callable[[list[Any], Any], _Unit]


# The oracle's own table of the rule types it evaluates (it shares no logic with the engine, by design).
# Patterns are checked against Flink CEP's behaviour (tests/conformance) and against a direct sequential run of
# their logic (tests/test_pattern_engine.py), not here.
_KINDS: dict[str, _Kind] = {
    # one unit per id and key field
    "completion": _Kind(lambda rule: rule.key, lambda versions, rule: _Completion(_Versions(versions), rule.key)),
    "inactivity": _Kind(lambda rule: rule.key, lambda versions, rule: _Inactivity(_Versions(versions), rule.key)),
    # one unit per id, whatever the grouping of each version
    "aggregate": _Kind(lambda rule: "", lambda versions, rule: _Aggregate(versions)),
}


def _units(rules: RuleSet) -> list[_Unit]:
    """One unit per rule id and keying (see _KINDS), where it first appears."""
    units: list[_Unit] = []
    seen: set[tuple[str, str]] = set()
    for rule in rules.rules:
        kind = _KINDS.get(rule.type)
        if kind is None:
            raise SparkcepError(f"rule {rule.id!r}: the oracle does not evaluate {rule.type} rules")
        keying = (rule.id, kind.keying(rule))
        if keying in seen:
            continue
        seen.add(keying)
        units.append(kind.unit([v for v in rules.rules if v.id == rule.id], rule))
    return units


def _later(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def evaluate(
    rules: RuleSet,
    lines: Iterable[str],
    *,
    until: int | None = None,
    watermark_delay_ms: int | None = None,
    arrivals: Iterable[int] | None = None,
) -> OracleResult:
    """Evaluate ``rules`` over JSON lines (trailing newlines allowed; blank lines are skipped).

    The run ends at ``until``; by default at the latest accepted event time, or, given ``watermark_delay_ms``,
    at the later of that and the latest event time read minus the delay, as a bounded ``sparkcep run`` ends
    (events no rule takes, such as those after a rule's PAUSE, still move its watermark, and the deadlines
    that watermark passes are due).

    ``arrivals``: each line's arrival time (epoch ms, one per line, blank ones included), the time of its event
    when the rules run on arrival time (``input.time_field`` ``"@arrival"``); required then, refused otherwise."""
    arrival_times = _arrival_times(rules, arrivals)
    consumed = _consumed_types(rules)
    units = _units(rules)
    copies = _Copies(rules.input.deduplicate)
    dead_letters: list[tuple[str, str]] = []
    accepted = 0
    max_event_time: int | None = None
    max_read_time: int | None = None
    for raw in lines:
        arrival = None if arrival_times is None else next(arrival_times, None)
        if isinstance(raw, UnreadableFile):  # the damaged rest of a compressed file: one dead letter, its reason
            dead_letters.append((str(raw), str(raw)))
            continue
        line = raw.removesuffix("\n").removesuffix("\r")
        if is_blank(line):
            continue
        parsed = INVALID_TEXT_REASON if isinstance(raw, InvalidText) else _parse_line(rules, consumed, line, arrival)
        if isinstance(parsed, str):
            dead_letters.append((line, parsed))
            if watermark_delay_ms is not None and not isinstance(raw, InvalidText):
                max_read_time = _later(max_read_time, readable_time(line, rules.input.time_field))
            continue
        event_time, event_type, event_id, obj = parsed
        max_read_time = _later(max_read_time, event_time)
        tie_break = zlib.crc32(line.encode("utf-8"))
        copies.remember(event_time, event_id, tie_break, line)
        in_run = until is None or event_time <= until  # past the end of the run: ignored, not wrong
        used = False
        for unit in units:
            taken = unit.take(event_time, event_type, event_id, tie_break, obj, in_run)
            if isinstance(taken, str):
                dead_letters.append((line, taken))
            used = used or taken is True
        if used:
            accepted += 1
            max_event_time = event_time if max_event_time is None else max(max_event_time, event_time)

    end = until
    if end is None:
        watermark = None if watermark_delay_ms is None or max_read_time is None else max_read_time - watermark_delay_ms
        end = _later(max_event_time, watermark)
    outputs = _replay(units, end, copies)
    dead_letters.extend(copies.dead_letters)
    duplicates = dict(sorted(copies.duplicates_by_rule.items()))
    return OracleResult(outputs, dead_letters, accepted, max_event_time, duplicates)


def _arrival_times(rules: RuleSet, arrivals: Iterable[int] | None) -> Iterator[int] | None:
    """The arrival times to read lines with: given exactly when the rules run on arrival time."""
    if is_arrival(rules.input.time_field) != (arrivals is not None):
        expected = "each line's arrival time" if arrivals is None else "no arrival times"
        raise SparkcepError(
            f"oracle, argument 'arrivals': expected {expected} for rules whose input.time_field is "
            f"{rules.input.time_field!r}, got {'none' if arrivals is None else 'some'}"
        )
    return None if arrivals is None else iter(arrivals)


def _replay(units: list[_Unit], end: int | None, copies: _Copies) -> list[Record]:
    """Every unit's complex events, each key's events in event-time order, the run ending at ``end``."""
    outputs: list[_Output] = []
    for unit in units:
        outputs.extend(unit.outputs(end, copies))
    outputs.sort(key=lambda item: item[0])
    return [record for _, record in outputs]


def read_dir(input_dir: Path | str) -> Iterator[str]:
    """Lines of every regular file not named "_*" or ".*", files in sorted name order; compressed files
    (``.gz``, ``.bz2``, ``.zst``, ``.deflate``) decompressed, as the job reads them (sparkcep.core.lines)."""
    for path in sorted(Path(input_dir).iterdir(), key=lambda p: p.name):
        if path.name.startswith(("_", ".")) or not path.is_file():
            continue
        yield from read_lines(path)  # a line with bytes that are not UTF-8 is a dead letter, as in the job


def evaluate_dir(rules: RuleSet, input_dir: Path | str, *, until: int | None = None) -> OracleResult:
    return evaluate(rules, read_dir(input_dir), until=until)


def _until_arg(text: str) -> int:
    try:
        return parse_event_time(text)
    except SparkcepError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _delay_arg(text: str) -> int:
    try:
        return parse_duration(text)
    except SparkcepError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sparkcep.oracle", description="Reference evaluator for sparkcep rules"
    )
    parser.add_argument("--rules", required=True, type=Path, help="JSON rule file")
    parser.add_argument("--input", required=True, type=Path, help="directory of JSON-lines files")
    parser.add_argument("--output", required=True, type=Path, help="JSON-lines file for the complex events")
    parser.add_argument(
        "--until",
        type=_until_arg,
        help="end of the run, ISO-8601 or epoch ms (default: the latest accepted event time)",
    )
    parser.add_argument(
        "--watermark-delay",
        type=_delay_arg,
        default=None,
        help="end the run as sparkcep run --until-caught-up with this delay does: at the later of the latest "
        "accepted event time and the latest event time read minus the delay (e.g. 5s)",
    )
    args = parser.parse_args(argv)
    try:
        rules = load_rules(args.rules)
    except (SparkcepError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.input.is_dir():
        print(f"error: {args.input} is not a directory", file=sys.stderr)
        return 2

    lines_read = 0

    def counted() -> Iterator[str]:
        nonlocal lines_read
        for line in read_dir(args.input):
            lines_read += 1
            yield line

    started = time.perf_counter()
    result = evaluate(rules, counted(), until=args.until, watermark_delay_ms=args.watermark_delay)
    seconds = time.perf_counter() - started
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("wb") as out:
        for record in result.outputs:
            out.write(orjson.dumps(record) + b"\n")
    summary = {
        "lines": lines_read,
        "accepted": result.accepted,
        "dead_letters": len(result.dead_letters),
        "duplicates_by_rule": result.duplicates_by_rule,
        "outputs": len(result.outputs),
        "max_event_time": None if result.max_event_time is None else format_iso(result.max_event_time),
        "seconds": round(seconds, 3),
        "events_per_s": round(lines_read / seconds) if seconds > 0 else None,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
