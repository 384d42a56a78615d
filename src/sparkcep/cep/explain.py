"""The compiled automaton in readable form (``sparkcep patterns explain``)."""

from __future__ import annotations

from sparkcep.cep.automaton import FINAL, PENDING, STOP, Automaton
from sparkcep.cep.conditions import is_stage_aggregate
from sparkcep.cep.spec import PatternSpec, StageSpec
from sparkcep.expr import ast as expr_ast
from sparkcep.timeutil import format_duration


def describe_stage(stage: StageSpec, first: bool) -> str:
    parts = []
    if not first:
        names = {"strict": "next", "relaxed": "followed_by", "any": "followed_by_any"}
        parts.append(stage.negated or names[stage.contiguity])
    if stage.max_times is None:
        parts.append(f"{stage.min_times} or more times")
    elif stage.max_times != 1 or stage.min_times != 1:
        low, high = stage.min_times, stage.max_times
        parts.append(f"{low} times" if low == high else f"{low} to {high} times")
    if stage.repeated:
        parts.append({"strict": "consecutive", "relaxed": "relaxed inside", "any": "any combination"}[stage.inner])
    if stage.optional:
        parts.append("optional")
    if stage.greedy:
        parts.append("greedy")
    if stage.until is not None:
        parts.append(f"until {stage.until.text}")
    if stage.running:
        parts.append("running (its functions count the event tested)")
    if stage.within_ms is not None:
        parts.append(f"within {format_duration(stage.within_ms)} of the previous event")
    if stage.is_group:
        parts.append(f"group of {', '.join(member.name for member in stage.members)}")
    else:
        parts.append(f"where {stage.where.text}" if stage.where is not None else "any event")
    return ", ".join(parts)


def _stage_lines(stages: tuple[StageSpec, ...], numbering: str, depth: int) -> list[str]:
    lines = []
    for number, stage in enumerate(stages):
        label = f"{numbering}{number + 1}."
        lines.append(f"{'  ' * depth}{label} {stage.name}: {describe_stage(stage, number == 0)}")
        if stage.is_group:
            lines.extend(_stage_lines(stage.members, label, depth + 1))
    return lines


_EMPTY_IS_NULL = ("sum", "avg", "min", "max")


def null_aggregate_notes(spec: PatternSpec) -> list[str]:
    """A note per stage aggregate in a condition: over no events it is null (SQL), so a comparison with it is not
    true, where a Flink condition written in Java usually starts a sum at 0."""
    leaves = spec.leaves()
    names = frozenset(leaf.name for leaf in leaves)
    optional = {leaf.name for leaf in leaves if leaf.optional}
    notes: list[str] = []
    for stage in leaves:
        may_be_empty = optional | {stage.name}  # its own stage has no events when its first event is tested
        for expression in (stage.where, stage.until):
            if expression is None:
                continue
            nodes = list(expr_ast.walk(expression.node))
            guarded = {  # already under coalesce(...): the user has chosen what no events means
                id(arg) for node in nodes if isinstance(node, expr_ast.Call) and node.name.lower() == "coalesce"
                for arg in node.args
            }  # fmt: skip
            for node in nodes:
                if not isinstance(node, expr_ast.Call) or id(node) in guarded or node.name not in _EMPTY_IS_NULL:
                    continue
                arg = node.args[0] if is_stage_aggregate(node, names) else None  # names are lower case when parsed
                if isinstance(arg, expr_ast.Field) and arg.path[0] in may_be_empty:
                    call = f"{node.name}({'.'.join(arg.path)})"
                    note = (
                        f"note: in stage {stage.name!r}, {call} is null while {arg.path[0]!r} has no events, so a "
                        f"comparison with it is not true; write coalesce({call}, 0) to start at 0 as Flink's Java "
                        "conditions usually do"
                    )
                    if note not in notes:
                        notes.append(note)
    return notes


def explain(automaton: Automaton) -> str:
    spec = automaton.spec
    within = format_duration(spec.within_ms) if spec.within_ms is not None else "none"
    lines = [f"within: {within}; after match: {spec.skip.describe()}"]
    if spec.max_partial_matches is not None:
        lines.append(f"at most {spec.max_partial_matches:,} partial matches per key (the oldest dropped, reported)")
    if spec.tie_break:
        fields = ", ".join(f"{tie.field}{' descending' if tie.descending else ''}" for tie in spec.tie_break)
        lines.append(f"events of equal time in the order of: {fields}, then event id")
    lines.append("stages:")
    lines.extend(_stage_lines(spec.stages, "", 1))
    lines.append(f"automaton ({len(automaton.states)} states; S{automaton.start} starts every match):")
    for state in automaton.states:
        tags = {FINAL: " [match]", STOP: " [dead end]", PENDING: " [match when 'within' runs out]"}
        label = "end" if state.kind == FINAL else state.stage
        lines.append(f"  S{state.index} {label}{tags.get(state.kind, '')}")
        for edge in state.edges:
            if state.kind == STOP:
                continue
            target = "itself" if edge.target is state else f"S{edge.target.index}"
            lines.append(f"      {edge.action:<7} -> {target:<6} if {edge.condition.text}")
    lines.extend(null_aggregate_notes(spec))
    return "\n".join(lines)
