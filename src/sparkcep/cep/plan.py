"""A matcher's plan for events of one type, and the evaluation of the tests a plan leaves, once per event or
partial match. (``Matcher``: sparkcep.cep.nfa.Matcher.)

Speed: most conditions start with a test of the event type, so for one event type most edges are known to hold or
not before anything is evaluated. The matcher keeps, per event type seen, a :class:`Plan`: the automaton with
those edges decided (see :class:`sparkcep.cep.shapes.Shape`), and per state what an event of that type does when
no condition is left to evaluate. A partial match that can only ignore the event stays as it is, without a
scope, a test or a new tuple. Conditions that do not read the partial match are evaluated at most once per event,
on the event's fields (compiled to read the mapping, :attr:`sparkcep.cep.shapes.Shape.record`), and a
:class:`Scope` of the partial match is built only where a test may read it (:attr:`Plan.scoped`).
Tests run in the order they always did, and a test is only skipped when its value cannot depend on anything but
the event type, so results and errors are those of evaluating every edge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from sparkcep.cep.automaton import FINAL, IGNORE, PROCEED, TAKE, Automaton
from sparkcep.cep.conditions import Scope
from sparkcep.cep.shapes import Literal, Test

# Edge actions inside plans, as small ints (compared once per edge tested, where comparing strings costs more).
PLAN_PROCEED: Final = 0
PLAN_TAKE: Final = 1
PLAN_IGNORE: Final = 2
PLAN_ACTIONS: Final = {PROCEED: PLAN_PROCEED, TAKE: PLAN_TAKE, IGNORE: PLAN_IGNORE}
# A plan's final-after entry when conditions must be evaluated to know it.
DYNAMIC: Final = -1
UNSET: Final = object()

# An edge in a plan: (the tests that must all hold, evaluated in order until one fails, none when it always holds
# for the events the plan is for; action; target; source stage). See Shape.literals.
PlanEdge = tuple[tuple[Literal, ...], int, int, str]
Taken = tuple[tuple[str, int, int], ...]  # (source stage, PLAN_TAKE or PLAN_IGNORE, target) in traversal order
Memo = dict[Callable[[Any], bool], bool]


class Plan:
    """The automaton for events of one type (or of any type, deciding only what needs no type).

    ``edges`` per state: the edges that may hold, each with what is left to test of its condition (those that
    cannot hold are left out). ``taken`` per state: what such an event takes or ignores from there, when nothing is
    left to test on the way (None: tests decide). ``keeps``: the event is only ignored there, so a partial match
    waiting there stays as it is; ``quiet``: nothing at all happens there; ``takes``: whether such an event is
    taken from there (None: tests decide). ``finals`` per state:
    :meth:`Matcher._final_after` when nothing is left to test (:data:`DYNAMIC`: tests decide). ``scoped`` per
    state: whether matching such an event from there may evaluate a test that reads the partial match (only
    then is a :class:`Scope` built; the other tests read the event's fields). ``gate``: when whether such an
    event begins a match is one test of its fields, that test and whether it is negated (None: otherwise).
    """

    __slots__ = ("edges", "finals", "gate", "keeps", "quiet", "scoped", "taken", "takes")

    def __init__(self, automaton: Automaton, event_type: str | None) -> None:
        edges: list[tuple[PlanEdge, ...]] = []
        for state in automaton.states:
            planned: list[PlanEdge] = []
            for edge in state.edges:
                if edge.shape is None:
                    checks: tuple[Literal, ...] | None = ((edge.condition.test, False, False),)
                else:
                    checks = edge.shape.literals(event_type)
                if checks is not None:  # None: it never holds for this type, and nothing that could fail is skipped
                    planned.append((checks, PLAN_ACTIONS[edge.action], edge.target.index, state.stage))
            edges.append(tuple(planned))
        self.edges = tuple(edges)
        self.taken = tuple(self._static_taken(index) for index in range(len(edges)))
        self.keeps = tuple(
            taken is not None and len(taken) == 1 and taken[0][1:] == (PLAN_IGNORE, index)
            for index, taken in enumerate(self.taken)
        )
        self.quiet = tuple(taken == () for taken in self.taken)
        self.takes = tuple(None if taken is None else any(t[1] == PLAN_TAKE for t in taken) for taken in self.taken)
        kinds = [state.kind for state in automaton.states]
        self.finals = tuple(self._static_final(index, kinds) for index in range(len(edges)))
        self.scoped = tuple(self._reads_match(index) for index in range(len(edges)))
        self.gate: tuple[Callable[[Any], bool], bool] | None = None
        first = automaton.states[automaton.start]
        if self.takes[automaton.start] is None and not any(edge.action == PROCEED for edge in first.edges):
            takes = [checks for checks, action, *_ in self.edges[automaton.start] if action == PLAN_TAKE]
            if len(takes) == 1 and len(takes[0]) == 1 and takes[0][0][2]:  # one test, of the event alone
                test, negated, _pure = takes[0][0]
                self.gate = (test, negated)

    def _proceeds(self, index: int) -> set[int]:
        """``index`` and every state reachable from it by PROCEED edges (whatever their tests)."""
        seen = {index}
        pending = [index]
        while pending:
            for _checks, action, target, _stage in self.edges[pending.pop()]:
                if action == PLAN_PROCEED and target not in seen:
                    seen.add(target)
                    pending.append(target)
        return seen

    def _reads_match(self, index: int) -> bool:
        """Whether :meth:`Matcher._step` from ``index`` may test something that reads the partial match: in
        :meth:`Matcher._walk` (the PROCEED closure of ``index``) or :meth:`Matcher._final_after` (the PROCEED
        closure of what a TAKE edge reaches). A superset of what is tested, which is enough."""
        walked = self._proceeds(index)
        after: set[int] = set()
        for current in walked:
            for _checks, action, target, _stage in self.edges[current]:
                if action == PLAN_TAKE:
                    after |= self._proceeds(target)
        tested = [checks for state in walked for checks, *_ in self.edges[state]]
        tested += [checks for state in after for checks, action, *_ in self.edges[state] if action == PLAN_PROCEED]
        return any(not pure for checks in tested for _test, _negated, pure in checks)

    def _static_taken(self, index: int) -> Taken | None:
        """:meth:`Matcher._walk` from ``index`` when it tests nothing (None: it would)."""
        taken: list[tuple[str, int, int]] = []
        pending = [index]
        while pending:
            current = pending.pop()
            for checks, action, target, stage in self.edges[current]:
                if checks:
                    return None
                if action == PLAN_PROCEED:
                    pending.append(target)
                else:
                    taken.append((stage, action, target))
        return tuple(taken)

    def _static_final(self, index: int, kinds: list[str]) -> int | None:
        """:meth:`Matcher._final_after` from ``index`` when it tests nothing (:data:`DYNAMIC`: it would)."""
        pending = [index]
        while pending:
            current = pending.pop()
            for checks, action, target, _stage in self.edges[current]:
                if action == PLAN_PROCEED:
                    if checks:
                        return DYNAMIC
                    if kinds[target] == FINAL:
                        return target
                    pending.append(target)
        return None


def tested(test: Test, scope: Scope, memo: Memo) -> bool:
    """``test(scope)``, evaluated once per ``memo``."""
    holds = memo.get(test, UNSET)
    if holds is UNSET:
        holds = memo[test] = test(scope)
    return bool(holds)


def holds_all(checks: tuple[Literal, ...], fields: dict[str, Any], scope: Scope | None, memo: Memo, own: Memo) -> bool:
    """Whether every test holds, in order until one fails. A test that reads only the event takes its ``fields`` and
    its result is kept for the event in ``memo``; any other takes ``scope`` (the event and the partial match) and
    its result is kept for the partial match in ``own`` (a condition and its negation test it once)."""
    for test, negated, pure in checks:
        if pure:
            holds = memo.get(test, UNSET)
            if holds is UNSET:
                holds = memo[test] = test(fields)
        else:
            holds = own.get(test, UNSET)
            if holds is UNSET:
                holds = own[test] = test(scope)
        if (not holds) is not negated:  # it fails: false, or true and negated
            return False
    return True
