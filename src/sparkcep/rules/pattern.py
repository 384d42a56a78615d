"""Pattern processors (FLIP-200): a sequence pattern with an id, a version, the event time at which the
version takes effect, key fields and an output. Several entries with the same id are its versions.

The pattern itself is validated by :mod:`sparkcep.cep.spec` (see docs/patterns.md); errors name the rule,
the stage and the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sparkcep.errors import RuleError, SparkcepError
from sparkcep.rules.base import RuleVersion, TypeAndIdFirst, shown_names
from sparkcep.timeutil import format_duration

if TYPE_CHECKING:
    from sparkcep.cep.spec import StageSpec

_OUTPUT_SAFE = re.compile(r"[^A-Za-z0-9_]+")


class PatternOutput(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    event_type: str | None = None  # default: the processor id in upper case
    timeout_event_type: str | None = None  # None: timed-out partial matches are not reported
    measures: dict[str, str] = Field(default_factory=dict)


class PatternRule(RuleVersion, TypeAndIdFirst):
    """One version of a pattern processor."""

    type: Literal["pattern"]
    id: str
    key: tuple[str, ...] = Field(min_length=1)
    event_types_: tuple[str, ...] | None = Field(default=None, alias="event_types", min_length=1)
    pattern: dict[str, Any]
    output: PatternOutput = PatternOutput()
    # What happens to the previous version's partial matches when this version takes effect.
    on_new_version: Literal["drop", "finish"] = "drop"

    @field_validator("key", mode="before")
    @classmethod
    def _key(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @property
    def event_types(self) -> tuple[str, ...] | None:
        return self.event_types_

    @property
    def match_event(self) -> str:
        return self.output.event_type or _OUTPUT_SAFE.sub("_", self.id).upper()

    @property
    def output_types(self) -> tuple[str, ...]:
        timeout = self.output.timeout_event_type
        return (self.match_event,) if timeout is None else (self.match_event, timeout)


def check_pattern_rule(rule: PatternRule, first: PatternRule | None = None) -> None:
    """Validate the pattern and the measures; raises RuleError naming the stage and the field. (``first``, the
    first version of the rule's id, is what the registry passes; each version's pattern stands on its own.)"""
    from sparkcep.cep import PatternError, parse_pattern  # cep is heavier than the rule model
    from sparkcep.cep.spec import compile_condition

    try:
        spec = parse_pattern(rule.pattern)
        for name, text in rule.output.measures.items():
            compile_condition("output", f"measures.{name}", text, spec.functions, frozenset(spec.stage_names()))
    except PatternError as error:
        field = f"output.{error.field}" if error.where == "output" else f"pattern: {error.where}, {error.field}"
        raise RuleError(rule.id, field, error.expected, error.got) from None


_FOLLOWS = {"strict": "next", "relaxed": "followed by", "any": "followed by any"}
_NEGATIONS = {"not_next": "not next", "not_followed_by": "not followed by"}
_OUTPUT_FIELDS = ("type", "id", "key", "pattern", "output")


def pattern_summary(rule: Mapping[str, Any]) -> str:
    """``per card_id, in PAYMENT events: small (amount < 5), followed by large (amount > ...) within 10m;
    emits SMALL_THEN_LARGE, SMALL_NOT_FOLLOWED when a partial match times out``.

    The pattern is read with the pattern parser the job uses, so the sentence describes what the job will run;
    conditions are shown as the parser read them (``amount = 5`` as ``amount == 5``): parsed, never executed.
    """
    from sparkcep.cep.spec import parse_pattern  # cep is heavier than the rule model

    try:
        spec = parse_pattern(rule.get("pattern"))
    except SparkcepError:
        return "pattern rule (invalid pattern)"
    stages = ", ".join(_stage(stage, index == 0) for index, stage in enumerate(spec.stages))
    text = f"per {shown_names(rule.get('key'))}"
    if rule.get("event_types"):
        text += f", in {shown_names(rule['event_types'])} events"
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


def pattern_detail(rule: PatternRule) -> str:
    return f", key {', '.join(rule.key)}, stages {', '.join(stage['name'] for stage in rule.pattern['stages'])}"
