"""The reference evaluator of inactivity rules: per key, the one pending offline timer, replayed in event-time
order."""

from __future__ import annotations

from sparkcep.rules.inactivity import InactivityRule
from sparkcep.testing.copies import Copies
from sparkcep.testing.lines import key_problem
from sparkcep.testing.records import Event, Output, Record, output_record
from sparkcep.testing.versions import Versions, first_after
from sparkcep.timeutil import format_iso


class InactivityUnit:
    """The versions of one inactivity rule id that key by ``key_field``, and per key the events they take."""

    def __init__(self, versions: Versions[InactivityRule], key_field: str) -> None:
        self.versions = versions
        self.key_field = key_field
        self.rule_id = versions.ordered[0].id
        # PAUSE, DELETE, or another key field: every key of this keying is forgotten then.
        self.stops = versions.times(lambda v: not (v.state == "ACTIVE" and v.key == key_field))
        self.events: dict[str, list[Event[InactivityRule]]] = {}

    def take(
        self, event_time: int, event_type: str, event_id: str, tie_break: int, obj: dict[str, object], in_run: bool
    ) -> str | bool:
        current = self.versions.at(event_time)
        if current is None or current.state != "ACTIVE" or current.key != self.key_field:
            return False
        if event_type not in current.event_types:
            return False
        problem = key_problem(self.rule_id, self.key_field, obj)
        if problem is not None:
            return problem
        if in_run:
            event = (event_time, event_id, tie_break, event_type, current)
            self.events.setdefault(str(obj[self.key_field]), []).append(event)
        return in_run

    def replay(self, key: str, events: list[Event[InactivityRule]], end: int | None) -> list[Output]:
        found: list[Output] = []
        last: int | None = None  # None: a key not tracked now, which emits nothing on its first event
        last_version: InactivityRule | None = None
        online = True

        def offline_before(limit: int, inclusive: bool) -> None:
            nonlocal online
            assert last is not None and last_version is not None
            due = last + last_version.timeout_ms
            stop = first_after(self.stops, last)
            in_time = due <= limit if inclusive else due < limit
            if online and in_time and (stop is None or due < stop):  # a stop at the very time wins
                extra: Record = {"last_event_at": format_iso(last)}
                found.append(output_record(last_version, last_version.offline_event, key, due, extra))
                online = False

        for event_time, _, _, _, version in events:
            if last is not None:
                # The one pending timer is last + timeout; an event at exactly that time is handled first.
                offline_before(event_time, inclusive=False)
                stop = first_after(self.stops, last)
                if stop is not None and stop <= event_time:
                    last = None  # forgotten at the stop: this event starts afresh
            if last is not None and not online:
                extra: Record = {"last_event_at": format_iso(last)}
                found.append(output_record(version, version.online_event, key, event_time, extra))
            last, last_version, online = event_time, version, True
        if last is not None and end is not None:
            offline_before(end, inclusive=True)
        return found

    def outputs(self, end: int | None, copies: Copies) -> list[Output]:
        """Every key's complex events, the run ending at ``end``."""
        found: list[Output] = []
        for key, device_events in self.events.items():
            device_events.sort(key=lambda event: (event[0], event[1], event[2]))
            found.extend(self.replay(key, copies.first_copies(self.rule_id, device_events), end))
        return found
