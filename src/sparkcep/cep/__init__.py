"""Sequence patterns with Flink CEP semantics (pure: no pyspark).

``spec`` validates pattern JSON, ``compiler`` builds the automaton, ``nfa`` runs it per key, ``explain``
prints it, ``builder`` writes pattern JSON from Python. :func:`run_pattern` matches a list of events in
one go (the reference for tests and for users trying a pattern out).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sparkcep.cep.automaton import Automaton
from sparkcep.cep.compiler import compile_automaton
from sparkcep.cep.nfa import Matcher
from sparkcep.cep.partials import Result
from sparkcep.cep.pattern_error import PatternError
from sparkcep.cep.pattern_json import parse_pattern
from sparkcep.cep.spec import PatternSpec

__all__ = ["Matcher", "PatternError", "PatternSpec", "Result", "compile_matcher", "parse_pattern", "run_pattern"]


def compile_matcher(raw: object, type_field: str | None = "event_type") -> Matcher:
    """Validate pattern JSON and build its matcher; raises PatternError."""
    automaton: Automaton = compile_automaton(parse_pattern(raw), type_field)
    return Matcher(automaton)


def run_pattern(
    pattern: Mapping[str, Any], events: Iterable[Mapping[str, Any]], end_time: int | None = None
) -> list[dict[str, Any]]:
    """Match ``events`` (dicts with ``id``, ``time`` and fields) in (time, id) order, as one key.

    After the events, time advances to ``end_time`` when given (timeouts and pending matches fire).
    Returns ``{"kind": "match" | "timeout" | "dropped", "time": ..., "stages": {stage: [event ids]}}`` in order
    found ("dropped": pushed out by the pattern's ``max_partial_matches``).
    """
    matcher = compile_matcher(pattern)
    state = matcher.initial()
    found: list[Result] = []
    for event in sorted(events, key=lambda e: (e["time"], e["id"])):
        fields = {k: v for k, v in event.items() if k not in ("id", "time")}
        state = matcher.advance_through(state, event["time"], found)
        state = matcher.process(state, event["time"], event["id"], fields, found)
    if end_time is not None:
        matcher.advance_through(state, end_time, found)
    return [{"kind": result.kind, "time": result.time, "stages": result.stages()} for result in found]
