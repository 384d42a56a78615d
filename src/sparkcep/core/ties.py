"""Pattern processors whose events of equal time go by fields (``tie_break``, SQL's ``ORDER BY rowtime, price``).

The engine hands a key's events to every rule in one order, (time, event id, crc32 of the line), so one rule's
own order for equal times cannot come from the engine's sort. Instead the processor holds the events of one time
and matches them when that time is complete: it sets its timer to that time, which the engine fires right after
the key's last event at that time (see Engine._dispatch), and then sorts them by the version's ``tie_break``
fields (then in the engine's order) and matches them one by one, as if they had come in that order.

Only processors with a version that has ``tie_break`` hand their events to a :class:`TieOrder`, so every other
processor runs exactly as before, and its state stays as it was. A wrapped processor's state is
the processor's own state, or while it holds events ``(time, HOLDING, own state, held events)``: an older
checkpoint's state reads as one that holds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkcep.cep.ties import parse_tie_break, tie_ordered
from sparkcep.core.logic import Record, State

if TYPE_CHECKING:
    from sparkcep.core.pattern import PatternLogic

HOLDING = "tie-ordered"  # the second slot of a state holding events (a processor's own state has an int there)
# A held event: what on_event received, its time aside (all held events share the state's first slot).
Held = tuple[str, str, Any, str | None]


class TieOrder:
    """Holds a processor's events of one time and matches them in its versions' ``tie_break`` order.

    The processor (:class:`~sparkcep.core.pattern.PatternLogic`) hands its events and timers here when one of its
    versions has ``tie_break``; this calls back its own handlers (``match_event``, ``fire_timer``) in that order.
    """

    def __init__(self, logic: PatternLogic) -> None:
        self._logic = logic
        self._orders = [parse_tie_break(version.pattern.get("tie_break")) for version in logic.versions]

    def _flush(self, own: State | None, time: int, held: tuple[Held, ...], key: str, out: list[Record]) -> State | None:
        logic = self._logic
        index = logic.version_at(time)
        fields = self._orders[index] if index >= 0 else ()
        ordered = tie_ordered(held, fields, _fields) if fields else held
        for event_id, event_type, value, origin in ordered:
            own = logic.match_event(own, time, event_id, event_type, value, key, out, origin)
        # As the engine does after a key's last event at a time: a timer due at that time fires now.
        while own is not None and own[0] == time:
            own = logic.fire_timer(own, time, key, out)
        return own

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
        own, held = _split(state)
        if held and state is not None and state[0] != time:  # not expected: the timer at that time flushes them
            own, held = self._flush(own, state[0], held, key, out), ()
        return (time, HOLDING, own, (*held, (event_id, event_type, value, origin)))

    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        own, held = _split(state)
        if held and state[0] <= time:
            own = self._flush(own, state[0], held, key, out)
        if own is not None and own[0] is not None and own[0] <= time:
            own = self._logic.fire_timer(own, time, key, out)
        return own


def _split(state: State | None) -> tuple[State | None, tuple[Held, ...]]:
    """The processor's own state and the events held (none for a state that holds nothing)."""
    if state is not None and len(state) == 4 and state[1] == HOLDING:
        return state[2], state[3]
    return state, ()


def _fields(event: Held) -> dict[str, Any]:
    value = event[2]
    return value if isinstance(value, dict) else {}
