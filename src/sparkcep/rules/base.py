"""What the models of every rule type share: frozen models, the version fields, the duration type, and how
descriptions show values read from a rule's JSON form.

The order of a model's fields is the order of its JSON form (``model_dump``), which stores keep as written:
completion and inactivity rules list the version fields first, aggregate and pattern rules after ``type`` and
``id`` (they list :class:`TypeAndIdFirst` after :class:`RuleVersion` among their bases).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from sparkcep.errors import SparkcepError
from sparkcep.timeutil import format_duration, parse_duration, parse_event_time, positive_duration

# A duration longer than zero, written as text ("30m", "7d") or integer milliseconds; milliseconds once read.
DurationMs = Annotated[int, BeforeValidator(positive_duration)]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RuleVersion(Frozen):
    """One version of a rule, of any type: what makes an entry one version of the rule named by its id.

    Several entries with one id are the versions of that rule; an entry without the version fields is version 1,
    ACTIVE from the beginning.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    # Strict: a version is a JSON number; "2" or 2.0 read as 2 would hide a mistake (and true would read as 1).
    version: int = Field(default=1, ge=1, strict=True)
    effective_from_ms: int = Field(default=0, alias="effective_from")
    state: Literal["ACTIVE", "PAUSE", "DELETE"] = "ACTIVE"
    type: str  # each rule type narrows it to its name (a Literal): the tag of the rule-file union
    id: str

    @field_validator("effective_from_ms", mode="before")
    @classmethod
    def _effective(cls, value: object) -> int:
        return parse_event_time(value)

    @property
    def event_types(self) -> tuple[str, ...] | None:
        """The input event types the rule consumes; None: every type."""
        raise NotImplementedError

    @property
    def output_types(self) -> tuple[str, ...]:
        """The names of the complex events the rule emits."""
        raise NotImplementedError


class TypeAndIdFirst(Frozen):
    """``class AggregateRule(RuleVersion, TypeAndIdFirst)`` lists ``type`` and ``id`` ahead of the version fields."""

    type: str
    id: str


def shown_duration(value: Any) -> str:
    """A duration from a rule's JSON form as ``7d``; anything unreadable as it came."""
    try:
        return format_duration(parse_duration(value))
    except (SparkcepError, TypeError, AttributeError):
        return str(value)


def shown_names(values: Any) -> str:
    """``a, b`` for a list of names; anything else as it came."""
    return ", ".join(str(v) for v in values) if isinstance(values, list | tuple) else str(values)
