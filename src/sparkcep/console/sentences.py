"""Every rule in one line of English, patterns included.

Aggregate, completion and inactivity rules are described by :func:`sparkcep.store.summary_sentence` (what
``sparkcep rules list`` prints). It names a pattern only by its type, and an operator choosing between cards needs
more: the stages in order with how each follows the one before, their conditions and quantifiers, ``within``,
and what the pattern emits. The pattern is read with the pattern parser the job uses, so the sentence describes
what the job will run; conditions are shown as the parser read them (``amount = 5`` as ``amount == 5``): parsed,
never executed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkcep.cep.spec import StageSpec, parse_pattern
from sparkcep.errors import SparkcepError
from sparkcep.rules.pattern import PatternRule
from sparkcep.store import summary_sentence
from sparkcep.timeutil import format_duration

_FOLLOWS = {"strict": "next", "relaxed": "followed by", "any": "followed by any"}
_NEGATIONS = {"not_next": "not next", "not_followed_by": "not followed by"}
_OUTPUT_FIELDS = ("type", "id", "key", "pattern", "output")


def rule_sentence(rule: Mapping[str, Any]) -> str:
    """The rule (as stored or as submitted) in English."""
    if rule.get("type") == "pattern":
        return pattern_sentence(rule)
    return summary_sentence(rule)


def pattern_sentence(rule: Mapping[str, Any]) -> str:
    """``per card_id, in PAYMENT events: small (amount < 5), followed by large (amount > ...) within 10m;
    emits SMALL_THEN_LARGE, SMALL_NOT_FOLLOWED when a partial match times out``."""
    try:
        spec = parse_pattern(rule.get("pattern"))
    except SparkcepError:
        return summary_sentence(rule)  # what the store says of a pattern it cannot read: its type
    stages = ", ".join(_stage(stage, index == 0) for index, stage in enumerate(spec.stages))
    text = f"per {_names(rule.get('key'))}"
    if rule.get("event_types"):
        text += f", in {_names(rule['event_types'])} events"
    text += f": {stages}"
    if spec.within_ms is not None:
        text += f" within {format_duration(spec.within_ms)}"
    try:  # the output names as the job derives them (the match's defaults to the id in upper case)
        outputs = PatternRule.model_validate({name: rule[name] for name in _OUTPUT_FIELDS if name in rule})
    except ValueError:
        return text
    text += f"; emits {outputs.match_event}"
    if outputs.output.timeout_event_type:
        text += f", {outputs.output.timeout_event_type} when a partial match times out"
    return text


def _stage(stage: StageSpec, first: bool) -> str:
    link = "" if first else f"{_NEGATIONS.get(stage.negated or '', _FOLLOWS[stage.contiguity])} "
    text = f"{link}{stage.name}"
    if stage.max_times is None:
        text += f" {stage.min_times} or more times"
    elif (stage.min_times, stage.max_times) != (1, 1):
        low, high = stage.min_times, stage.max_times
        text += f" {low} times" if low == high else f" {low} to {high} times"
    if stage.optional:
        text += " (optional)"
    if stage.where is not None:
        text += f" ({stage.where.text})"
    if stage.until is not None:
        text += f" until {stage.until.text}"
    return text


def _names(values: object) -> str:
    return ", ".join(str(v) for v in values) if isinstance(values, list | tuple) else str(values)
