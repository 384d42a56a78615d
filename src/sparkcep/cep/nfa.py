"""Running an automaton over one key's events in event-time order.

State per key is plain data (it pickles into the engine's bucket blob):
``(partials, completed, next_seq)`` where a partial match is ``(state index, path, start time, start seq)``,
``path`` is the tuple of ``(stage name, event)`` matched so far and an event is
``(seq, time, id, fields, origin)``. ``seq`` numbers events in matching order, so comparing seqs compares
(time, id). The start partial match (no events yet) has start ``(_NEVER, _NEVER)`` and is always present.

Per event at time ``t`` (Flink CEP's order): first :meth:`Matcher.advance` to ``t`` (partial matches whose
first event is ``within`` or more before ``t`` time out, and those waiting in a stage with a ``within`` of its
own whose last event is that much before ``t``), then :meth:`Matcher.process`. Conditions may raise (e.g. comparing
text with a number); the caller decides what a failing pattern means.

With ``max_partial_matches`` a key keeps at most that many partial matches: beyond it the oldest (earliest start)
are dropped and returned as results of kind "dropped", so the loss is reported, never silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkcep.cep.compiler import FINAL, IGNORE, NORMAL, PENDING, PROCEED, STOP, TAKE, Automaton
from sparkcep.cep.conditions import TRUE, Event, Path, Scope

_NEVER = 1 << 62
Partial = tuple[int, Path, int, int]
Found = tuple[Partial, int]  # a match and the time it was found
NfaState = tuple[list[Partial], list[Found], int]


@dataclass(frozen=True)
class Result:
    """A match (``timed_out`` False) or a timed-out partial match, found at ``time``."""

    timed_out: bool
    time: int
    path: Path
    dropped: bool = False  # pushed out by the pattern's max_partial_matches
    within: int | None = None  # for a timeout: the window that ran out

    @property
    def kind(self) -> str:
        return "timeout" if self.timed_out else "dropped" if self.dropped else "match"

    def stages(self) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for stage, event in self.path:
            grouped.setdefault(stage, []).append(event[2])
        return grouped


def _order(partial: Partial) -> tuple[int, int, tuple[int, ...]]:
    return partial[2], partial[3], tuple(event[0] for _, event in partial[1])


class Matcher:
    """Stateless runner of one automaton; all per-key data is in the NfaState passed in and returned."""

    def __init__(self, automaton: Automaton) -> None:
        self.automaton = automaton
        self.states = automaton.states
        self.within = automaton.spec.within_ms
        self.skip = automaton.spec.skip
        self.cap = automaton.spec.max_partial_matches
        # Per automaton state: the within of the stage a partial match waits in (PREVIOUS_AND_CURRENT), or None.
        windows = {leaf.name: leaf.within_ms for leaf in automaton.spec.leaves()}
        self._windows = tuple(
            windows.get(state.stage) if state.kind in (NORMAL, PENDING) else None for state in automaton.states
        )
        self._stage_windows = any(window is not None for window in self._windows)
        self.start: Partial = (automaton.start, (), _NEVER, _NEVER)
        first = automaton.states[automaton.start]
        self._start_takes = [edge.condition for edge in first.edges if edge.action == TAKE]
        self._start_proceeds = any(edge.action == PROCEED for edge in first.edges)
        self._type_field = automaton.type_field
        # The automaton as plain tuples, by state index: matching reads these for every event and partial
        # match, and tuple unpacking is cheaper than attribute lookups. A test of None always holds.
        self._kinds = tuple(state.kind for state in automaton.states)
        self._edges = tuple(
            tuple(
                (None if edge.condition is TRUE else edge.condition.test, edge.action, edge.target.index, state.stage)
                for edge in state.edges
            )
            for state in automaton.states
        )

    @property
    def start_types(self) -> frozenset[str] | None:
        """Event types that can begin a match (None: any type may, or the first stage does not say)."""
        if self._start_proceeds or self._type_field is None:
            return None
        types: set[str] = set()
        for condition in self._start_takes:
            if condition.types is None:
                return None
            types.update(condition.types)
        return frozenset(types)

    def initial(self) -> NfaState:
        return ([self.start], [], 0)

    @staticmethod
    def is_idle(state: NfaState) -> bool:
        """Nothing but the start of a match is left: nothing to keep for this key."""
        return not state[1] and all(partial[3] == _NEVER for partial in state[0])

    @staticmethod
    def without_start(state: NfaState) -> NfaState:
        """The same partial matches, but no new match can start (a replaced version finishing its matches)."""
        return [p for p in state[0] if p[3] != _NEVER], state[1], state[2]

    def _deadline(self, partial: Partial) -> tuple[int, int] | None:
        """When a partial match runs out of time, and the window that runs out (None: never)."""
        due: tuple[int, int] | None = None
        if self.within is not None:
            due = (partial[2] + self.within, self.within)
        window = self._windows[partial[0]]
        if window is not None and partial[1]:
            own = (partial[1][-1][1][1] + window, window)
            if due is None or own[0] < due[0]:
                due = own
        return due

    def idle_and_timeout(self, state: NfaState) -> tuple[bool, int | None]:
        """:meth:`is_idle` and :meth:`next_timeout` in one pass over the partial matches."""
        if self._stage_windows:
            started = [p for p in state[0] if p[3] != _NEVER]
            dues = [due[0] for due in map(self._deadline, started) if due is not None]
            return not started and not state[1], min(dues, default=None)
        earliest: int | None = None
        for partial in state[0]:
            start = partial[2]
            if start != _NEVER and (earliest is None or start < earliest):
                earliest = start  # only the start partial match has no start time (and no start seq)
        idle = earliest is None and not state[1]
        # A completed match waiting for an earlier partial match needs no wake-up of its own: it is released
        # when that partial match completes or times out.
        if earliest is None or self.within is None:
            return idle, None
        return idle, earliest + self.within

    def next_timeout(self, state: NfaState) -> int | None:
        """Earliest time at which a partial match runs out of ``within`` (None: never)."""
        return self.idle_and_timeout(state)[1]

    # -- time

    def advance(self, state: NfaState, time: int, out: list[Result]) -> NfaState:
        if self._stage_windows:
            return self._advance_windows(state, time, out)
        partials, completed, seq = state
        if self.within is None:
            return state
        limit = time - self.within
        if not any(partial[2] <= limit for partial in partials):
            return state
        kept: list[Partial] = []
        matches: list[Found] = []
        for partial in partials:
            if partial[2] != _NEVER and partial[2] <= limit:
                if self.states[partial[0]].kind == PENDING:
                    # not_followed_by at the end: nothing came within the window
                    matches.append((partial, partial[2] + self.within))
                else:
                    out.append(Result(True, partial[2] + self.within, partial[1], within=self.within))
            else:
                kept.append(partial)
        if matches or completed:
            completed = list(completed)
            self._emit(kept, completed, matches, out)
        return kept, completed, seq

    def _advance_windows(self, state: NfaState, time: int, out: list[Result]) -> NfaState:
        """:meth:`advance` when stages have windows of their own: each partial match has its own deadline."""
        partials, completed, seq = state
        kept: list[Partial] = []
        matches: list[Found] = []
        for partial in partials:
            due = self._deadline(partial) if partial[3] != _NEVER else None
            if due is None or due[0] > time:
                kept.append(partial)
            elif self.states[partial[0]].kind == PENDING:
                matches.append((partial, due[0]))  # not_followed_by at the end: nothing came in time
            else:
                out.append(Result(True, due[0], partial[1], within=due[1]))
        if len(kept) == len(partials) and not completed:
            return state
        if matches or completed:
            completed = list(completed)
            self._emit(kept, completed, matches, out)
        return kept, completed, seq

    def advance_through(self, state: NfaState, time: int, out: list[Result]) -> NfaState:
        """Advance to every timeout up to ``time`` in turn, then to ``time`` (what timers do in the engine).

        Stepping matters with a skip strategy: a match waiting for an earlier partial match is released when
        that one times out, and prunes others before they time out themselves.
        """
        due = self.next_timeout(state)
        while due is not None and due < time:
            state = self.advance(state, due, out)
            due = self.next_timeout(state)
        return self.advance(state, time, out)

    # -- events

    def could_start(self, fields: dict[str, Any]) -> bool:
        """Whether an event would begin a match (when a key has no partial match, nothing else can happen)."""
        event_type = fields.get(self._type_field) if self._type_field is not None else None
        scope: Scope | None = None
        for condition in self._start_takes:
            types = condition.types
            if types is not None and event_type not in types:
                continue  # cheap: most events are of a type the first stage does not take
            if scope is None:
                scope = Scope(fields, ())
            if condition.test(scope):
                return True
        if not self._start_proceeds:
            return False
        return self._could_start_slowly(Scope(fields, ()))

    def _could_start_slowly(self, scope: Scope) -> bool:
        pending = [self.states[self.automaton.start]]
        while pending:
            current = pending.pop()
            for edge in current.edges:
                if edge.action == TAKE and edge.condition.test(scope):
                    return True
                if edge.action == PROCEED and edge.condition.test(scope):
                    pending.append(edge.target)
        return False

    def process(
        self,
        state: NfaState,
        time: int,
        event_id: str,
        fields: dict[str, Any],
        out: list[Result],
        origin: str | None = None,
    ) -> NfaState:
        partials, completed, seq = state
        event: Event = (seq, time, event_id, fields, origin)
        kept: list[Partial] = []
        matches: list[Found] = []
        kinds = self._kinds
        for partial in partials:
            reached = self._next(partial, event)
            stopped = False
            retained = []
            for new in reached:
                kind = kinds[new[0]]
                if kind == FINAL:
                    matches.append((new, time))
                elif kind == STOP:
                    stopped = True
                else:
                    retained.append(new)
            if not stopped:
                kept.extend(retained)
        # ``kept`` stays in start order: successors keep their predecessors' order and matches begun by this
        # event come last (the start partial match is always the last one).
        if self.cap is not None and len(kept) > self.cap:
            kept = self._cap(kept, time, out)
        if matches or completed:
            completed = list(completed)
            self._emit(kept, completed, matches, out)
        return kept, completed, seq + 1

    def _cap(self, kept: list[Partial], time: int, out: list[Result]) -> list[Partial]:
        """Drop the oldest partial matches beyond the cap (``kept`` is in start order), reporting each."""
        assert self.cap is not None
        started = [p for p in kept if p[3] != _NEVER]
        excess = len(started) - self.cap
        if excess <= 0:
            return kept
        dropped = {id(p) for p in started[:excess]}
        out.extend(Result(False, time, p[1], dropped=True) for p in started[:excess])
        return [p for p in kept if id(p) not in dropped]

    def _next(self, partial: Partial, event: Event) -> list[Partial]:
        index, path, start_time, start_seq = partial
        scope = Scope(event[3], path)
        plans = self._edges
        taken: list[tuple[str, str, int]] = []  # (source stage, TAKE or IGNORE, target) in traversal order
        pending = [index]
        while pending:
            current = pending.pop()
            for test, action, target, stage in plans[current]:
                if test is None or test(scope):
                    if action == PROCEED:
                        pending.append(target)
                    else:
                        taken.append((stage, action, target))
        is_start = start_seq == _NEVER
        reached: list[Partial] = []
        for stage, action, target in taken:
            if action == IGNORE:
                if not is_start:
                    reached.append((target, path, start_time, start_seq))
            else:  # TAKE
                grown = (*path, (stage, event))
                begins = (event[1], event[0]) if is_start else (start_time, start_seq)
                reached.append((target, grown, *begins))
                final = self._final_after(target, scope)
                if final is not None:
                    reached.append((final, grown, *begins))
        if is_start:
            reached.append(self.start)
        return reached

    def _final_after(self, index: int, scope: Scope) -> int | None:
        """A FINAL state reachable by PROCEED alone (the rest of the pattern may match nothing)."""
        plans, kinds = self._edges, self._kinds
        pending = [index]
        while pending:
            current = pending.pop()
            for test, action, target, _stage in plans[current]:
                if action == PROCEED and (test is None or test(scope)):
                    if kinds[target] == FINAL:
                        return target
                    pending.append(target)
        return None

    # -- after-match skip

    def _emit(self, partials: list[Partial], completed: list[Found], matches: list[Found], out: list[Result]) -> None:
        matches.sort(key=lambda found: _order(found[0]))
        if self.skip.strategy == "NO_SKIP":
            out.extend(Result(False, at, match[1]) for match, at in matches)
            return
        # With a skip strategy, a match waits until no partial match that started earlier is alive (a
        # longer match from an earlier start comes first), then prunes what its strategy skips.
        completed.extend(matches)
        completed.sort(key=lambda found: _order(found[0]))
        while completed:
            earliest = min((p for p in partials if p[3] != _NEVER), key=_order, default=None)
            match, at = completed[0]
            if earliest is not None and (match[2], match[3]) > (earliest[2], earliest[3]):
                break
            completed.pop(0)
            bound = self._pruning_seq(match)
            if bound is not None:
                inclusive = self.skip.strategy in ("SKIP_TO_NEXT", "SKIP_PAST_LAST_EVENT")
                partials[:] = [p for p in partials if not _pruned(p, bound, inclusive)]
                completed[:] = [f for f in completed if not _pruned(f[0], bound, inclusive)]
            out.append(Result(False, at, match[1]))

    def _pruning_seq(self, match: Partial) -> int | None:
        seqs = [event[0] for _, event in match[1]]
        strategy = self.skip.strategy
        if strategy == "SKIP_TO_NEXT":
            return min(seqs)
        if strategy == "SKIP_PAST_LAST_EVENT":
            return max(seqs)
        in_stage = [event[0] for stage, event in match[1] if stage == self.skip.stage]
        if not in_stage:
            return None
        return min(in_stage) if strategy == "SKIP_TO_FIRST" else max(in_stage)


def _pruned(partial: Partial, bound: int, inclusive: bool) -> bool:
    start = partial[3]
    if start == _NEVER:
        return False
    return start <= bound if inclusive else start < bound
