"""A small Python builder that writes pattern JSON, in the style of Flink CEP's Pattern API::

    >>> from sparkcep.cep.builder import Pattern
    >>> pattern = (
    ...     Pattern.begin("small").where("amount < 5")
    ...     .followed_by("large").where("amount > 100 * last(small).amount").times(1, 3).greedy()
    ...     .within("10m").skip("SKIP_PAST_LAST_EVENT")
    ... )
    >>> large = pattern.to_json()["stages"][1]
    >>> large["contiguity"], large["times"], large["greedy"]
    ('followed_by', [1, 3], True)

Every call returns a new builder; ``to_json()`` validates the result like a pattern read from a file. Conditions
are text in the safe expression language (see docs/patterns.md), never Python callables: patterns are data.

A builder passed where a stage name goes makes a group (Flink's ``begin(Pattern)``); quantifiers after it apply
to the group::

    >>> rounds = Pattern.begin("fail").where("kind = 'failed'").next("reset").where("kind = 'reset'")
    >>> grouped = Pattern.begin("login").followed_by(rounds, group_name="tries").times(2).within("1h")
    >>> grouped.to_json()["stages"][1]["group"][1]["contiguity"], grouped.to_json()["stages"][1]["times"]
    ('next', 2)
"""

from __future__ import annotations

import copy
from typing import Any

from sparkcep.cep.pattern_json import parse_pattern


class Pattern:
    """An immutable pattern under construction; the last stage is the one options apply to."""

    def __init__(self, stages: list[dict[str, Any]], options: dict[str, Any] | None = None) -> None:
        self._stages = stages
        self._options = options or {}

    @classmethod
    def begin(cls, stage: str | Pattern, name: str | None = None) -> Pattern:
        """The first stage, or (given a builder) a group named ``name`` (default: its first stage + ``_group``)."""
        return cls([_stage(stage, name)])

    def _with_stage(self, stage: str | Pattern, contiguity: str, name: str | None = None) -> Pattern:
        added = {**_stage(stage, name), "contiguity": contiguity}
        return Pattern([*copy.deepcopy(self._stages), added], dict(self._options))

    def _with_last(self, **fields: Any) -> Pattern:
        stages = copy.deepcopy(self._stages)
        stages[-1].update(fields)
        return Pattern(stages, dict(self._options))

    # -- stages and contiguity

    def next(self, name: str | Pattern, *, group_name: str | None = None) -> Pattern:
        """Strict contiguity: the next event must match."""
        return self._with_stage(name, "next", group_name)

    def followed_by(self, name: str | Pattern, *, group_name: str | None = None) -> Pattern:
        """Relaxed contiguity: events that do not match are skipped."""
        return self._with_stage(name, "followed_by", group_name)

    def followed_by_any(self, name: str | Pattern, *, group_name: str | None = None) -> Pattern:
        """Non-deterministic relaxed contiguity: matching events may be skipped too."""
        return self._with_stage(name, "followed_by_any", group_name)

    def not_next(self, name: str) -> Pattern:
        return self._with_stage(name, "not_next")

    def not_followed_by(self, name: str) -> Pattern:
        return self._with_stage(name, "not_followed_by")

    # -- conditions

    def where(self, condition: str) -> Pattern:
        """Add a condition; several ``where`` calls must all hold."""
        current = self._stages[-1].get("where")
        return self._with_last(where=condition if current is None else f"({current}) and ({condition})")

    def or_where(self, condition: str) -> Pattern:
        """An alternative condition (Flink's ``or``)."""
        current = self._stages[-1].get("where")
        return self._with_last(where=condition if current is None else f"({current}) or ({condition})")

    def until(self, condition: str) -> Pattern:
        return self._with_last(until=condition)

    # -- quantifiers

    def times(self, low: int, high: int | None = None) -> Pattern:
        """Exactly ``low`` times, or ``low`` to ``high`` times."""
        return self._with_last(times=low if high is None else [low, high])

    def times_or_more(self, low: int) -> Pattern:
        return self._with_last(times_or_more=low)

    def one_or_more(self) -> Pattern:
        return self._with_last(one_or_more=True)

    def optional(self) -> Pattern:
        return self._with_last(optional=True)

    def greedy(self) -> Pattern:
        return self._with_last(greedy=True)

    def consecutive(self) -> Pattern:
        return self._with_last(consecutive=True)

    def allow_combinations(self) -> Pattern:
        return self._with_last(allow_combinations=True)

    # -- whole pattern

    def within(self, duration: str | int, within_type: str = "FIRST_AND_LAST") -> Pattern:
        """``FIRST_AND_LAST``: the whole match fits in ``duration``; ``PREVIOUS_AND_CURRENT``: the last stage's
        events come within ``duration`` of the event before (Flink's ``WithinType``)."""
        if within_type == "PREVIOUS_AND_CURRENT":
            return self._with_last(within=duration)
        if within_type != "FIRST_AND_LAST":
            raise ValueError(f"within_type: expected FIRST_AND_LAST or PREVIOUS_AND_CURRENT, got {within_type!r}")
        return Pattern(copy.deepcopy(self._stages), {**self._options, "within": duration})

    def max_partial_matches(self, count: int) -> Pattern:
        """Keep at most ``count`` partial matches per key; the oldest are dropped and reported."""
        return Pattern(copy.deepcopy(self._stages), {**self._options, "max_partial_matches": count})

    def unbounded(self) -> Pattern:
        """Accept looping stages bounded by nothing (no within, until or cap): state may grow without limit."""
        return Pattern(copy.deepcopy(self._stages), {**self._options, "unbounded": True})

    def skip(self, strategy: str, stage: str | None = None) -> Pattern:
        value: Any = strategy if stage is None else {"strategy": strategy, "stage": stage}
        return Pattern(copy.deepcopy(self._stages), {**self._options, "skip": value})

    def to_json(self, validate: bool = True) -> dict[str, Any]:
        """The pattern as JSON data; raises PatternError (naming stage and field) when it is not valid."""
        document = {"stages": copy.deepcopy(self._stages), **self._options}
        if validate:
            parse_pattern(document)
        return document


def _stage(stage: str | Pattern, name: str | None) -> dict[str, Any]:
    if isinstance(stage, str):
        return {"name": stage}
    if stage._options:
        raise ValueError("a group takes no within, skip or cap of its own: set them on the whole pattern")
    members = copy.deepcopy(stage._stages)
    return {"name": name or f"{members[0]['name']}_group", "group": members}
