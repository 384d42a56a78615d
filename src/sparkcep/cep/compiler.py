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

from dataclasses import replace

from sparkcep.cep.automaton import FINAL, IGNORE, NORMAL, PENDING, PROCEED, STOP, TAKE, Automaton, AutomatonState
from sparkcep.cep.conditions import TRUE, Condition, both, negate, where
from sparkcep.cep.shapes import TRUE_SHAPE, Shape, both_records, negated_record, where_shape
from sparkcep.cep.spec import Contiguity, PatternSpec, StageSpec
from sparkcep.expr import Expression


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
        return self.shared.noted(condition, where_shape(expression, self.type_field, typed, condition))

    def negate(self, condition: Condition) -> Condition:
        shape = self.shared.shape_of(condition)
        negated = negate(condition)
        record = None if shape.record is None else negated_record(shape.record)
        return self.shared.noted(negated, Shape("not", negated.test, shape.reads_match, parts=(shape,), record=record))

    def both(self, left: Condition, right: Condition) -> Condition:
        shapes = (self.shared.shape_of(left), self.shared.shape_of(right))
        reads_match = shapes[0].reads_match or shapes[1].reads_match
        combined = both(left, right)
        first, second = shapes[0].record, shapes[1].record
        record = None if first is None or second is None else both_records(first, second)
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
