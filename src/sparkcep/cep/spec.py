"""Pattern JSON -> validated, immutable pattern specs.

Every error is a :class:`PatternError` naming the stage and the field, what was expected and what came, e.g.
``stage 'b' (stages[1]), field 'times': expected n, [n, m] or [n, null] with 1 <= n <= m, got [3, 2]``.
The static checks follow Flink CEP's pattern checks (names unique, quantifier options only on looping
stages, no optional path into a negation, ...) and add one of our own: a looping stage must be bounded by
``within`` or ``until``, otherwise its partial matches could grow without limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sparkcep.cep.conditions import pattern_functions, stage_references
from sparkcep.errors import DurationError, SparkcepError
from sparkcep.expr import Expression, ExpressionError, FunctionRegistry, compile_expression
from sparkcep.timeutil import positive_duration

Contiguity = Literal["strict", "relaxed", "any"]
CONTIGUITIES: dict[str, Contiguity] = {"next": "strict", "followed_by": "relaxed", "followed_by_any": "any"}
NEGATIONS = ("not_next", "not_followed_by")
SKIPS = ("NO_SKIP", "SKIP_TO_NEXT", "SKIP_PAST_LAST_EVENT", "SKIP_TO_FIRST", "SKIP_TO_LAST")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STAGE_KEYS = {
    "name", "where", "contiguity", "times", "one_or_more", "times_or_more", "optional", "greedy",
    "consecutive", "allow_combinations", "until",
}  # fmt: skip
_PATTERN_KEYS = {"stages", "within", "skip"}


class PatternError(SparkcepError, ValueError):
    """A pattern is invalid; ``where`` says which stage (or the pattern) and which field."""

    def __init__(self, where: str, field: str, expected: str, got: object) -> None:
        self.where = where
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(f"{where}, field {field!r}: expected {expected}, got {got!r}")


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

    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)


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
    names: list[str] = []
    for index, item in enumerate(stages_raw):
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not _NAME.match(name):
            raise PatternError(f"stages[{index}]", "name", "a name like 'big_order' ([A-Za-z_][A-Za-z0-9_]*)", name)
        if name in names:
            raise PatternError(f"stages[{index}]", "name", "a name not used by another stage", name)
        names.append(name)
    functions = pattern_functions(tuple(names))
    stages = tuple(_stage(index, item, functions, frozenset(names)) for index, item in enumerate(stages_raw))
    _check_no_later_stages(stages)
    skip = _skip(raw.get("skip", "NO_SKIP"), stages)
    _check_shape(stages, within)
    return PatternSpec(stages, within, skip, functions)


def _check_no_later_stages(stages: tuple[StageSpec, ...]) -> None:
    """A condition reads the events of its own stage and earlier ones: a later stage has matched nothing yet when
    the condition is tested, so naming it is a mistake (Flink would silently see no events)."""
    names = frozenset(stage.name for stage in stages)
    for index, stage in enumerate(stages):
        allowed = {earlier.name for earlier in stages[: index + 1]}
        for field_name, expression in (("where", stage.where), ("until", stage.until)):
            later = set() if expression is None else stage_references(expression.node, names) - allowed
            if later:
                where = f"stage {stage.name!r} (stages[{index}])"
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
    where: str, field: str, value: object, functions: FunctionRegistry, stages: frozenset[str]
) -> Expression | None:
    """Compile a condition or measure; stage functions must name existing stages."""
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
    expected = "n, [n, m] or [n, null] with 1 <= n <= m"
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
    if isinstance(value, list) and len(value) == 2 and type(value[0]) is int and value[0] >= 1:
        low, high = value
        if high is None:
            return low, None
        if type(high) is int and high >= low:
            return low, high
    raise PatternError(where, "times", expected, value)


def _stage(index: int, item: object, functions: FunctionRegistry, names: frozenset[str]) -> StageSpec:
    assert isinstance(item, Mapping)
    name = str(item["name"])
    where = f"stage {name!r} (stages[{index}])"
    unknown = sorted(set(item) - _STAGE_KEYS)
    if unknown:
        raise PatternError(where, unknown[0], f"one of {sorted(_STAGE_KEYS)}", unknown[0])
    raw_contiguity = item.get("contiguity")
    if index == 0:
        if raw_contiguity is not None:
            raise PatternError(where, "contiguity", "no contiguity on the first stage", raw_contiguity)
        contiguity: Contiguity = "strict"
        negated = None
    elif raw_contiguity in CONTIGUITIES:
        contiguity, negated = CONTIGUITIES[str(raw_contiguity)], None
    elif raw_contiguity in NEGATIONS:
        contiguity = "strict" if raw_contiguity == "not_next" else "relaxed"
        negated = raw_contiguity
    else:
        raise PatternError(where, "contiguity", f"one of {[*CONTIGUITIES, *NEGATIONS]}", raw_contiguity)
    low, high = _times(where, item)
    optional = _flag(where, item, "optional")
    greedy = _flag(where, item, "greedy")
    consecutive = _flag(where, item, "consecutive")
    combinations = _flag(where, item, "allow_combinations")
    until = compile_condition(where, "until", item.get("until"), functions, names)
    condition = compile_condition(where, "where", item.get("where"), functions, names)
    repeated = high is None or high > 1
    if negated is not None:
        _check_negation(where, negated, item)
    if consecutive and combinations:
        raise PatternError(where, "allow_combinations", "not together with consecutive", True)
    for option, value in (("consecutive", consecutive), ("allow_combinations", combinations), ("greedy", greedy)):
        if value and not repeated:
            raise PatternError(where, option, "a stage with times > 1, one_or_more or times_or_more", True)
    if until is not None and high is not None:
        raise PatternError(where, "until", "a looping stage (one_or_more or times_or_more)", item.get("until"))
    inner: Contiguity = "strict" if consecutive else "any" if combinations else "relaxed"
    if greedy and inner == "any":
        raise PatternError(where, "greedy", "not together with allow_combinations", True)
    return StageSpec(name, condition, contiguity, negated, low, high, optional, greedy, inner, until)


def _check_negation(where: str, negated: str, item: Mapping[str, Any]) -> None:
    for name in ("times", "one_or_more", "times_or_more", "optional", "greedy", "consecutive", "until"):
        if name in item and item[name] not in (False, None):
            raise PatternError(where, name, f"nothing: {negated} stages take no quantifier", item[name])


def _skip(value: object, stages: tuple[StageSpec, ...]) -> SkipSpec:
    names = [stage.name for stage in stages]
    if isinstance(value, str) and value in SKIPS[:3]:
        return SkipSpec(value)
    if isinstance(value, Mapping):
        strategy, stage = value.get("strategy"), value.get("stage")
        if strategy in SKIPS[:3] and stage is None:
            return SkipSpec(str(strategy))
        if strategy in SKIPS[3:]:
            if stage not in names:
                raise PatternError("pattern", "skip.stage", f"one of the stages {names}", stage)
            target = stages[names.index(str(stage))]
            if target.negated is not None:
                raise PatternError("pattern", "skip.stage", "a stage that matches events (not a negation)", stage)
            if strategy == "SKIP_TO_FIRST" and stage == names[0] and not target.optional:
                # The next match would start at the same event again and again.
                raise PatternError("pattern", "skip.stage", "a stage other than the first for SKIP_TO_FIRST", stage)
            return SkipSpec(str(strategy), str(stage))
    raise PatternError(
        "pattern", "skip", f"one of {list(SKIPS[:3])} or {{'strategy': 'SKIP_TO_FIRST'|'SKIP_TO_LAST', 'stage': ...}}",
        value,
    )  # fmt: skip


def _check_shape(stages: tuple[StageSpec, ...], within: int | None) -> None:
    for index, stage in enumerate(stages):
        where = f"stage {stage.name!r} (stages[{index}])"
        previous = stages[index - 1] if index else None
        if stage.negated and previous is not None and previous.optional:
            raise PatternError(where, "contiguity", f"no {stage.negated} right after an optional stage", stage.negated)
        if stage.negated and previous is not None and previous.negated:
            raise PatternError(where, "contiguity", "no negation right after another negation", stage.negated)
        if stage.optional and previous is not None and previous.greedy:
            raise PatternError(where, "optional", "no optional stage right after a greedy one", True)
        if stage.looping and within is None and stage.until is None:
            raise PatternError(
                where, "times", "a looping stage bounded by the pattern's 'within' or the stage's 'until' "
                "(otherwise its partial matches could grow without limit)", "unbounded loop",
            )  # fmt: skip
    last = stages[-1]
    if last.negated == "not_followed_by" and within is None:
        raise PatternError(
            f"stage {last.name!r} (stages[{len(stages) - 1}])", "contiguity",
            "a pattern 'within' when it ends with not_followed_by", "no within",
        )  # fmt: skip
    if all(stage.negated or stage.optional for stage in stages):
        raise PatternError("pattern", "stages", "at least one stage that must match an event", "all optional")
