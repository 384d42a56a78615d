"""Pattern JSON -> validated, immutable pattern specs.

Every error is a :class:`PatternError` naming the stage and the field, what was expected and what came, e.g.
``stage 'b' (stages[1]), field 'times': expected n, [n, m] or [n, null] with 1 <= n <= m, got [3, 2]``.
The static checks follow Flink CEP's pattern checks (names unique, quantifier options only on looping
stages, no optional path into a negation, ...) and add one of our own: a looping stage must be bounded by
``within`` or ``until``, or the pattern must cap its partial matches per key (``max_partial_matches``) or say
``"unbounded": true``, otherwise its partial matches could grow without limit.

A stage may be a group (``"group": [stages]``, Flink's ``begin(Pattern)`` / ``followedBy(Pattern)``): its
members are stages of their own, matched in sequence, and the group as a whole takes a quantifier.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sparkcep.cep.conditions import pattern_functions, stage_references
from sparkcep.cep.pattern_error import PatternError
from sparkcep.cep.ties import TieField, parse_tie_break
from sparkcep.errors import DurationError, Verbatim
from sparkcep.expr import (
    Expression,
    ExpressionError,
    ExpressionTypeError,
    FunctionRegistry,
    compile_expression,
    infer_type,
    require_boolean,
)
from sparkcep.timeutil import positive_duration

Contiguity = Literal["strict", "relaxed", "any"]
CONTIGUITIES: dict[str, Contiguity] = {"next": "strict", "followed_by": "relaxed", "followed_by_any": "any"}
NEGATIONS = ("not_next", "not_followed_by")
SKIPS = ("NO_SKIP", "SKIP_TO_NEXT", "SKIP_PAST_LAST_EVENT", "SKIP_TO_FIRST", "SKIP_TO_LAST")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STAGE_KEYS = {
    "name", "where", "contiguity", "times", "one_or_more", "times_or_more", "optional", "greedy",
    "consecutive", "allow_combinations", "until", "within", "running",
}  # fmt: skip
_GROUP_KEYS = {
    "name", "group", "contiguity", "times", "one_or_more", "times_or_more", "optional", "consecutive",
    "allow_combinations",
}  # fmt: skip
_PATTERN_KEYS = {"stages", "within", "skip", "max_partial_matches", "unbounded", "tie_break"}
# A cap on partial matches per key is a memory bound: beyond a million the cap no longer protects anything.
MAX_PARTIAL_MATCHES = 1_000_000


@dataclass(frozen=True)
class StageSpec:
    name: str
    where: Expression | None
    # How this stage follows the previous one; the first stage has "strict" (it starts a match).
    contiguity: Contiguity
    negated: Literal["not_next", "not_followed_by"] | None
    min_times: int
    max_times: int | None  # None: unbounded (a looping stage)
    optional: bool
    greedy: bool
    inner: Contiguity  # between the events of a looping or repeated stage
    until: Expression | None
    # Flink's within(..., PREVIOUS_AND_CURRENT): a partial match waiting in this stage dies when this much
    # time has passed since its last event.
    within_ms: int | None = None
    members: tuple[StageSpec, ...] = ()  # a group's stages; empty for a plain stage
    place: str = field(default="", compare=False)  # where it is in the pattern JSON: "stages[2].group[0]"
    # SQL's RUNNING semantics: stage functions over this stage count the event being tested.
    running: bool = False

    @property
    def is_group(self) -> bool:
        return bool(self.members)

    def leaves(self) -> tuple[StageSpec, ...]:
        """The plain stages in this stage (itself, or a group's members, nested groups flattened)."""
        if not self.members:
            return (self,)
        return tuple(leaf for member in self.members for leaf in member.leaves())

    @property
    def looping(self) -> bool:
        return self.max_times is None

    @property
    def repeated(self) -> bool:
        return self.max_times is None or self.max_times > 1


@dataclass(frozen=True)
class SkipSpec:
    strategy: str
    stage: str | None = None

    def describe(self) -> str:
        return self.strategy if self.stage is None else f"{self.strategy}({self.stage})"


@dataclass(frozen=True)
class PatternSpec:
    stages: tuple[StageSpec, ...]
    within_ms: int | None
    skip: SkipSpec
    functions: FunctionRegistry = field(compare=False, repr=False)  # what conditions and measures compile with
    # Partial matches kept per key (None: no cap); beyond it the oldest is dropped and reported.
    max_partial_matches: int | None = None
    # Fields that order events of equal time before the event id (SQL's ORDER BY time, c, ...; see cep.ties).
    tie_break: tuple[TieField, ...] = ()

    def leaves(self) -> tuple[StageSpec, ...]:
        """Every plain stage in matching order, group members included (the names events are matched under)."""
        return tuple(leaf for stage in self.stages for leaf in stage.leaves())

    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.leaves())

    @property
    def stage_windows(self) -> bool:
        """Whether any stage has a within of its own (PREVIOUS_AND_CURRENT)."""
        return any(stage.within_ms is not None for stage in self.leaves())


def parse_pattern(raw: object) -> PatternSpec:
    """Validate a pattern object (see docs/patterns.md)."""
    if not isinstance(raw, Mapping):
        raise PatternError("pattern", "<pattern>", "an object with 'stages'", type(raw).__name__)
    unknown = sorted(set(raw) - _PATTERN_KEYS)
    if unknown:
        raise PatternError("pattern", unknown[0], f"one of {sorted(_PATTERN_KEYS)}", unknown[0])
    stages_raw = raw.get("stages")
    if not isinstance(stages_raw, list) or not stages_raw:
        raise PatternError("pattern", "stages", "a non-empty list of stages", stages_raw)
    within = _within(raw.get("within"))
    cap = _cap(raw)
    tie_break = parse_tie_break(raw.get("tie_break"))
    names: list[str] = []  # every name in the pattern, groups' too: all must differ
    leaves: list[str] = []  # the names events are matched under (stage functions name these)
    _collect_names(stages_raw, "stages", names, leaves, depth=0)
    functions = pattern_functions(tuple(leaves))
    parsed = _Parsed(functions, frozenset(leaves))
    stages = tuple(parsed.element(f"stages[{index}]", index, item) for index, item in enumerate(stages_raw))
    _check_no_later_stages(stages)
    skip = _skip(raw.get("skip", "NO_SKIP"), stages)
    _check_shape(stages, within, cap is not None or raw.get("unbounded") is True, "stages")
    size = sum(_states(stage) for stage in stages)
    if size > MAX_STATES:
        raise PatternError(
            "pattern", "stages", f"at most {MAX_STATES:,} automaton states (a quantifier repeats its stage's states, "
            "a group's rounds repeat all its members)", f"about {size:,}",
        )  # fmt: skip
    return PatternSpec(stages, within, skip, functions, cap, tie_break)


# Quantifiers unroll into states, and groups multiply their members' states by their rounds, so nested groups
# with large counts could build an automaton of any size. The estimate counts waiting copies too: 6,000 rounds of
# a 4-member group (96,020 estimated, 24,002 real states) compile in 0.6 s.
MAX_STATES = 100_000


def _states(stage: StageSpec) -> int:
    """About how many automaton states ``stage`` unrolls into (an upper bound good enough to refuse a blow-up)."""
    rounds = (stage.max_times or stage.min_times) + 1
    inner = sum(_states(member) for member in stage.members) if stage.members else 2
    return rounds * inner


# Groups nest (a group of groups): deeper than this is a mistake, and recursion must stay bounded.
MAX_GROUP_DEPTH = 8


def _collect_names(items: list[Any], path: str, names: list[str], leaves: list[str], depth: int) -> None:
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, Mapping) else None
        place = f"{path}[{index}]"
        if not isinstance(name, str) or not _NAME.match(name):
            raise PatternError(place, "name", "a name like 'big_order' ([A-Za-z_][A-Za-z0-9_]*)", name)
        if name in names:
            raise PatternError(place, "name", "a name not used by another stage", name)
        names.append(name)
        assert isinstance(item, Mapping)
        members = item.get("group")
        if members is None:
            leaves.append(name)
            continue
        where = f"group {name!r} ({place})"
        if not isinstance(members, list) or not members:
            raise PatternError(where, "group", "a non-empty list of stages", members)
        if depth + 1 >= MAX_GROUP_DEPTH:
            raise PatternError(where, "group", f"groups nested at most {MAX_GROUP_DEPTH} deep", "deeper")
        _collect_names(members, f"{place}.group", names, leaves, depth + 1)


def _cap(raw: Mapping[str, Any]) -> int | None:
    unbounded = raw.get("unbounded", False)
    if not isinstance(unbounded, bool):
        raise PatternError("pattern", "unbounded", "true or false", unbounded)
    cap = raw.get("max_partial_matches")
    if cap is None:
        return None
    if type(cap) is not int or not 1 <= cap <= MAX_PARTIAL_MATCHES:
        raise PatternError("pattern", "max_partial_matches", f"an integer from 1 to {MAX_PARTIAL_MATCHES:,}", cap)
    if unbounded:
        raise PatternError("pattern", "unbounded", "not together with max_partial_matches", True)
    return cap


def _check_no_later_stages(stages: tuple[StageSpec, ...]) -> None:
    """A condition reads the events of its own stage and earlier ones: a later stage has matched nothing yet when
    the condition is tested, so naming it is a mistake (Flink would silently see no events). Group members count
    in matching order (a group's first member may not read its last one, even from an earlier round)."""
    leaves = [leaf for stage in stages for leaf in stage.leaves()]
    names = frozenset(leaf.name for leaf in leaves)
    for index, stage in enumerate(leaves):
        allowed = {earlier.name for earlier in leaves[: index + 1]}
        for field_name, expression in (("where", stage.where), ("until", stage.until)):
            later = set() if expression is None else stage_references(expression.node, names) - allowed
            if later:
                where = f"stage {stage.name!r} ({stage.place})"
                expected = f"conditions over this stage and earlier ones ({', '.join(sorted(allowed))})"
                raise PatternError(where, field_name, expected, f"a condition naming {', '.join(sorted(later))}")


def _within(value: object) -> int | None:
    if value is None:
        return None
    try:
        return positive_duration(value)
    except DurationError:
        raise PatternError("pattern", "within", "a positive duration such as '10m' or milliseconds", value) from None


def _flag(where: str, item: Mapping[str, Any], field: str) -> bool:
    value = item.get(field, False)
    if not isinstance(value, bool):
        raise PatternError(where, field, "true or false", value)
    return value


def compile_condition(
    where: str, field: str, value: object, functions: FunctionRegistry, stages: frozenset[str], boolean: bool = True
) -> Expression | None:
    """Compile a condition (``boolean``: it must be a boolean, as ``where`` and ``until`` are) or a measure (any
    type); stage functions must name existing stages, and the types must work (see sparkcep.expr.typecheck)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise PatternError(where, field, 'a condition as text, e.g. "amount > 10"', value)
    try:
        expression = compile_expression(value, functions)
    except ExpressionError as error:
        raise PatternError(where, field, "a valid condition", f"{value!r}: {error}") from None
    try:
        stage_references(expression.node, stages)
    except ExpressionError as error:
        raise PatternError(where, field, "stage functions over existing stages", f"{value!r}: {error}") from None
    try:
        if boolean:
            require_boolean(expression)
        else:
            infer_type(expression)
    except ExpressionTypeError as error:
        raise PatternError(where, field, error.expected, Verbatim(error.got_at)) from None
    return expression


# The compiler unrolls a quantifier into one automaton state per repetition: 10,000 compile in 0.2 s, while
# "times": 1000000000 never finished (and 10**6 took 71 s to start a job).
MAX_TIMES = 10_000


def _times(where: str, item: Mapping[str, Any]) -> tuple[int, int | None]:
    low, high = _given_times(where, item)
    if low > MAX_TIMES or (high is not None and high > MAX_TIMES):
        field = next((key for key in ("times", "times_or_more") if key in item), "times")
        raise PatternError(where, field, f"counts of at most {MAX_TIMES:,} repetitions", item.get(field))
    return low, high


def _given_times(where: str, item: Mapping[str, Any]) -> tuple[int, int | None]:
    given = [key for key in ("times", "one_or_more", "times_or_more") if key in item]
    if len(given) > 1:
        raise PatternError(where, given[1], f"only one of times, one_or_more, times_or_more (got {given[0]} too)", True)
    if not given:
        return 1, 1
    value = item[given[0]]
    expected = "n, [n, m] or [n, null] with 1 <= n <= m (or [0, m] / [0, null]: optional)"
    if given[0] == "one_or_more":
        if value is not True:
            raise PatternError(where, "one_or_more", "true", value)
        return 1, None
    if given[0] == "times_or_more":
        if type(value) is not int or value < 1:
            raise PatternError(where, "times_or_more", "an integer >= 1", value)
        return value, None
    if type(value) is int and value >= 1:
        return value, value
    if isinstance(value, list) and len(value) == 2 and type(value[0]) is int and value[0] >= 0:
        low, high = value
        if high is None:
            return max(low, 1), None
        if type(high) is int and high >= max(low, 1):
            return max(low, 1), high
    raise PatternError(where, "times", expected, value)


def _from_zero(item: Mapping[str, Any]) -> bool:
    """``"times": [0, m]`` (Flink's ``times(0, m)``): the same as ``[1, m]`` with ``optional``."""
    value = item.get("times")
    return isinstance(value, list) and len(value) == 2 and value[0] == 0


class _Parsed:
    """Turns stage objects into StageSpecs; a group's members are parsed as a sequence of their own."""

    def __init__(self, functions: FunctionRegistry, leaves: frozenset[str]) -> None:
        self.functions = functions
        self.leaves = leaves

    def element(self, place: str, index: int, item: object) -> StageSpec:
        assert isinstance(item, Mapping)
        if "group" in item:
            return self.group(place, index, item)
        return self.stage(place, index, item)

    def group(self, place: str, index: int, item: Mapping[str, Any]) -> StageSpec:
        name = str(item["name"])
        where = f"group {name!r} ({place})"
        unknown = sorted(set(item) - _GROUP_KEYS)
        if unknown:
            raise PatternError(
                where, unknown[0], f"one of {sorted(_GROUP_KEYS)} (a group takes no condition)", unknown[0]
            )
        contiguity, negated = _contiguity(where, index, item)
        if negated is not None:
            raise PatternError(where, "contiguity", f"one of {list(CONTIGUITIES)} for a group", negated)
        low, high = _times(where, item)
        optional = _flag(where, item, "optional") or _from_zero(item)
        consecutive = _flag(where, item, "consecutive")
        combinations = _flag(where, item, "allow_combinations")
        _check_options(where, high, consecutive, combinations, greedy=False)
        members = tuple(
            self.element(f"{place}.group[{number}]", number, member) for number, member in enumerate(item["group"])
        )
        if all(member.optional for member in members):
            # Every round could match nothing: a looping group would go round without taking an event.
            raise PatternError(where, "group", "at least one member that must match an event", "all optional")
        inner: Contiguity = "strict" if consecutive else "any" if combinations else "relaxed"
        return StageSpec(
            name, None, contiguity, None, low, high, optional, False, inner, None, None, members, place
        )  # fmt: skip

    def stage(self, place: str, index: int, item: Mapping[str, Any]) -> StageSpec:
        name = str(item["name"])
        where = f"stage {name!r} ({place})"
        unknown = sorted(set(item) - _STAGE_KEYS)
        if unknown:
            raise PatternError(where, unknown[0], f"one of {sorted(_STAGE_KEYS)}", unknown[0])
        contiguity, negated = _contiguity(where, index, item)
        low, high = _times(where, item)
        optional = _flag(where, item, "optional") or _from_zero(item)
        greedy = _flag(where, item, "greedy")
        running = _flag(where, item, "running")
        consecutive = _flag(where, item, "consecutive")
        combinations = _flag(where, item, "allow_combinations")
        until = compile_condition(where, "until", item.get("until"), self.functions, self.leaves)
        condition = compile_condition(where, "where", item.get("where"), self.functions, self.leaves)
        window = _stage_within(where, item.get("within"))
        if negated is not None:
            _check_negation(where, negated, item)
        _check_options(where, high, consecutive, combinations, greedy)
        if until is not None and high is not None:
            raise PatternError(where, "until", "a looping stage (one_or_more or times_or_more)", item.get("until"))
        inner: Contiguity = "strict" if consecutive else "any" if combinations else "relaxed"
        return StageSpec(
            name, condition, contiguity, negated, low, high, optional, greedy, inner, until, window, (), place, running
        )  # fmt: skip


Negation = Literal["not_next", "not_followed_by"]


def _contiguity(where: str, index: int, item: Mapping[str, Any]) -> tuple[Contiguity, Negation | None]:
    """How a stage follows the previous one; the first of a sequence has none (its group decides)."""
    raw = item.get("contiguity")
    if index == 0:
        if raw is not None:
            raise PatternError(where, "contiguity", "no contiguity on the first stage", raw)
        return "strict", None
    if raw in CONTIGUITIES:
        return CONTIGUITIES[str(raw)], None
    if raw in NEGATIONS:
        return ("strict", "not_next") if raw == "not_next" else ("relaxed", "not_followed_by")
    raise PatternError(where, "contiguity", f"one of {[*CONTIGUITIES, *NEGATIONS]}", raw)


def _check_options(where: str, high: int | None, consecutive: bool, combinations: bool, greedy: bool) -> None:
    repeated = high is None or high > 1
    if consecutive and combinations:
        raise PatternError(where, "allow_combinations", "not together with consecutive", True)
    for option, value in (("consecutive", consecutive), ("allow_combinations", combinations), ("greedy", greedy)):
        if value and not repeated:
            raise PatternError(where, option, "a stage with times > 1, one_or_more or times_or_more", True)
    if greedy and combinations:
        raise PatternError(where, "greedy", "not together with allow_combinations", True)


def _stage_within(where: str, value: object) -> int | None:
    if value is None:
        return None
    try:
        return positive_duration(value)
    except DurationError:
        raise PatternError(
            where, "within", "a positive duration such as '10s' (time since the previous event)", value
        ) from None


def _check_negation(where: str, negated: str, item: Mapping[str, Any]) -> None:
    for name in ("times", "one_or_more", "times_or_more", "optional", "greedy", "consecutive", "until"):
        if name in item and item[name] not in (False, None):
            raise PatternError(where, name, f"nothing: {negated} stages take no quantifier", item[name])


def _skip(value: object, stages: tuple[StageSpec, ...]) -> SkipSpec:
    leaves = [leaf for stage in stages for leaf in stage.leaves()]
    names = [leaf.name for leaf in leaves]
    if isinstance(value, str) and value in SKIPS[:3]:
        return SkipSpec(value)
    if isinstance(value, Mapping):
        strategy, stage = value.get("strategy"), value.get("stage")
        if strategy in SKIPS[:3] and stage is None:
            return SkipSpec(str(strategy))
        if strategy in SKIPS[3:]:
            if stage not in names:
                raise PatternError("pattern", "skip.stage", f"one of the stages {names}", stage)
            target = leaves[names.index(str(stage))]
            if target.negated is not None:
                raise PatternError("pattern", "skip.stage", "a stage that matches events (not a negation)", stage)
            # SKIP_TO_FIRST of the first stage is allowed, as in Flink without throwExceptionOnMiss: it prunes
            # the partial matches that started before the match, and matching goes on (nothing is re-read).
            return SkipSpec(str(strategy), str(stage))
    raise PatternError(
        "pattern", "skip", f"one of {list(SKIPS[:3])} or {{'strategy': 'SKIP_TO_FIRST'|'SKIP_TO_LAST', 'stage': ...}}",
        value,
    )  # fmt: skip


_UNBOUNDED_LOOP = (
    "a looping stage bounded by the pattern's 'within' or the stage's 'until', or a pattern with "
    "'max_partial_matches' (a cap per key; the oldest partial match is dropped and reported) or "
    "'unbounded': true (otherwise its partial matches could grow without limit)"
)


def _check_shape(stages: tuple[StageSpec, ...], within: int | None, bounded: bool, path: str) -> None:
    """Checks of one sequence (the pattern's stages or a group's members); ``bounded``: the pattern caps its
    partial matches or opted out of the check."""
    for index, stage in enumerate(stages):
        kind = "group" if stage.is_group else "stage"
        where = f"{kind} {stage.name!r} ({stage.place})"
        previous = stages[index - 1] if index else None
        if stage.negated and previous is not None and previous.optional:
            raise PatternError(where, "contiguity", f"no {stage.negated} right after an optional stage", stage.negated)
        if stage.negated and previous is not None and previous.negated:
            raise PatternError(where, "contiguity", "no negation right after another negation", stage.negated)
        if stage.negated and previous is not None and previous.is_group:
            raise PatternError(
                where, "contiguity", "no negation right after a group (put it before the group's last member, "
                "or add a plain stage between)", stage.negated,
            )  # fmt: skip
        if stage.is_group and previous is not None and previous.negated == "not_followed_by":
            raise PatternError(
                where, "contiguity", "no group right after not_followed_by (add a plain stage between, or move "
                "the negation into the group after its first member)", stage.name,
            )  # fmt: skip
        if stage.optional and previous is not None and previous.greedy:
            raise PatternError(where, "optional", "no optional stage right after a greedy one", True)
        if stage.looping and within is None and stage.until is None and not bounded:
            raise PatternError(where, "times", _UNBOUNDED_LOOP, "unbounded loop")
        if stage.is_group:
            if stage.members[-1].negated:
                last = stage.members[-1]
                raise PatternError(
                    f"stage {last.name!r} ({last.place})", "contiguity", "a group that ends with a stage that matches "
                    "events (not a negation)", last.negated,
                )  # fmt: skip
            _check_shape(stage.members, within, bounded, f"{stage.place}.group")
    last = stages[-1]
    if last.negated == "not_followed_by" and within is None and last.within_ms is None:
        raise PatternError(
            f"stage {last.name!r} ({last.place})", "contiguity",
            "a pattern 'within' (or the stage's own 'within') when it ends with not_followed_by", "no within",
        )  # fmt: skip
