"""Pattern processors (FLIP-200): a sequence pattern with an id, a version, the event time at which the
version takes effect, key fields and an output. Several entries with the same id are its versions.

The pattern itself is validated by :mod:`sparkcep.cep.spec` (see docs/patterns.md); errors name the rule,
the stage and the field.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sparkcep.errors import RuleError
from sparkcep.timeutil import parse_event_time

_OUTPUT_SAFE = re.compile(r"[^A-Za-z0-9_]+")


class PatternOutput(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    event_type: str | None = None  # default: the processor id in upper case
    timeout_event_type: str | None = None  # None: timed-out partial matches are not reported
    measures: dict[str, str] = Field(default_factory=dict)


class PatternRule(BaseModel):
    """One version of a pattern processor."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    type: Literal["pattern"]
    id: str
    version: int = Field(default=1, ge=1)
    effective_from_ms: int = Field(default=0, alias="effective_from")
    state: Literal["ACTIVE", "PAUSE", "DELETE"] = "ACTIVE"
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

    @field_validator("effective_from_ms", mode="before")
    @classmethod
    def _effective(cls, value: object) -> int:
        return parse_event_time(value)

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


def check_pattern_rule(rule: PatternRule) -> None:
    """Validate the pattern and the measures; raises RuleError naming the stage and the field."""
    from sparkcep.cep import PatternError, parse_pattern  # cep is heavier than the rule model
    from sparkcep.cep.spec import compile_condition

    try:
        spec = parse_pattern(rule.pattern)
        for name, text in rule.output.measures.items():
            compile_condition("output", f"measures.{name}", text, spec.functions, frozenset(spec.stage_names()))
    except PatternError as error:
        field = f"output.{error.field}" if error.where == "output" else f"pattern: {error.where}, {error.field}"
        raise RuleError(rule.id, field, error.expected, error.got) from None
