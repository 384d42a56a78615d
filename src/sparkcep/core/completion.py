"""Process completion (complex event generation): a start event announces how many distinct steps
finish the process; the process either completes in time or misses its deadline.

Versions take effect in event time. The version in effect at the start event's time governs that process to
its verdict (deadline, count field, step event, distinct-by field, output names): a later version neither
re-opens nor re-judges it. A PAUSE version opens nothing (open processes finish); a DELETE drops every open
process of the rule at its effective time, without a verdict.

State per key: ``(timer, created, needed, counted, deadline, version number)`` where ``counted`` is the
frozenset of distinct step values seen so far, or ``None`` once the verdict is out. After the verdict only
this small tombstone stays, until the deadline, so a re-sent start event cannot reopen the process; at the
deadline the key is forgotten. The timer is the deadline, or an earlier DELETE (so a deleted process goes at
the DELETE's own event time even for a key that sends nothing more).

An event's extracted value is ``(count or None, ((distinct field, text), ...))``: the count when it opens a
process under the version in effect at its time, and its step values for every version whose processes may
still be open then (see :meth:`CompletionLogic._step_windows`).
"""

from __future__ import annotations

from typing import Any

from sparkcep.core.logic import (
    SKIP,
    FieldProblem,
    Record,
    RuleLogic,
    State,
    describe,
    require_positive_int,
    trigger_origin,
)
from sparkcep.core.timeline import Timeline, earliest, first_after
from sparkcep.ids import output_id
from sparkcep.rules.model import CompletionRule
from sparkcep.timeutil import format_iso

Steps = tuple[tuple[str | None, str], ...]  # (distinct field, value as text); None: any field (older state)
# State slots (the layout is in the module docstring); a plain tuple, as state is pickled.
_TIMER, _CREATED, _NEEDED, _COUNTED, _DEADLINE, _NUMBER = range(6)
_NO_STEPS: Steps = ()


class CompletionLogic(RuleLogic):
    """All versions of one completion rule id that key by the same field."""

    def __init__(self, versions: list[CompletionRule], key: tuple[str, ...]) -> None:
        timeline = Timeline(versions)
        mine = [v for v in timeline.versions if (v.key,) == key]
        super().__init__(timeline.versions[0].id, key, tuple(sorted({t for v in mine for t in v.event_types})))
        self._timeline = timeline
        # Versions that open processes of this keying: ACTIVE, keyed by our field, and ever in effect.
        self._opens = [
            v.state == "ACTIVE" and (v.key,) == key and timeline.takes_effect(index)
            for index, v in enumerate(timeline.versions)
        ]
        self._deletes = timeline.times_where(lambda v: v.state == "DELETE")
        self.start_types = frozenset(
            v.start_event for v, opens in zip(timeline.versions, self._opens, strict=True) if opens
        )
        self._windows = self._step_windows()

    def _step_windows(self) -> list[tuple[int, int | None, str, str]]:
        """``(first, last, step event, distinct field)`` per opening version, newest first: the event times at
        which a process it opened may still be open. A process opens while its version is in effect and lasts
        to its deadline, unless a DELETE comes first."""
        windows = []
        timeline = self._timeline
        for index, version in enumerate(timeline.versions):
            if not self._opens[index]:
                continue
            end = timeline.end_of(index)
            last = None if end is None else end - 1 + version.deadline_ms
            deleted = None if end is None else first_after(self._deletes, end - 1)
            if deleted is not None and last is not None:
                last = min(last, deleted - 1)
            windows.append((timeline.starts[index], last, version.step_event, version.distinct_by))
        return windows[::-1]

    def extract(self, event_type: str, obj: dict[str, Any], time: int) -> object:
        index = self._timeline.index_at(time)
        count: int | None = None
        problem: FieldProblem | None = None
        if index >= 0 and self._opens[index] and event_type == self._timeline.versions[index].start_event:
            try:
                count = require_positive_int(obj, self._timeline.versions[index].count_field)
            except FieldProblem as refused:
                problem = refused
        steps: list[tuple[str | None, str]] = []
        for first, last, step_event, field in self._windows:
            if event_type != step_event or time < first or (last is not None and time > last):
                continue
            if any(name == field for name, _ in steps):
                continue  # two versions with one distinct field
            value = obj.get(field)
            if type(value) is str:
                steps.append((field, value))
            elif type(value) is int:
                steps.append((field, str(value)))  # 7 and "7" name the same step, as keys do
            elif problem is None:
                problem = FieldProblem(field, "a string or an integer", describe(value) if field in obj else _ABSENT)
        if count is None and not steps:
            # Refused only when no version can use it; a step some open process cannot use is not a step of it.
            if problem is not None:
                raise problem
            return SKIP
        return (count, tuple(steps))

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
        count, steps = value if type(value) is tuple else _older_value(value)
        if state is not None:
            state = _current(state)
            deleted = first_after(self._deletes, state[_CREATED])
            if deleted is not None and deleted <= time:
                state = None  # a DELETE took effect since the process opened: it went then, without a verdict
        if state is None:
            return self._open(time, event_type, count)
        timer, created, needed, counted, deadline, number = state
        if counted is None or time > deadline:
            return state  # a re-sent start event, or a step after the verdict: changes nothing
        version = self._timeline.numbered(number, created)
        if event_type != version.step_event:
            return state
        step = _step_of(steps, version.distinct_by)
        if step is None or step in counted:
            return state
        counted = counted | {step}
        if len(counted) >= needed:
            record = self._record(version, version.completed_event, time, key, needed, len(counted))
            out.append(trigger_origin(record, origin))
            counted = None
        return (timer, created, needed, counted, deadline, number)

    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        _timer, created, needed, counted, deadline, number = _current(state)
        deleted = first_after(self._deletes, created)
        if deleted is not None and deleted <= time:
            return None  # dropped at the DELETE's event time: no verdict
        if time < deadline:  # woke for a DELETE that a later version (same time) overrode
            return (earliest(deadline, deleted), created, needed, counted, deadline, number)
        if counted is not None:
            version = self._timeline.numbered(number, created)
            out.append(self._record(version, version.timeout_event, deadline, key, needed, len(counted)))
        return None

    def _open(self, time: int, event_type: str, count: int | None) -> State | None:
        """A start event for a key without a process: opens one under the version in effect at ``time``."""
        if count is None:
            return None  # a step before (or without) its start event in event time never counts
        index = self._timeline.index_at(time)
        if index < 0 or not self._opens[index] or event_type != self._timeline.versions[index].start_event:
            return None  # read under an earlier rule log; the version in effect now opens nothing
        version = self._timeline.versions[index]
        deadline = time + version.deadline_ms
        timer = earliest(deadline, first_after(self._deletes, time))
        return (timer, time, count, frozenset(), deadline, version.version)

    def _record(
        self, version: CompletionRule, event_type: str, time: int, key: str, needed: int, counted: int
    ) -> Record:
        return {
            "event_type": event_type,
            "event_id": output_id(version.id, event_type, key, time),
            "occurred_at": format_iso(time),
            version.key: key,
            version.count_field: needed,
            version.progress_field: counted,
            "rule_id": version.id,
            "rule_version": version.version,
        }


_ABSENT = "nothing (field missing)"


def _current(state: State) -> State:
    """State in this module's layout; checkpoints written before versions held ``(deadline, created, needed,
    counted)``."""
    if len(state) == 4:
        deadline, created, needed, counted = state
        return (deadline, created, needed, counted, deadline, None)
    return state


def _older_value(value: Any) -> tuple[int | None, Steps]:
    """An event buffered before versions: a start event's count, or a step's distinct value."""
    if type(value) is int:
        return value, _NO_STEPS
    return None, ((None, str(value)),)


def _step_of(steps: Steps, field: str) -> str | None:
    for name, text in steps:
        if name == field or name is None:
            return text
    return None
