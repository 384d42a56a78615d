"""Running an automaton over one key's events in event-time order.

State per key is plain data (it pickles into the engine's bucket blob):
``(partials, completed, next_seq)`` where a partial match is ``(state index, start time, start seq, stage name,
*event, stage name, *event, ...)`` with the events matched so far, each event ``(seq, time, id, fields, origin)``
laid out in the tuple (:data:`STRIDE` items per event with its stage). ``seq`` numbers events in matching order,
so comparing seqs compares (time, id). The start partial match (no events yet) has start ``(NEVER, NEVER)`` and
is always present. The events are flat in the partial match rather than a tuple of ``(stage, event)`` pairs (the
:data:`Path` that conditions and results read, see :func:`path_of`) because a key's state is pickled and walked
by the cyclic collector every micro-batch: a partial match of one event is one container instead of four.
(Versions before this one kept the pairs; their saved states are converted by sparkcep.core.pattern.)

Per event at time ``t`` (Flink CEP's order): first :meth:`Matcher.advance` to ``t`` (partial matches whose
first event is ``within`` or more before ``t`` time out, and those waiting in a stage with a ``within`` of its
own whose last event is that much before ``t``), then :meth:`Matcher.process`. Conditions may raise (e.g. comparing
text with a number); the caller decides what a failing pattern means.

With ``max_partial_matches`` a key keeps at most that many partial matches: beyond it the oldest (earliest start)
are dropped and returned as results of kind "dropped", so the loss is reported, never silent.

Speed: the matcher keeps a plan per event type (sparkcep.cep.plan).
"""

from __future__ import annotations

from typing import Any, Final

from sparkcep.cep.automaton import FINAL, NORMAL, PENDING, PROCEED, STOP, TAKE, Automaton
from sparkcep.cep.conditions import Event, Scope
from sparkcep.cep.partials import NEVER, STRIDE, Found, NfaState, Partial, Result, path_of
from sparkcep.cep.plan import (
    DYNAMIC,
    PLAN_IGNORE,
    PLAN_PROCEED,
    PLAN_TAKE,
    Memo,
    Plan,
    PlanEdge,
    Taken,
    holds_all,
    tested,
)
from sparkcep.cep.skips import emit

# Event types with a plan of their own, at most (beyond, events use the plan that decides nothing in advance).
_MAX_PLANS: Final = 256


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
        self.start: Partial = (automaton.start, NEVER, NEVER)
        first = automaton.states[automaton.start]
        self._start_takes = [edge.condition for edge in first.edges if edge.action == TAKE]
        self._start_proceeds = any(edge.action == PROCEED for edge in first.edges)
        self._type_field = automaton.type_field
        # By state index: matching reads these for every event and partial match.
        self._kinds = tuple(state.kind for state in automaton.states)
        # Whether timed-out partial matches become results (a caller that reports none sets it False: most pattern
        # processors have no timeout output, and most partial matches time out).
        self.reports_timeouts = True
        self._generic = Plan(automaton, None)  # for events whose type is not a text (or with no type field)
        self._plans: dict[str, Plan] = {}  # by event type, made when the first event of that type comes

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
        return ([self.start], (), 0)

    @staticmethod
    def is_idle(state: NfaState) -> bool:
        """Nothing but the start of a match is left: nothing to keep for this key."""
        return not state[1] and all(partial[2] == NEVER for partial in state[0])

    @staticmethod
    def without_start(state: NfaState) -> NfaState:
        """The same partial matches, but no new match can start (a replaced version finishing its matches)."""
        return [p for p in state[0] if p[2] != NEVER], state[1], state[2]

    def _deadline(self, partial: Partial) -> tuple[int, int] | None:
        """When a partial match runs out of time, and the window that runs out (None: never)."""
        due: tuple[int, int] | None = None
        if self.within is not None:
            due = (partial[1] + self.within, self.within)
        window = self._windows[partial[0]]
        if window is not None and len(partial) > 3:  # from its last event
            own = (partial[-STRIDE + 2] + window, window)
            if due is None or own[0] < due[0]:
                due = own
        return due

    def idle_and_timeout(self, state: NfaState) -> tuple[bool, int | None]:
        """:meth:`is_idle` and :meth:`next_timeout` in one pass over the partial matches."""
        if self._stage_windows:
            started = [p for p in state[0] if p[2] != NEVER]
            dues = [due[0] for due in map(self._deadline, started) if due is not None]
            return not started and not state[1], min(dues, default=None)
        # Partial matches are in start order, the start partial match (no start time) last: the first one started
        # earliest (see process; tests/cep/test_pattern_plans.py checks the order).
        partials = state[0]
        earliest: int = partials[0][1] if partials else NEVER
        if earliest == NEVER:
            return not state[1], None
        # A completed match waiting for an earlier partial match needs no wake-up of its own: it is released
        # when that partial match completes or times out.
        return False, None if self.within is None else earliest + self.within

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
        for partial in partials:  # a loop, not any() over a generator: most calls time out nothing
            if partial[1] <= limit:
                break
        else:
            return state
        kept: list[Partial] = []
        matches: list[Found] = []
        for partial in partials:
            if partial[1] != NEVER and partial[1] <= limit:
                if self._kinds[partial[0]] == PENDING:
                    # not_followed_by at the end: nothing came within the window
                    matches.append((partial, partial[1] + self.within))
                elif self.reports_timeouts:
                    out.append(Result(True, partial[1] + self.within, path_of(partial), within=self.within))
            else:
                kept.append(partial)
        if matches or completed:
            waiting = list(completed)
            emit(self.skip, kept, waiting, matches, out)
            completed = tuple(waiting)
        return kept, completed, seq

    def _advance_windows(self, state: NfaState, time: int, out: list[Result]) -> NfaState:
        """:meth:`advance` when stages have windows of their own: each partial match has its own deadline."""
        partials, completed, seq = state
        kept: list[Partial] = []
        matches: list[Found] = []
        for partial in partials:
            due = self._deadline(partial) if partial[2] != NEVER else None
            if due is None or due[0] > time:
                kept.append(partial)
            elif self.states[partial[0]].kind == PENDING:
                matches.append((partial, due[0]))  # not_followed_by at the end: nothing came in time
            elif self.reports_timeouts:
                out.append(Result(True, due[0], path_of(partial), within=due[1]))
        if len(kept) == len(partials) and not completed:
            return state
        if matches or completed:
            waiting = list(completed)
            emit(self.skip, kept, waiting, matches, out)
            completed = tuple(waiting)
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

    def _plan(self, fields: dict[str, Any]) -> Plan:
        """The plan for this event's type (made at the first event of a type)."""
        try:
            # The common case in one expression, no branches: a type seen before (None is no key, nor is a number).
            plan = self._plans.get(fields.get(self._type_field))  # type: ignore[arg-type]
        except TypeError:  # a type that is not hashable (a list, an object): no plan of its own
            plan = None
        return self._new_plan(fields) if plan is None else plan

    def _new_plan(self, fields: dict[str, Any]) -> Plan:
        if self._type_field is None:
            return self._generic
        event_type = fields.get(self._type_field)
        if type(event_type) is not str:
            return self._generic  # conditions on the type are evaluated as written (they may fail on it)
        plan = self._plans.get(event_type)
        if plan is None:
            if len(self._plans) >= _MAX_PLANS:
                return self._generic
            plan = self._plans[event_type] = Plan(self.automaton, event_type)
        return plan

    def could_start(self, fields: dict[str, Any]) -> bool:
        """Whether an event would begin a match (when a key has no partial match, nothing else can happen)."""
        return self._could_start(self._plan(fields), fields, {})

    def _could_start(self, plan: Plan, fields: dict[str, Any], memo: Memo) -> bool:
        """:meth:`could_start`, keeping in ``memo`` the result of every test it evaluates (all in one scope)."""
        start = self.automaton.start
        takes = plan.takes[start]
        if takes is not None:  # known for this event type without a test
            return takes
        # The start partial match has no events: every test's result holds for it, so ``memo`` keeps them all.
        scope = Scope(fields, ()) if plan.scoped[start] else None
        for checks, action, _target, _stage in plan.edges[start]:
            if action == PLAN_TAKE and (not checks or holds_all(checks, fields, scope, memo, memo)):
                return True
        if not self._start_proceeds:
            return False
        return self._could_start_slowly(Scope(fields, ()), memo)

    def _could_start_slowly(self, scope: Scope, memo: Memo) -> bool:
        pending = [self.states[self.automaton.start]]
        while pending:
            current = pending.pop()
            for edge in current.edges:
                if edge.action == TAKE and tested(edge.condition.test, scope, memo):
                    return True
                if edge.action == PROCEED and tested(edge.condition.test, scope, memo):
                    pending.append(edge.target)
        return False

    def begin(
        self, time: int, event_id: str, fields: dict[str, Any], out: list[Result], origin: str | None = None
    ) -> NfaState | None:
        """:meth:`process` from :meth:`initial` for a key with no state, or None when the event would begin no match
        (:meth:`could_start` is false: nothing else can happen then)."""
        try:  # _plan, inlined: this runs for most events
            plan = self._plans.get(fields.get(self._type_field))  # type: ignore[arg-type]
        except TypeError:
            plan = None
        if plan is None:
            plan = self._new_plan(fields)
        # Only the start partial match is tested, in one scope (no events matched), so every test's result holds
        # for the whole call: could_start's tests are not evaluated again by process.
        memo: Memo = {}
        takes = plan.takes[self.automaton.start]  # known for the event type without a test (None: tests decide)
        if takes is not None:
            if not takes:
                return None
        elif plan.gate is not None:  # _could_start when it is one test: most events of the type begin nothing
            test, negated = plan.gate
            holds = memo[test] = test(fields)
            if (not holds) is not negated:
                return None
        elif not self._could_start(plan, fields, memo):
            return None
        return self.process(([self.start], (), 0), time, event_id, fields, out, origin, plan, memo, memo)

    def process(
        self,
        state: NfaState,
        time: int,
        event_id: str,
        fields: dict[str, Any],
        out: list[Result],
        origin: str | None = None,
        plan: Plan | None = None,
        memo: Memo | None = None,
        shared: Memo | None = None,
    ) -> NfaState:
        """Match one event. ``plan``: the plan for its type (looked up when not given). ``memo``: results of tests
        that read only the event, kept for every partial match. ``shared``: :meth:`begin` passes ``memo`` again, as
        every partial match has the same (no) events, so every result holds for all of them."""
        if plan is None:
            try:  # _plan, inlined for the common case: this runs for every event and key with partial matches
                plan = self._plans.get(fields.get(self._type_field))  # type: ignore[arg-type]
            except TypeError:
                plan = None
            if plan is None:
                plan = self._new_plan(fields)
        if memo is None:
            memo = {}
        partials, completed, seq = state
        event: Event = (seq, time, event_id, fields, origin)
        keeps, quiet = plan.keeps, plan.quiet
        kept: list[Partial] = []
        matches: list[Found] = []
        for partial in partials:
            index = partial[0]
            if partial[2] == NEVER:  # the start partial match
                if quiet[index]:
                    kept.append(self.start)  # the event begins nothing
                    continue
            elif keeps[index]:
                kept.append(partial)  # the event is only ignored here: the same partial match, no new tuple
                continue
            elif quiet[index]:
                continue  # nothing takes or ignores the event: the partial match ends
            self._step(partial, event, plan, memo, shared, kept, matches)
        # ``kept`` stays in start order: successors keep their predecessors' order and matches begun by this
        # event come last (the start partial match is always the last one).
        if self.cap is not None and len(kept) > self.cap:
            kept = self._cap(kept, time, out)
        if matches or completed:
            waiting = list(completed)
            emit(self.skip, kept, waiting, matches, out)
            completed = tuple(waiting)
        return kept, completed, seq + 1

    def _step(  # noqa: PLR0912  # one flat loop: this runs for every partial match that takes an event
        self,
        partial: Partial,
        event: Event,
        plan: Plan,
        memo: Memo,
        shared: Memo | None,
        kept: list[Partial],
        matches: list[Found],
    ) -> None:
        """What one partial match reaches with ``event``: matches into ``matches``, the rest into ``kept`` (none
        when it reaches a STOP state)."""
        index = partial[0]
        is_start = partial[2] == NEVER
        fields = event[3]
        # The partial match in a scope, and the results of the tests that read it, only when such a test may run.
        scope: Scope | None = None
        own = memo  # never read when no test reads the partial match
        if plan.scoped[index]:
            scope = Scope(fields, () if is_start else path_of(partial))
            own = {} if shared is None else shared
        taken = plan.taken[index]
        if taken is None:
            taken = self._walk(plan.edges, index, fields, scope, memo, own)
        kinds, finals, time = self._kinds, plan.finals, event[1]
        stopped = False
        retained: list[Partial] = []
        for stage, action, target in taken:
            if action == PLAN_IGNORE:
                if is_start:
                    continue
                reached = (target, *partial[1:])  # the same start and events, in another state
            elif is_start:
                reached = (target, time, event[0], stage, *event)
            else:
                reached = (target, *partial[1:], stage, *event)
            kind = kinds[target]
            if kind == FINAL:
                matches.append((reached, time))
            elif kind == STOP:
                stopped = True
            else:
                retained.append(reached)
            if action == PLAN_IGNORE:
                continue
            final = finals[target]
            if final == DYNAMIC:
                final = self._final_after(plan.edges, target, fields, scope, memo, own)
            if final is not None:
                matches.append(((final, *reached[1:]), time))
        if is_start:
            retained.append(self.start)
        if not stopped:
            kept.extend(retained)

    def _cap(self, kept: list[Partial], time: int, out: list[Result]) -> list[Partial]:
        """Drop the oldest partial matches beyond the cap (``kept`` is in start order), reporting each."""
        assert self.cap is not None
        excess = sum(1 for p in kept if p[2] != NEVER) - self.cap
        if excess <= 0:
            return kept
        # By position: a partial match that ignored the event is the same object as before, maybe twice.
        remaining: list[Partial] = []
        for partial in kept:
            if excess > 0 and partial[2] != NEVER:
                excess -= 1
                out.append(Result(False, time, path_of(partial), dropped=True))
            else:
                remaining.append(partial)
        return remaining

    @staticmethod
    def _walk(
        edges: tuple[tuple[PlanEdge, ...], ...],
        index: int,
        fields: dict[str, Any],
        scope: Scope | None,
        memo: Memo,
        own: Memo,
    ) -> Taken:
        """What the event takes or ignores from state ``index``, following the PROCEED edges that hold."""
        taken: list[tuple[str, int, int]] = []
        pending = [index]
        while pending:
            current = pending.pop()
            for checks, action, target, stage in edges[current]:
                if checks and not holds_all(checks, fields, scope, memo, own):
                    continue
                if action == PLAN_PROCEED:
                    pending.append(target)
                else:
                    taken.append((stage, action, target))
        return tuple(taken)

    def _final_after(
        self,
        edges: tuple[tuple[PlanEdge, ...], ...],
        index: int,
        fields: dict[str, Any],
        scope: Scope | None,
        memo: Memo,
        own: Memo,
    ) -> int | None:
        """A FINAL state reachable by PROCEED alone (the rest of the pattern may match nothing)."""
        kinds = self._kinds
        pending = [index]
        while pending:
            current = pending.pop()
            for checks, action, target, _stage in edges[current]:
                if action != PLAN_PROCEED or (checks and not holds_all(checks, fields, scope, memo, own)):
                    continue
                if kinds[target] == FINAL:
                    return target
                pending.append(target)
        return None

    # -- after-match skip
