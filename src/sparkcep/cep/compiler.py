"""Pattern spec -> automaton of states with TAKE, IGNORE and PROCEED edges (Flink CEP's NFA model).

The automaton is built from the last stage back to the first, so every state knows the state it leads to:

- TAKE consumes the event into the source state's stage and moves to the target;
- IGNORE skips the event and stays (or moves to a copy without the PROCEED edge, so a skipped optional
  stage branches once, not once per event);
- PROCEED is an epsilon move taken on the same event (leaving an optional stage or a loop).

Contiguity becomes the IGNORE condition: strict has none, relaxed ignores events that do not match, "any"
ignores every event (and so also branches on matching ones). ``not_next`` is a state whose matching event
leads to a STOP state (the partial match dies); ``not_followed_by`` is folded into PROCEED-to-STOP edges on
the states that wait after it, or, at the end of a pattern, a PENDING state that becomes a match when
``within`` runs out. Greedy loops remove their take condition from the following state's edges. Until
conditions cut a loop's TAKE and IGNORE edges.

A group is built round by round: each round is its members built as a sequence of their own (sharing state
numbering and dead ends) whose first member follows the previous stage by the group's contiguity (first round)
or by the group's inner contiguity (later rounds). Optional rounds and loops hang off PROCEED-only junction
states that either start another round or leave the group.

Every edge also carries the :class:`Shape` of its condition: what is known of it before it is evaluated (its
value for an event of a given type, whether it reads the partial match), which lets the matcher decide most
edges for an event type once instead of testing them for every event and partial match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sparkcep.cep.conditions import TRUE, Condition, Scope, both, negate, required_types, where
from sparkcep.cep.conditions import _beyond_type_tests as beyond_type_tests
from sparkcep.cep.spec import Contiguity, PatternSpec, StageSpec
from sparkcep.expr import Expression, FunctionRegistry, compile_expression
from sparkcep.expr import ast as expr_ast

TAKE, IGNORE, PROCEED = "TAKE", "IGNORE", "PROCEED"
NORMAL, FINAL, STOP, PENDING = "normal", "final", "stop", "pending"


Test = Callable[[Scope], bool]
# A test of a condition that reads only the event under test, on the event's fields (no Scope to build, and the
# fields are read straight from the mapping rather than through a resolver).
RecordTest = Callable[[dict[str, Any]], bool]
# One test of a conjunction: (test, whether its result is inverted, whether it reads only the event under test).
# A test that reads only the event is a RecordTest, called with the event's fields; any other is a Test, called
# with a Scope of the event and the partial match.
Literal = tuple[Callable[[Any], bool], bool, bool]


@dataclass(frozen=True, slots=True, eq=False)
class Shape:
    """How the compiler built a condition, and so what is known of it before it is evaluated.

    ``kind``: "true" (always holds), "where" (a condition as written: ``types`` the event types it can hold for,
    None: any; ``type_only``: it tests nothing but the event type), "not" / "and" (of ``parts``, ``and`` evaluated
    left to right), "opaque" (nothing known). ``test`` is the condition's own test. ``reads_match``: it may read
    the partial match (stage or row functions), not only the event under test. When it does not, ``record`` is
    ``test`` on the event's fields (the same value and errors: the expression compiled to read the fields
    mapping, see sparkcep.expr.evaluate), and ``rest`` (a "where" with ``types``) what is left of it for an event
    whose type is one of ``types``: its other terms, without the type test.
    """

    kind: str
    test: Test
    reads_match: bool
    types: frozenset[str] | None = None
    type_only: bool = False
    parts: tuple[Shape, ...] = ()
    record: RecordTest | None = None
    rest: RecordTest | None = None

    def literals(self, event_type: str | None) -> tuple[Literal, ...] | None:  # noqa: PLR0911  # a case per kind
        """The condition for events whose type field is the text ``event_type`` (None: of any type), as tests that
        all hold when it holds, to evaluate left to right until one fails: what its own test evaluates, less what the
        type alone decides (which cannot fail). None: it never holds for that type; (): it always does."""
        own: tuple[Literal, ...] = (
            ((self.test, False, False),) if self.record is None else ((self.record, False, True),)
        )
        if self.kind == "true":
            return ()
        if self.kind == "where":
            if event_type is None or self.types is None:
                return own
            if event_type not in self.types:
                return None  # a condition as written with the type field tests the type first, and stops there
            if self.type_only:
                return ()
            return own if self.rest is None else ((self.rest, False, True),)
        if self.kind == "not":
            inner = self.parts[0].literals(event_type)
            if inner is None or not inner:
                return () if inner is None else None
            if len(inner) == 1:
                test, negated, pure = inner[0]
                return ((test, not negated, pure),)
            return own
        if self.kind == "and":
            first = self.parts[0].literals(event_type)
            second = None if first is None else self.parts[1].literals(event_type)
            if second is None:
                return None if not first else own  # a first part left to evaluate (it may fail) before the false one
            assert first is not None
            return first + second
        return own


def _always(fields: dict[str, Any]) -> bool:
    return True


TRUE_SHAPE = Shape("true", TRUE.test, reads_match=False, record=_always)


@dataclass(eq=False)
class Edge:
    action: str
    target: AutomatonState
    condition: Condition
    shape: Shape | None = None  # set by compile_automaton


@dataclass(eq=False)
class AutomatonState:
    index: int
    stage: str
    kind: str = NORMAL
    edges: list[Edge] = field(default_factory=list)

    def add(self, action: str, target: AutomatonState, condition: Condition) -> None:
        self.edges.append(Edge(action, target, condition))


@dataclass(frozen=True)
class Automaton:
    states: tuple[AutomatonState, ...]
    start: int
    spec: PatternSpec
    type_field: str | None = None


def compile_automaton(spec: PatternSpec, type_field: str | None = "event_type") -> Automaton:
    """``type_field`` names the event-type field, which lets conditions on it skip other events early."""
    builder = _Builder(spec, type_field)
    start = builder.build()
    reachable = _reachable(start)
    # Renumber the reachable states so indexes in saved partial matches are stable for a given pattern.
    for number, state in enumerate(reachable):
        state.index = number
        for edge in state.edges:
            edge.shape = builder.shared.shape_of(edge.condition)
    return Automaton(tuple(reachable), start.index, spec, type_field)


def _only_type_tests(node: expr_ast.Node, type_field: str) -> bool:
    """``node`` says nothing but which event types pass (``type = 'X'``, ``type in (...)``, and/or of those)."""
    if isinstance(node, expr_ast.And | expr_ast.Or):
        return all(_only_type_tests(operand, type_field) for operand in node.operands)
    return isinstance(node, expr_ast.Compare | expr_ast.In) and required_types(node, type_field) is not None


def _where_shape(expression: Expression, type_field: str | None, typed: bool, condition: Condition) -> Shape:
    """The shape of ``where(expression, ...)``: only lazy functions (stage and row functions) read the match.

    A condition built with the type field (``typed``) tests the event type first, so an event of another type
    fails it without evaluating the rest. One built without it evaluates the whole expression, so its value is
    known from the type alone only when the expression tests nothing else (which cannot fail on a text type).
    """
    functions = expression.functions
    reads_match = any(
        isinstance(node, expr_ast.Call) and functions.is_lazy(node.name) for node in expr_ast.walk(expression.node)
    )
    test = condition.test
    # Read only the event: the same expression on the fields mapping (a stage's "running" changes nothing then).
    record = None if reads_match else expression.record_test()
    if type_field is None:
        return Shape("where", test, reads_match, record=record)
    type_only = _only_type_tests(expression.node, type_field)
    if typed:
        types = condition.types
        if types is None or record is None:
            return Shape("where", test, reads_match, types, types is not None and type_only, record=record)
        # As sparkcep.cep.conditions.where evaluates it: the type test first, then the other terms.
        left = beyond_type_tests(expression.node, type_field)
        rest = None if left is None else record if left is expression.node else _record_test(left, functions)
        return Shape("where", test, False, types, type_only, record=_typed_record(type_field, types, rest), rest=rest)
    if type_only:
        return Shape("where", test, reads_match, required_types(expression.node, type_field), True, record=record)
    return Shape("where", test, reads_match, record=record)


def _record_test(node: expr_ast.Node, functions: FunctionRegistry) -> RecordTest:
    return compile_expression(node, functions).record_test()


def _typed_record(type_field: str, types: frozenset[str], rest: RecordTest | None) -> RecordTest:
    """A typed condition on the fields: its type test, then the rest of it (None: nothing else)."""
    if rest is None:
        return lambda fields: fields.get(type_field) in types
    return lambda fields: fields.get(type_field) in types and rest(fields)


def _negated_record(inner: RecordTest) -> RecordTest:
    return lambda fields: not inner(fields)


def _both_records(first: RecordTest, second: RecordTest) -> RecordTest:
    return lambda fields: first(fields) and second(fields)


def _reachable(start: AutomatonState) -> list[AutomatonState]:
    seen: dict[int, AutomatonState] = {}
    pending = [start]
    while pending:
        state = pending.pop(0)
        if id(state) in seen:
            continue
        seen[id(state)] = state
        pending.extend(edge.target for edge in state.edges)
    return list(seen.values())


class _Shared:
    """What the builders of a pattern and of its groups' rounds share."""

    def __init__(self) -> None:
        self.count = 0
        self.stops: dict[str, AutomatonState] = {}
        self.originals: dict[int, AutomatonState] = {}  # greedy + until: the following state before greedy edits
        # By id of each condition built: the condition (which keeps the id from being reused) and its shape.
        self.shapes: dict[int, tuple[Condition, Shape]] = {}
        # Conditions as written, by (id of the expression, label, typed, running): the expression and its condition.
        self.conditions: dict[tuple[int, str, bool, str | None], tuple[Expression, Condition]] = {}

    def noted(self, condition: Condition, shape: Shape) -> Condition:
        self.shapes[id(condition)] = (condition, shape)
        return condition

    def shape_of(self, condition: Condition) -> Shape:
        if condition is TRUE:
            return TRUE_SHAPE
        known = self.shapes.get(id(condition))
        return known[1] if known is not None and known[0] is condition else Shape("opaque", condition.test, True)


class _Builder:
    def __init__(
        self,
        spec: PatternSpec,
        type_field: str | None,
        stages: tuple[StageSpec, ...] | None = None,
        shared: _Shared | None = None,
    ) -> None:
        self.spec = spec
        self.type_field = type_field
        self.stages = spec.stages if stages is None else stages
        self.shared = _Shared() if shared is None else shared
        self.stops = self.shared.stops
        self.originals = self.shared.originals

    def new(self, stage: str, kind: str = NORMAL) -> AutomatonState:
        self.shared.count += 1
        return AutomatonState(self.shared.count, stage, kind)

    def build(self) -> AutomatonState:
        return self.chain(self.new("$end", FINAL))

    def chain(self, final: AutomatonState) -> AutomatonState:
        """The stages in sequence, leading to ``final`` (the match's end, or what follows a group's round)."""
        sink = final
        for index in range(len(self.stages) - 1, 0, -1):
            stage = self.stages[index]
            if stage.negated == "not_followed_by":
                if sink is final:  # at the end: the match waits for `within` without a matching event
                    pending = self.new(stage.name, PENDING)
                    condition = self.take(stage)
                    pending.add(PROCEED, self.stop(stage), condition)
                    pending.add(IGNORE, pending, self.negate(condition))
                    sink = pending
                # elsewhere it becomes PROCEED-to-STOP edges on the states after it (see nots_before)
            elif stage.negated == "not_next":
                state = self.new(stage.name)
                condition = self.take(stage)
                if sink is final:
                    state.add(IGNORE, final, self.negate(condition))
                else:
                    state.add(PROCEED, sink, self.negate(condition))
                state.add(PROCEED, self.stop(stage), condition)
                sink = state
            else:
                sink = self.convert(index, sink)
        return self.convert(0, sink)

    # -- conditions (built through these, which note each one's shape)

    def where(self, expression: Expression | None, label: str, typed: bool, running: str | None = None) -> Condition:
        """``typed``: the condition knows the event-type field (stage conditions do, until conditions do not).

        One condition object per expression and way of testing it: the matcher evaluates a test once per event or
        partial match, so a stage's TAKE edge and its negation on the IGNORE edge evaluate it once."""
        if expression is None:
            return TRUE
        made = (id(expression), label, typed, running)
        known = self.shared.conditions.get(made)
        if known is not None and known[0] is expression:
            return known[1]
        condition = where(expression, label, self.type_field if typed else None, running)
        self.shared.conditions[made] = (expression, condition)
        return self.shared.noted(condition, _where_shape(expression, self.type_field, typed, condition))

    def negate(self, condition: Condition) -> Condition:
        shape = self.shared.shape_of(condition)
        negated = negate(condition)
        record = None if shape.record is None else _negated_record(shape.record)
        return self.shared.noted(negated, Shape("not", negated.test, shape.reads_match, parts=(shape,), record=record))

    def both(self, left: Condition, right: Condition) -> Condition:
        shapes = (self.shared.shape_of(left), self.shared.shape_of(right))
        reads_match = shapes[0].reads_match or shapes[1].reads_match
        combined = both(left, right)
        first, second = shapes[0].record, shapes[1].record
        record = None if first is None or second is None else _both_records(first, second)
        return self.shared.noted(combined, Shape("and", combined.test, reads_match, parts=shapes, record=record))

    def take(self, stage: StageSpec) -> Condition:
        return self.where(stage.where, stage.name, True, stage.name if stage.running else None)

    def ignore(self, stage: StageSpec, contiguity: str) -> Condition | None:
        if contiguity == "strict":
            return None
        return self.negate(self.take(stage)) if contiguity == "relaxed" else TRUE

    def with_until(self, condition: Condition | None, stage: StageSpec, is_take: bool) -> Condition | None:
        if stage.until is None:
            return condition
        until = self.negate(self.where(stage.until, f"{stage.name} until", False))
        if condition is not None:
            return self.both(until, condition)
        return until if is_take else None

    def stop(self, stage: StageSpec) -> AutomatonState:
        state = self.stops.get(stage.name)
        if state is None:
            state = self.new(stage.name, STOP)
            state.add(TAKE, state, self.take(stage))
            self.stops[stage.name] = state
        return state

    def nots_before(self, index: int) -> list[StageSpec]:
        """not_followed_by stages that still apply at this stage (only optional stages in between)."""
        found = []
        position = index
        while position > 0 and (
            self.stages[position - 1].optional or self.stages[position - 1].negated == "not_followed_by"
        ):
            position -= 1
            if self.stages[position].negated == "not_followed_by":
                found.append(self.stages[position])
        return found

    # -- states

    def convert(self, index: int, sink: AutomatonState) -> AutomatonState:
        stage = self.stages[index]
        if stage.is_group:
            first = self.group(stage, sink)
            self.add_stops(index, first)
            return first
        if stage.looping:
            looping = self.looping(index, self.without_nots(index, sink))
            first = self.times(index, looping, sink, stage.min_times, stage.min_times)
        elif stage.repeated:
            assert stage.max_times is not None
            first = self.times(index, sink, sink, stage.min_times, stage.max_times)
        else:
            first = self.singleton(
                index, sink, sink, self.take(stage), self.ignore(stage, stage.contiguity), stage.optional
            )
        self.add_stops(index, first)
        return first

    def group(self, group: StageSpec, sink: AutomatonState) -> AutomatonState:
        def one_round(then: AutomatonState, contiguity: Contiguity) -> AutomatonState:
            first = replace(group.members[0], contiguity=contiguity)
            members = (first, *group.members[1:])
            return _Builder(self.spec, self.type_field, members, self.shared).chain(then)

        def either(round_start: AutomatonState) -> AutomatonState:
            junction = self.new(group.name)
            junction.add(PROCEED, round_start, TRUE)
            junction.add(PROCEED, sink, TRUE)
            return junction

        low, high = group.min_times, group.max_times
        if high is None:  # after the last required round: another round, or leave the group
            junction = self.new(group.name)
            junction.add(PROCEED, one_round(junction, group.inner), TRUE)
            junction.add(PROCEED, sink, TRUE)
            last = junction
        else:
            last = sink
            for _ in range(low, high):
                last = either(one_round(last, group.inner))
        for number in range(low, 0, -1):
            last = one_round(last, group.inner if number > 1 else group.contiguity)
        return either(last) if group.optional else last

    def add_stops(self, index: int, state: AutomatonState) -> None:
        for negation in self.nots_before(index):
            state.add(PROCEED, self.stop(negation), self.take(negation))

    def add_stop_to_loop(self, index: int, state: AutomatonState) -> None:
        following = self.stages[index + 1] if index + 1 < len(self.stages) else None
        if following is not None and following.negated == "not_followed_by":
            state.add(PROCEED, self.stop(following), self.take(following))

    def times(self, index: int, sink: AutomatonState, proceed: AutomatonState, low: int, high: int) -> AutomatonState:
        stage = self.stages[index]
        inner_ignore = self.with_until(self.ignore(stage, stage.inner), stage, False)
        take = self.with_until(self.take(stage), stage, True)
        assert take is not None
        if stage.greedy and low != high:
            if stage.until is not None:
                self.originals[id(sink)] = self.copy(sink)
            self.make_greedy(sink, take)
        last = sink
        for _ in range(low, high):
            last = self.singleton(index, last, proceed, take, inner_ignore, optional=True)
            self.add_stop_to_loop(index, last)
        for _ in range(low - 1):
            last = self.singleton(index, last, None, take, inner_ignore, optional=False)
            self.add_stop_to_loop(index, last)
        return self.singleton(index, last, proceed, take, self.ignore(stage, stage.contiguity), stage.optional)

    def singleton(
        self,
        index: int,
        sink: AutomatonState,
        proceed: AutomatonState | None,
        take: Condition,
        ignore: Condition | None,
        optional: bool,
    ) -> AutomatonState:
        stage = self.stages[index]
        state = self.new(stage.name)
        target = self.without_nots(index, sink)
        state.add(TAKE, target, take)
        if optional:
            assert proceed is not None
            if stage.greedy and stage.until is not None:
                until = self.where(stage.until, f"{stage.name} until", False)
                state.add(PROCEED, self.originals.get(id(proceed), proceed), until)
                state.add(PROCEED, proceed, self.negate(until))
            else:
                state.add(PROCEED, proceed, TRUE)
        if ignore is not None:
            if optional:  # a copy without PROCEED: skipping the optional stage is decided once, at the first event
                waiting = self.new(stage.name)
                waiting.add(TAKE, target, take)
                waiting.add(IGNORE, waiting, ignore)
                self.add_stops(index, waiting)
            else:
                waiting = state
            state.add(IGNORE, waiting, ignore)
        return state

    def looping(self, index: int, sink: AutomatonState) -> AutomatonState:
        stage = self.stages[index]
        ignore = self.with_until(self.ignore(stage, stage.inner), stage, False)
        take = self.with_until(self.take(stage), stage, True)
        assert take is not None
        state = self.new(stage.name)
        if stage.greedy:
            if stage.until is not None:
                until = self.where(stage.until, f"{stage.name} until", False)
                original = self.copy(sink)
                state.add(PROCEED, original, until)
                self.originals[id(sink)] = original
                state.add(PROCEED, sink, self.negate(until))
            else:
                state.add(PROCEED, sink, TRUE)
            self.make_greedy(sink, self.take(stage))
        else:
            state.add(PROCEED, sink, TRUE)
        state.add(TAKE, state, take)
        self.add_stop_to_loop(index, state)
        if ignore is not None:
            waiting = self.new(stage.name)
            waiting.add(TAKE, state, take)
            waiting.add(IGNORE, waiting, ignore)
            state.add(IGNORE, waiting, ignore)
            self.add_stop_to_loop(index, waiting)
        return state

    def make_greedy(self, state: AutomatonState, take: Condition) -> None:
        """The state after a greedy stage may not use an event the greedy stage could take."""
        for edge in state.edges:
            edge.condition = self.both(edge.condition, self.negate(take))

    def copy(self, state: AutomatonState) -> AutomatonState:
        duplicate = self.new(state.stage, state.kind)
        for edge in state.edges:
            duplicate.add(edge.action, duplicate if edge.target is state else edge.target, edge.condition)
        return duplicate

    def without_nots(self, index: int, sink: AutomatonState) -> AutomatonState:
        """After an optional stage takes an event, negations before that stage no longer apply.

        E.g. ``a, not_followed_by b, followed_by c (optional), followed_by d``: ``a c b d`` matches, ``a b d``
        does not. Copies the following states without their STOP edges for those negations.
        """
        negations = {stage.name for stage in self.nots_before(index)}
        if not negations or not self.stages[index].optional:
            return sink
        duplicate = self.new(sink.stage, sink.kind)
        for edge in sink.edges:
            if edge.action == PROCEED:
                if edge.target.kind == STOP:
                    if edge.target.stage in negations:
                        continue
                    duplicate.add(PROCEED, edge.target, edge.condition)
                else:
                    duplicate.add(PROCEED, self.without_nots(index, edge.target), edge.condition)
            else:
                duplicate.add(edge.action, duplicate if edge.target is sink else edge.target, edge.condition)
        return duplicate
