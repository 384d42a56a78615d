"""Pattern processors in the engine: all versions of one processor id, one automaton per version.

State per key: ``(timer, version index, completed matches, next seq, finishing, key, last time, last id, partial
match, partial match, ...)``: the matcher's state (:data:`sparkcep.cep.partials.NfaState`; next seq None when there is
none) laid out flat in one tuple, and the key's values (the value itself for one key field, else their tuple).
A key's state is pickled into its bucket's pages and walked by the cyclic collector every batch, so every
container in it costs on each batch: the flat layout holds 5 fewer than the nested one of earlier versions
``(timer, version index, ([partials], completed, seq), finishing, (key values,), (last time, last id))``, which is
still read (:meth:`PatternLogic.upgraded`). ``finishing`` holds earlier
versions' partial matches that run to completion under ``on_new_version: finish`` (they start nothing new).
The timer is the earliest of: a partial match running out of ``within``, and the next version's
``effective_from`` (so a replaced or deleted version's partial matches go at that event time, even for a key
that sends nothing more).

At time ``t`` (event or timer) the order is: time out what ``t`` ends, then switch to the version in effect
at ``t``, then match the event. A key with nothing but the start of a match left is forgotten.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from sparkcep.cep import Matcher, Result, compile_matcher
from sparkcep.cep.conditions import Scope
from sparkcep.cep.partials import NfaState
from sparkcep.core.logic import SKIP, Record, RuleLogic, State
from sparkcep.core.ties import TieOrder
from sparkcep.expr import Expression, compile_expression
from sparkcep.ids import output_id
from sparkcep.rules.aggregate import format_decimal
from sparkcep.rules.pattern import PatternRule
from sparkcep.timeutil import format_duration, format_iso

_NO_EVENTS: tuple[()] = ()
# State slots (the layout is in the module docstring); a plain tuple, as state is pickled. ``last`` is the
# (time, event id) of the key's last event.
_TIMER, _VERSION_INDEX, _COMPLETED, _SEQ, _FINISHING, _KEY, _LAST_TIME, _LAST_ID, _PARTIALS = range(9)
_NESTED_SLOTS = 6  # the layout before this one (the flat one has at least 8)


class PatternLogic(RuleLogic):
    """Versions of one pattern processor that use the key fields ``key``."""

    def __init__(self, versions: list[PatternRule], key: tuple[str, ...], type_field: str | None) -> None:
        ordered = sorted(versions, key=lambda v: (v.effective_from_ms, v.version))
        types: set[str] = set()
        for version in ordered:
            if version.key == key:
                types.update(version.event_types or ("*",))
        super().__init__(ordered[0].id, key, tuple(sorted(types)))
        self.versions = ordered
        self._starts = [v.effective_from_ms for v in ordered]
        self._single = len(ordered) == 1 and ordered[0].effective_from_ms <= 0
        # Each version's event types (None: any), read for every event: a property of the rule computes them.
        self._scopes = [v.event_types for v in ordered]
        # At version index + 1: when the version after it takes effect (None: it is the last one).
        self._switches: list[int | None] = [*self._starts, None]
        self._key_field = key[0] if len(key) == 1 else None
        # A version that is ours and ACTIVE gets a matcher; PAUSE, DELETE and other keyings get None.
        self._matchers: list[Matcher | None] = [
            compile_matcher(v.pattern, type_field) if v.state == "ACTIVE" and v.key == key else None for v in ordered
        ]
        for version, matcher in zip(ordered, self._matchers, strict=True):
            if matcher is not None and version.output.timeout_event_type is None:
                matcher.reports_timeouts = False  # _report drops timeouts without an output event type
        # One version from the start, ACTIVE and of any event type: extract always returns the event itself.
        self.takes_whole_event = self._single and self._matchers[0] is not None and self._scopes[0] is None
        starts = [m.start_types for m in self._matchers if m is not None]
        if starts and all(types is not None for types in starts):
            self.start_types = frozenset().union(*(types for types in starts if types is not None))
        elif not starts:
            self.start_types = frozenset()  # no version matches anything: nothing ever starts
        self._match_events = [v.match_event for v in ordered]  # (a property that formats the id each time)
        self._measures: list[dict[str, Expression]] = [
            {name: compile_expression(text, m.automaton.spec.functions) for name, text in v.output.measures.items()}
            if m is not None
            else {}
            for v, m in zip(ordered, self._matchers, strict=True)
        ]
        # Equal times go by fields (SQL's ORDER BY rowtime, price): the events of one time are held, then matched in
        # that order (sparkcep.core.ties). Any held event may come first once sorted, so the engine may not skip
        # one because it starts nothing.
        self._ties: TieOrder | None = None
        if any(v.pattern.get("tie_break") for v in ordered):
            self._ties = TieOrder(self)
            self.start_types = None

    def version_at(self, time: int) -> int:
        return bisect.bisect_right(self._starts, time) - 1

    def extract(self, event_type: str, obj: dict[str, Any], time: int) -> object:
        # The whole event: conditions may read any field. Called for every event and processor, so cheap.
        index = 0 if self._single else self.version_at(time)
        if index < 0 or self._matchers[index] is None:
            return SKIP
        scope = self._scopes[index]
        if scope is not None and event_type not in scope:
            return SKIP
        return obj

    # -- handlers

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
        if self._ties is not None:
            return self._ties.on_event(state, time, event_id, event_type, value, key, out, origin)
        return self.match_event(state, time, event_id, event_type, value, key, out, origin)

    def match_event(
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
        """:meth:`on_event` without the tie order: the event is matched now."""
        fields = value
        if state is None:
            return self._begin(time, event_id, event_type, fields, key, out, origin)
        if len(state) == _NESTED_SLOTS:
            state = self.upgraded(state)
        if state[_LAST_TIME] == time and state[_LAST_ID] == event_id:
            return state  # a redelivered copy (same id and time: next in matching order) is matched once
        packed = state[_KEY]
        timer, index, seq, finishing = state[_TIMER], state[_VERSION_INDEX], state[_SEQ], state[_FINISHING]
        nfa: NfaState | None = None if seq is None else (state[_PARTIALS:], state[_COMPLETED], seq)
        switch = self._switches[index + 1]
        if (timer is not None and timer <= time) or (switch is not None and switch <= time):
            # Something times out or a version switches first (_catch_up's own test, here to save a call per event).
            index, nfa, finishing = self._catch_up(timer, index, nfa, finishing, time, key, packed, out)
        matcher = self._matchers[index]
        scope = self._scopes[index]
        if matcher is None or (scope is not None and event_type not in scope):
            # Decoded under an earlier rule log (buffered across a rule change): the version in effect now
            # does not take it.
            return self._pack(time, index, nfa, finishing, packed, time, event_id)
        if nfa is None:
            nfa = matcher.initial()
        found: list[Result] = []
        nfa = matcher.process(nfa, time, event_id, fields, found, origin)
        if found:
            self._report(index, found, key, packed, out)
        if finishing:
            finishing = tuple(
                self._step_finishing(
                    finishing, lambda m, s, f: m.process(s, time, event_id, fields, f, origin), key, packed, out
                )
            )
        return self._pack(time, index, nfa, finishing, packed, time, event_id)

    def _begin(
        self,
        time: int,
        event_id: str,
        event_type: str,
        fields: dict[str, Any],
        key: str,
        out: list[Record],
        origin: str | None,
    ) -> State | None:
        """:meth:`on_event` for a key without state. Most events start nothing for most keys: that is decided before
        any state is built, and the tests that decide it are not evaluated again to match the event."""
        index = bisect.bisect_right(self._starts, time) - 1  # version_at, inlined: this runs for most events
        matcher = self._matchers[0 if self._single else index]
        if matcher is None:
            return None
        scope = self._scopes[index]
        if scope is not None and event_type not in scope:
            # Decoded under an earlier rule log (buffered across a rule change): the version in effect now
            # does not take it.
            if not matcher.could_start(fields):
                return None
            return self._pack(time, index, None, (), self._packed_key(fields), time, event_id)
        found: list[Result] = []
        nfa = matcher.begin(time, event_id, fields, found, origin)
        if nfa is None:
            return None
        packed = self._packed_key(fields)
        if found:
            self._report(index, found, key, packed, out)
        return self._pack(time, index, nfa, (), packed, time, event_id)

    def _packed_key(self, fields: dict[str, Any]) -> Any:
        """The key's values as the state keeps them: the value itself for one key field (no tuple), else a tuple."""
        if self._key_field is not None:
            return fields.get(self._key_field)
        return tuple([fields.get(field) for field in self.key_fields])

    def _key_values(self, packed: Any) -> tuple[Any, ...]:
        return (packed,) if self._key_field is not None else tuple(packed)

    def upgraded(self, state: State) -> State:
        """A state written in the nested layout of earlier versions (see the module docstring), in the flat one."""
        if len(state) != _NESTED_SLOTS:
            raise ValueError(f"not a pattern state: {len(state)} slots")
        timer, index, nfa, finishing, key_values, (last_time, last_id) = state
        packed = key_values[0] if self._key_field is not None else tuple(key_values)
        finishing = tuple((old, _flat_nfa(carried)) for old, carried in finishing)
        if nfa is None:
            return (timer, index, (), None, finishing, packed, last_time, last_id)
        partials, completed, seq = _flat_nfa(nfa)
        return (timer, index, completed, seq, finishing, packed, last_time, last_id, *partials)

    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        if self._ties is not None:
            return self._ties.on_timer(state, time, key, out)
        return self.fire_timer(state, time, key, out)

    def fire_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        """:meth:`on_timer` without the tie order."""
        if len(state) == _NESTED_SLOTS:
            state = self.upgraded(state)
        packed, seq = state[_KEY], state[_SEQ]
        nfa: NfaState | None = None if seq is None else (state[_PARTIALS:], state[_COMPLETED], seq)
        index, nfa, finishing = self._catch_up(
            state[_TIMER], state[_VERSION_INDEX], nfa, state[_FINISHING], time, key, packed, out
        )
        return self._pack(time, index, nfa, finishing, packed, state[_LAST_TIME], state[_LAST_ID], from_timer=True)

    # -- internals

    def _catch_up(
        self,
        timer: int | None,
        index: int,
        nfa: NfaState | None,
        finishing: tuple[tuple[int, Any], ...],
        time: int,
        key: str,
        packed: Any,
        out: list[Record],
    ) -> tuple[int, NfaState | None, tuple[tuple[int, Any], ...]]:
        """Bring a key's state to ``time``: every version switch at its own event time, timeouts in between."""
        switch = self._switches[index + 1]
        if (timer is None or timer > time) and (switch is None or switch > time):
            return index, nfa, finishing  # no timeout and no version switch at or before ``time``
        if self._single and not finishing:  # the common case: one version, nothing else to advance
            matcher = self._matchers[0]
            if matcher is not None and nfa is not None:
                found: list[Result] = []
                nfa = matcher.advance_through(nfa, time, found)
                if found:
                    self._report(index, found, key, packed, out)
            return index, nfa, finishing
        now = self.version_at(time)  # only here: most events neither time anything out nor switch versions
        kept = list(finishing)
        # A version recorded after this state was written may have taken effect before ``time`` (a live run
        # learns of a version later than a replay does, and both must agree): time out what ends before its
        # effective time, then switch, so nothing of a replaced version outlives it.
        for later in range(index + 1, now + 1):
            at = self._starts[later]
            if self.version_at(at) != later:
                continue  # superseded by a version with the same effective time
            nfa, kept = self._advance(index, nfa, kept, at, key, packed, out)
            nfa, kept = self._switch(index, later, nfa, kept)
            index = later
        nfa, kept = self._advance(index, nfa, kept, time, key, packed, out)
        return index, nfa, tuple(kept)

    def _advance(
        self,
        index: int,
        nfa: NfaState | None,
        finishing: list[tuple[int, Any]],
        time: int,
        key: str,
        packed: Any,
        out: list[Record],
    ) -> tuple[NfaState | None, list[tuple[int, Any]]]:
        matcher = self._matchers[index]
        if matcher is not None and nfa is not None:
            found: list[Result] = []
            nfa = matcher.advance_through(nfa, time, found)
            if found:
                self._report(index, found, key, packed, out)
        if not finishing:
            return nfa, []  # the common case: no earlier version still finishing its matches
        step: Callable[[Matcher, Any, list[Result]], Any] = lambda m, s, f: m.advance_through(s, time, f)  # noqa: E731
        return nfa, self._step_finishing(tuple(finishing), step, key, packed, out)

    def _switch(
        self, old: int, new: int, nfa: NfaState | None, finishing: list[tuple[int, Any]]
    ) -> tuple[None, list[tuple[int, Any]]]:
        """The version ``new`` takes effect: it starts with no partial matches of its own."""
        newer = self.versions[new]
        if newer.state == "DELETE" or newer.key != self.key_fields:
            return None, []
        matcher = self._matchers[old]
        if newer.on_new_version == "finish" and matcher is not None and nfa is not None:
            carried = Matcher.without_start(nfa)
            if not matcher.is_idle(carried):
                finishing = [*finishing, (old, carried)]
        return None, finishing

    def _step_finishing(
        self,
        finishing: tuple[tuple[int, Any], ...],
        step: Callable[[Matcher, Any, list[Result]], Any],
        key: str,
        packed: Any,
        out: list[Record],
    ) -> list[tuple[int, Any]]:
        """Run ``step`` on every finishing version's partial matches; keep those with matches left."""
        kept = []
        for old, partials in finishing:
            matcher = self._matchers[old]
            assert matcher is not None
            found: list[Result] = []
            updated = step(matcher, partials, found)
            self._report(old, found, key, packed, out)
            if not matcher.is_idle(updated):
                kept.append((old, updated))
        return kept

    def _pack(
        self,
        time: int,
        index: int,
        nfa: NfaState | None,
        finishing: tuple[tuple[int, Any], ...],
        packed: Any,
        last_time: int,
        last_id: str,
        from_timer: bool = False,
    ) -> State | None:
        matcher = self._matchers[index]
        timeout: int | None = None
        if nfa is not None:
            if matcher is None:
                nfa = None
            else:
                idle, timeout = matcher.idle_and_timeout(nfa)
                if idle:
                    nfa = None
        if nfa is None and not finishing:
            # Keep the last event until a timer at its own time (timers run after every event at that time),
            # so redelivered copies of it are still recognised, then forget the key.
            if last_time == time and not from_timer:
                return (time, index, (), None, (), packed, last_time, last_id)
            return None
        if not finishing and index + 1 == len(self._starts):  # the common case: no other version to wait for
            assert nfa is not None
            return (timeout, index, nfa[1], nfa[2], finishing, packed, last_time, last_id, *nfa[0])
        wakeups = [timeout]
        for old, partials in finishing:
            old_matcher = self._matchers[old]
            assert old_matcher is not None
            wakeups.append(old_matcher.next_timeout(partials))
        if index + 1 < len(self._starts) and self._starts[index + 1] > time:
            wakeups.append(self._starts[index + 1])
        due = [w for w in wakeups if w is not None]
        partials, completed, seq = ((), (), None) if nfa is None else nfa
        return (min(due) if due else None, index, completed, seq, finishing, packed, last_time, last_id, *partials)

    def _report(self, index: int, found: list[Result], key: str, packed: Any, out: list[Record]) -> None:
        if not found:
            return
        version = self.versions[index]
        key_values = self._key_values(packed)
        for result in found:
            if result.timed_out:
                if version.output.timeout_event_type is not None:
                    out.append(self._record(version, index, result, version.output.timeout_event_type, key, key_values))
            elif result.dropped:  # always reported: a capped pattern loses partial matches, never silently
                out.append(self._record(version, index, result, version.dropped_event, key, key_values))
            else:
                out.append(self._record(version, index, result, self._match_events[index], key, key_values))

    def _record(
        self, version: PatternRule, index: int, result: Result, event_type: str, key: str, key_values: tuple[Any, ...]
    ) -> Record:
        path = result.path
        ids = [event[2] for _, event in path]
        stages: dict[str, list[dict[str, str]]] = {}
        texts: list[str] = []  # each event's time as text, in path order (first and last are the record's too)
        for stage, event in path:
            texts.append(format_iso(event[1]))
            matched = {"event_id": event[2], "occurred_at": texts[-1]}
            if len(event) > 4 and event[4] is not None:  # events matched before origins were kept have none
                matched["origin"] = orjson.loads(event[4])
            stages.setdefault(stage, []).append(matched)
        # A match is found at its last event's time: that text is not formatted twice.
        occurred_at = texts[-1] if path and path[-1][1][1] == result.time else format_iso(result.time)
        record: Record = {
            "event_type": event_type,
            "event_id": output_id(self.rule_id, event_type, key, result.time, *ids),
            "occurred_at": occurred_at,
            "rule_id": self.rule_id,
            "pattern_version": version.version,
            "key": dict(zip(self.key_fields, key_values, strict=True)),
            "stages": stages,
            "first_event_at": texts[0] if path else None,
            "last_event_at": texts[-1] if path else None,
        }
        if result.timed_out:
            assert result.within is not None
            record["timed_out"] = True
            record["within"] = format_duration(result.within)
        elif result.dropped:
            matcher = self._matchers[index]
            assert matcher is not None and matcher.cap is not None
            record["dropped"] = True
            record["max_partial_matches"] = matcher.cap
        else:
            scope = Scope(None, path)
            record["measures"] = {name: _plain(m.evaluate(scope)) for name, m in self._measures[index].items()}
        return record


def _flat_nfa(nfa: Any) -> NfaState:
    """A matcher state of the nested layout, whose partial matches were ``(state index, ((stage, event), ...), start
    time, start seq)``, with the flat partial matches of sparkcep.cep.nfa (and every event with an origin slot)."""
    partials, completed, seq = nfa

    def flat(partial: tuple[int, Any, int, int]) -> tuple[Any, ...]:
        index, path, start_time, start_seq = partial
        items: list[Any] = [index, start_time, start_seq]
        for stage, event in path:
            items += (stage, *event) if len(event) > 4 else (stage, *event, None)  # (no origin before origins)
        return tuple(items)

    return [flat(p) for p in partials], tuple((flat(match), at) for match, at in completed), seq


def _plain(value: object) -> object:
    """Measures as JSON: exact decimals as canonical text (no float rounding), events as their fields."""
    if isinstance(value, Decimal):
        return format_decimal(value)
    return value
