"""Inactivity detection: a key that sends nothing for ``timeout`` of event time goes offline; its next
event brings it back online.

Versions take effect in event time. The version in effect at an event's time decides that event (is it in
scope, the ONLINE name, the timeout it starts); the OFFLINE timer keeps the timeout and names of the version
its last event came under. A version that stops this keying (PAUSE, DELETE, or a new key field) drops every
key's state at its effective time, with no OFFLINE and no ONLINE: after it, a key's first event starts afresh.

State per key: ``(timer, last_event_time, offline, version number)``. The timer is the earlier of
``last + timeout`` (while online) and the next stopping version's effective time, so a stop takes effect at its
own event time even for a key that sends nothing more. Processing events and timers strictly in event-time
order (the engine's job) is what makes the Bird example come out the same in any batch split: the timer at
18:00:25 is handled before the track at 18:00:32.
"""

from __future__ import annotations

from typing import Any

from sparkcep.core.logic import SKIP, Record, RuleLogic, State, trigger_origin
from sparkcep.core.timeline import Timeline, earliest, first_after
from sparkcep.ids import output_id
from sparkcep.rules.model import InactivityRule
from sparkcep.timeutil import format_iso


class InactivityLogic(RuleLogic):
    """All versions of one inactivity rule id that key by the same field."""

    def __init__(self, versions: list[InactivityRule], key: tuple[str, ...]) -> None:
        timeline = Timeline(versions)
        mine = [v for v in timeline.versions if (v.key,) == key]
        super().__init__(timeline.versions[0].id, key, tuple(sorted({t for v in mine for t in v.event_types})))
        self._timeline = timeline

        def tracks(version: InactivityRule) -> bool:
            return version.state == "ACTIVE" and (version.key,) == key

        # Event types each version takes for this keying (none for PAUSE, DELETE or another key field).
        self._scopes = [frozenset(v.event_types) if tracks(v) else frozenset() for v in timeline.versions]
        self._stops = timeline.times_where(lambda v: not tracks(v))

    def extract(self, event_type: str, obj: dict[str, Any], time: int) -> object:
        index = self._timeline.index_at(time)
        if index < 0 or event_type not in self._scopes[index]:
            return SKIP
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
        index = self._timeline.index_at(time)
        if index < 0 or event_type not in self._scopes[index]:
            return state  # read under an earlier rule log; the version in effect now does not take it
        version = self._timeline.versions[index]
        if state is not None:
            _timer, last, offline, _number = _current(state)
            stop = first_after(self._stops, last)
            # After a stop since the last event the key was forgotten at the stop: this event starts afresh.
            if offline and (stop is None or stop > time):
                out.append(trigger_origin(self._record(version, version.online_event, time, key, last), origin))
        timer = earliest(time + version.timeout_ms, first_after(self._stops, time))
        return (timer, time, False, version.version)

    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        _timer, last, offline, number = _current(state)
        stop = first_after(self._stops, last)
        if stop is not None and stop <= time:
            return None  # dropped at the stop's event time: no OFFLINE
        if offline:
            return (stop, last, True, number)
        version = self._timeline.numbered(number, last)
        due = last + version.timeout_ms
        if time < due:  # woke for a stop that a later version (same time) overrode
            return (earliest(due, stop), last, False, number)
        out.append(self._record(version, version.offline_event, due, key, last))
        return (stop, last, True, number)

    def _record(self, version: InactivityRule, event_type: str, time: int, key: str, last: int) -> Record:
        return {
            "event_type": event_type,
            "event_id": output_id(version.id, event_type, key, time),
            "occurred_at": format_iso(time),
            version.key: key,
            "last_event_at": format_iso(last),
            "rule_id": version.id,
            "rule_version": version.version,
        }


def _current(state: State) -> State:
    """State in this module's layout; checkpoints written before versions held ``(timer, last, offline)``."""
    return (*state, None) if len(state) == 3 else state
