"""A throwaway rule type, "count": every N events of a key, one output event. Its model, its logic and its one
registry entry, as a new type would have them in its own files; nothing in the package names it. The registry's
tests register it for the duration of a test (tests/rules/test_rule_registry.py and the tests that follow it into the
stores and the console)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from sparkcep.core.logic import SKIP, Record, RuleLogic, State, trigger_origin
from sparkcep.ids import output_id
from sparkcep.rules.base import RuleVersion, shown_names
from sparkcep.rules.form import RuleForm
from sparkcep.rules.registry import RuleType
from sparkcep.timeutil import format_iso


class CountRule(RuleVersion):
    """Every ``every`` events of ``event_types`` per key: one ``output_event``."""

    type: Literal["count"]
    id: str
    key: str
    event_types_: tuple[str, ...] = Field(alias="event_types", min_length=1)
    every: int = Field(ge=1)
    output_event: str
    restart: bool = False  # this version starts counting from zero (its clear_state_field)

    @property
    def event_types(self) -> tuple[str, ...]:
        return self.event_types_

    @property
    def output_types(self) -> tuple[str, ...]:
        return (self.output_event,)


class CountLogic(RuleLogic):
    """State per key: ``(timer, events counted)``; it never sets a timer."""

    def __init__(self, versions: list[CountRule], key_fields: tuple[str, ...]) -> None:
        self.rule = versions[0]  # one version is enough for a toy
        super().__init__(self.rule.id, key_fields, self.rule.event_types)

    def extract(self, event_type: str, obj: dict[str, Any], time: int) -> object:
        return None if event_type in self.rule.event_types else SKIP

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
        counted = (0 if state is None else state[1]) + 1
        if counted % self.rule.every == 0:
            name = self.rule.output_event
            record: Record = {
                "event_type": name,
                "event_id": output_id(self.rule.id, name, key, time),
                "occurred_at": format_iso(time),
                self.rule.key: key,
                "events_counted": counted,
                "rule_id": self.rule.id,
                "rule_version": self.rule.version,
            }
            out.append(trigger_origin(record, origin))
        return (None, counted)

    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        return state  # no timers


def count_summary(rule: Mapping[str, Any]) -> str:
    types = shown_names(rule.get("event_types"))
    return f"per {rule.get('key')}, {rule.get('output_event')} every {rule.get('every')} {types} events"


EVERY_THIRD = {
    "id": "every-third-track",
    "type": "count",
    "key": "device_id",
    "event_types": ["TRACK"],
    "every": 3,
    "output_event": "THIRD_TRACK",
}

# The one registry entry.
COUNT = RuleType(
    name="count",
    model=CountRule,
    logic=CountLogic,
    key_fields=lambda rule: (rule.key,),
    summary=count_summary,
    clear_state_field="restart",
    controlled=True,
    output_field="output_event",
    shown_values={"every": lambda value: f"{value} events"},
    form=RuleForm(
        template=EVERY_THIRD,
        required=("type", "id", "key", "event_types", "every", "output_event"),
        help={"every": "how many events of a key make one output event", "restart": "count from zero again"},
    ),
)
