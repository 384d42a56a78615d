"""The matcher's shortcuts change no result: plans per event type, tests on the event's fields, skipped scopes.

The matcher decides what it can of a condition from the event type once per type, evaluates the conditions
that read only the event on its fields (no scope, no resolver), and builds a scope of the partial match only
when a test may read it (sparkcep.cep.nfa, sparkcep.cep.shapes.Shape). The reference is the same automaton with
every edge's shape removed: each condition is then evaluated as written, in a scope, every time. Random patterns
of every form over random events must give the same matches, timeouts and errors both ways.
"""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sparkcep.cep import PatternError, compile_matcher
from sparkcep.cep.nfa import Matcher
from sparkcep.cep.partials import Result

# Conditions of every shape the compiler knows: type tests alone, type tests with other terms (first, last, inside
# an "or"), terms without a type test, terms that read the partial match, running stages, and terms that fail on
# some events (comparing text with a number).
CONDITIONS = [
    "event_type = 'PAY'",
    "event_type in ('PAY', 'REFUND')",
    "event_type = 'PAY' and amount > 1",
    "amount < 3 and event_type = 'LOGIN'",
    "event_type = 'REFUND' or amount = 0",
    "amount > 2",
    "note = 'x'",
    "event_type = 'PAY' and note > 1",
    "event_type = 'PAY' and amount > last(a).amount",
    "count(a) < 2 and event_type != 'LOGIN'",
    "amount >= first(a).amount",
    "event_type = 'PAY' and (count(a) = 0 or amount > last(a).amount)",
]
UNTIL = ["event_type = 'LOGIN'", "amount = 4", "amount > last(a).amount"]


def quantify(draw: st.DrawFn, stage: dict[str, Any]) -> None:
    """A quantifier for a stage that is not a negation, and for loops greedy, until and consecutive."""
    quantifier = draw(st.sampled_from(["once", "optional", "times", "range", "times_or_more", "one_or_more"]))
    if quantifier == "optional":
        stage["optional"] = True
    elif quantifier == "times":
        stage["times"] = draw(st.integers(1, 3))
    elif quantifier == "range":
        stage["times"] = [1, draw(st.integers(2, 3))]
    elif quantifier == "times_or_more":
        stage["times_or_more"] = draw(st.integers(1, 2))
    elif quantifier == "one_or_more":
        stage["one_or_more"] = True
    if quantifier in ("range", "times_or_more", "one_or_more"):
        for option, value in (("greedy", True), ("until", draw(st.sampled_from(UNTIL))), ("consecutive", True)):
            if draw(st.booleans()):
                stage[option] = value
    if draw(st.integers(0, 4)) == 0:
        stage["running"] = True


@st.composite
def stages(draw: st.DrawFn) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    for number in range(draw(st.integers(1, 4))):
        stage: dict[str, Any] = {"name": "abcd"[number], "where": draw(st.sampled_from(CONDITIONS))}
        if number:
            stage["contiguity"] = draw(
                st.sampled_from(["next", "followed_by", "followed_by_any", "not_next", "not_followed_by"])
            )
        if stage.get("contiguity") not in ("not_next", "not_followed_by"):
            quantify(draw, stage)
        made.append(stage)
    return made


@st.composite
def patterns(draw: st.DrawFn) -> dict[str, Any]:
    pattern: dict[str, Any] = {"stages": draw(stages()), "within": draw(st.sampled_from(["5s", "20s"]))}
    skip = draw(st.sampled_from(["NO_SKIP", "SKIP_TO_NEXT", "SKIP_PAST_LAST_EVENT", "SKIP_TO_FIRST"]))
    if skip == "SKIP_TO_FIRST":
        pattern["skip"] = {"strategy": "SKIP_TO_FIRST", "stage": "a"}
    elif skip != "NO_SKIP":
        pattern["skip"] = skip
    return pattern


EVENTS = st.lists(
    st.tuples(
        st.integers(0, 30),
        st.sampled_from(["PAY", "REFUND", "LOGIN", "PAY", "REFUND", "LOGIN", None, 7, ["PAY"]]),
        st.one_of(st.integers(0, 4), st.none()),
        st.sampled_from(["x", "y", 2, None]),
    ),
    max_size=12,
)


def in_time(event: tuple[int, object, int | None, object]) -> tuple[int, str]:
    return event[0], repr(event)


def general(matcher: Matcher) -> Matcher:
    """The same automaton with nothing known of its conditions: every condition evaluated as written."""
    for state in matcher.automaton.states:
        for edge in state.edges:
            edge.shape = None
    return Matcher(matcher.automaton)


def run(matcher: Matcher, events: list[tuple[int, object, int | None, object]]) -> list[Result] | str:
    """Every result, or the error that stopped the run (with the results before it)."""
    state, found = matcher.initial(), []
    try:
        for number, (second, kind, amount, note) in enumerate(sorted(events, key=in_time)):
            fields = {"event_type": kind, "amount": amount, "note": note}
            state = matcher.advance_through(state, second * 1000, found)
            if matcher.is_idle(state):  # as the engine does for a key without state
                state = matcher.begin(second * 1000, f"e{number:02d}", fields, found) or matcher.initial()
            else:
                state = matcher.process(state, second * 1000, f"e{number:02d}", fields, found)
        matcher.advance_through(state, 10**6, found)
    except Exception as error:  # the error itself is the result compared
        return f"{found!r} then {type(error).__name__}: {error}"
    return found


@settings(max_examples=400, deadline=None)
@given(pattern=patterns(), events=EVENTS, type_field=st.sampled_from(["event_type", None]))
def test_plans_and_field_tests_give_the_results_of_evaluating_every_condition(
    pattern: dict[str, Any], events: list[tuple[int, object, int | None, object]], type_field: str | None
) -> None:
    try:
        fast = compile_matcher(pattern, type_field)
        reference = general(compile_matcher(pattern, type_field))
    except PatternError:
        assume(False)
        return
    assert run(fast, events) == run(reference, events)


def test_conditions_that_read_only_the_event_are_tested_on_its_fields() -> None:
    # What the property above relies on: the shortcuts are in use (a pattern that reads its partial match only in
    # its last stage builds no scope before it).
    matcher = compile_matcher({
        "stages": [{"name": "a", "where": "event_type = 'PAY' and amount > 1"},
                   {"name": "b", "contiguity": "followed_by", "where": "amount > last(a).amount"}],
        "within": "1m",
    })  # fmt: skip
    plan = matcher._plan({"event_type": "PAY", "amount": 2})
    start = matcher.automaton.start
    assert not plan.scoped[start]
    assert any(plan.scoped)
    [(checks, *_)] = [edge for edge in plan.edges[start] if edge[2] != start]
    [(test, negated, pure)] = checks
    assert pure and not negated and test({"amount": 2}) and not test({"amount": 1})


@settings(max_examples=300, deadline=None)
@given(pattern=patterns(), events=EVENTS)
def test_partial_matches_stay_in_start_order_with_the_start_partial_match_last(
    pattern: dict[str, Any], events: list[tuple[int, object, int | None, object]]
) -> None:
    # Matcher.idle_and_timeout reads the earliest start from the first partial match.
    try:
        matcher = compile_matcher(pattern)
    except PatternError:
        assume(False)
        return
    state, found = matcher.initial(), []
    for number, (second, kind, amount, note) in enumerate(sorted(events, key=in_time)):
        fields = {"event_type": kind, "amount": amount, "note": note}
        try:
            state = matcher.advance_through(state, second * 1000, found)
            state = matcher.process(state, second * 1000, f"e{number:02d}", fields, found)
        except Exception:  # a condition failing on these fields: the order held up to it
            return
        starts = [(partial[1], partial[2]) for partial in state[0]]
        assert starts == sorted(starts)
        assert starts[-1] == (1 << 62, 1 << 62) and starts.count(starts[-1]) == 1
