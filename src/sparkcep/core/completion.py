"""Process completion (complex event generation): a start event announces how many distinct steps
finish the process; the process either completes in time or misses its deadline.

State per key: ``(deadline, created, needed, counted)`` where ``counted`` is the frozenset of distinct
step values seen so far, or ``None`` once the verdict is out. After the verdict only this small
tombstone stays, until the deadline, so a re-sent start event cannot reopen the process; at the
deadline the key is forgotten.
"""

from __future__ import annotations

from typing import Any

from sparkcep.core.logic import (
    FieldProblem,
    Record,
    RuleLogic,
    State,
    describe,
    require_positive_int,
    trigger_origin,
)
from sparkcep.ids import output_id
from sparkcep.rules.model import CompletionRule
from sparkcep.timeutil import format_iso


class CompletionLogic(RuleLogic):
    def __init__(self, rule: CompletionRule) -> None:
        super().__init__(rule.id, (rule.key,), rule.event_types)
        self.rule = rule
        self._start = rule.start_event
        self._deadline_ms = rule.deadline_ms
        self._distinct_by = rule.distinct_by
        self._count_field = rule.count_field

    def extract(self, event_type: str, obj: dict[str, Any], time: int) -> object:
        if event_type == self._start:
            return require_positive_int(obj, self._count_field)
        value = obj.get(self._distinct_by)
        if type(value) is str:
            return value
        if type(value) is int:
            return str(value)  # 7 and "7" name the same step, as keys do
        shown = describe(value) if self._distinct_by in obj else "nothing (field missing)"
        raise FieldProblem(self.rule.distinct_by, "a string or an integer", shown)

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
        if event_type == self._start:
            if state is not None:
                return state  # a process is open or just finished: a re-sent start changes nothing
            deadline = time + self._deadline_ms
            return (deadline, time, value, frozenset())
        if state is None:
            return None  # a step before (or without) its start event in event time never counts
        deadline, created, needed, counted = state
        if counted is None or time < created or time > deadline or value in counted:
            return state
        counted = counted | {value}
        if len(counted) >= needed:
            out.append(trigger_origin(self._record(self.rule.completed_event, time, key, needed, len(counted)), origin))
            return (deadline, created, needed, None)
        return (deadline, created, needed, counted)

    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        _deadline, _created, needed, counted = state
        if counted is not None:
            out.append(self._record(self.rule.timeout_event, time, key, needed, len(counted)))
        return None

    def _record(self, event_type: str, time: int, key: str, needed: int, counted: int) -> Record:
        rule = self.rule
        return {
            "event_type": event_type,
            "event_id": output_id(rule.id, event_type, key, time),
            "occurred_at": format_iso(time),
            rule.key: key,
            rule.count_field: needed,
            rule.progress_field: counted,
            "rule_id": rule.id,
        }
