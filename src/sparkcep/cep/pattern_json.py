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
from typing import Any

from sparkcep.cep.conditions import pattern_functions, stage_references
from sparkcep.cep.pattern_error import PatternError
from sparkcep.cep.spec import SKIPS, PatternSpec, SkipSpec, StageSpec
from sparkcep.cep.stage_json import StageParser
from sparkcep.cep.ties import parse_tie_break
from sparkcep.errors import DurationError
from sparkcep.timeutil import positive_duration

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATTERN_KEYS = {"stages", "within", "skip", "max_partial_matches", "unbounded", "tie_break"}
# A cap on partial matches per key is a memory bound: beyond a million the cap no longer protects anything.
MAX_PARTIAL_MATCHES = 1_000_000


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
    parsed = StageParser(functions, frozenset(leaves))
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
