"""The compiled automaton in readable form (``sparkcep patterns explain``)."""

from __future__ import annotations

from sparkcep.cep.compiler import FINAL, PENDING, STOP, Automaton
from sparkcep.cep.spec import StageSpec
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
    parts.append(f"where {stage.where.text}" if stage.where is not None else "any event")
    return ", ".join(parts)


def explain(automaton: Automaton) -> str:
    spec = automaton.spec
    within = format_duration(spec.within_ms) if spec.within_ms is not None else "none"
    lines = [f"within: {within}; after match: {spec.skip.describe()}", "stages:"]
    for number, stage in enumerate(spec.stages):
        lines.append(f"  {number + 1}. {stage.name}: {describe_stage(stage, number == 0)}")
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
    return "\n".join(lines)
