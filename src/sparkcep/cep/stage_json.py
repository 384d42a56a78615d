"""One stage (or group) of pattern JSON -> a validated :class:`StageSpec`: its name, condition, quantifier,
contiguity and options, each error a :class:`PatternError` naming the stage and the field. A group's members
are parsed as a sequence of their own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkcep.cep.conditions import stage_references
from sparkcep.cep.pattern_error import PatternError
from sparkcep.cep.spec import CONTIGUITIES, NEGATIONS, Contiguity, Negation, StageSpec
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

_STAGE_KEYS = {
    "name", "where", "contiguity", "times", "one_or_more", "times_or_more", "optional", "greedy",
    "consecutive", "allow_combinations", "until", "within", "running",
}  # fmt: skip
_GROUP_KEYS = {
    "name", "group", "contiguity", "times", "one_or_more", "times_or_more", "optional", "consecutive",
    "allow_combinations",
}  # fmt: skip


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


class StageParser:
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
