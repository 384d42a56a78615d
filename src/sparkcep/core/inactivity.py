"""Inactivity detection: a key that sends nothing for ``timeout`` of event time goes offline; its next
event brings it back online.

State per key: ``(timer, last_event_time, offline)``. The timer is ``last + timeout`` while online
and ``None`` while offline. Processing events and timers strictly in event-time order (the engine's
job) is what makes the Bird example come out the same in any batch split: the timer at 18:00:25 is
handled before the track at 18:00:32.
"""

from __future__ import annotations

from typing import Any

from sparkcep.core.logic import Record, RuleLogic, State, trigger_origin
from sparkcep.ids import output_id
from sparkcep.rules.model import InactivityRule
from sparkcep.timeutil import format_iso


class InactivityLogic(RuleLogic):
    def __init__(self, rule: InactivityRule) -> None:
        super().__init__(rule.id, (rule.key,), rule.event_types)
        self.rule = rule
        self._timeout = rule.timeout_ms

    def extract(self, event_type: str, obj: dict[str, Any], time: int) -> object:
        return None  # only the key and the time matter

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
        if state is not None and state[2]:
            out.append(trigger_origin(self._record(self.rule.online_event, time, key, state[1]), origin))
        return (time + self._timeout, time, False)

    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        last = state[1]
        out.append(self._record(self.rule.offline_event, time, key, last))
        return (None, last, True)

    def _record(self, event_type: str, time: int, key: str, last: int) -> Record:
        rule = self.rule
        return {
            "event_type": event_type,
            "event_id": output_id(rule.id, event_type, key, time),
            "occurred_at": format_iso(time),
            rule.key: key,
            "last_event_at": format_iso(last),
            "rule_id": rule.id,
        }
