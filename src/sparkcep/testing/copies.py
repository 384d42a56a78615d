"""Copies of an event, as the reference evaluator finds them: per rule and key, once every event is read."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from sparkcep.timeutil import format_iso

# What a rule stores of an event starts with (time ms, event id, crc32 of the line): the order of its events.
_E = TypeVar("_E", bound=tuple[Any, ...])


class Copies:
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
