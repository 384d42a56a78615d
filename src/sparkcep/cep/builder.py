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
"""

from __future__ import annotations

import copy
from typing import Any

from sparkcep.cep.spec import parse_pattern


class Pattern:
    """An immutable pattern under construction; the last stage is the one options apply to."""

    def __init__(self, stages: list[dict[str, Any]], options: dict[str, Any] | None = None) -> None:
        self._stages = stages
        self._options = options or {}

    @classmethod
    def begin(cls, name: str) -> Pattern:
        return cls([{"name": name}])

    def _with_stage(self, name: str, contiguity: str) -> Pattern:
        return Pattern([*copy.deepcopy(self._stages), {"name": name, "contiguity": contiguity}], dict(self._options))

    def _with_last(self, **fields: Any) -> Pattern:
        stages = copy.deepcopy(self._stages)
        stages[-1].update(fields)
        return Pattern(stages, dict(self._options))

    # -- stages and contiguity

    def next(self, name: str) -> Pattern:
        """Strict contiguity: the next event must match."""
        return self._with_stage(name, "next")

    def followed_by(self, name: str) -> Pattern:
        """Relaxed contiguity: events that do not match are skipped."""
        return self._with_stage(name, "followed_by")

    def followed_by_any(self, name: str) -> Pattern:
        """Non-deterministic relaxed contiguity: matching events may be skipped too."""
        return self._with_stage(name, "followed_by_any")

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

    def within(self, duration: str | int) -> Pattern:
        return Pattern(copy.deepcopy(self._stages), {**self._options, "within": duration})

    def skip(self, strategy: str, stage: str | None = None) -> Pattern:
        value: Any = strategy if stage is None else {"strategy": strategy, "stage": stage}
        return Pattern(copy.deepcopy(self._stages), {**self._options, "skip": value})

    def to_json(self, validate: bool = True) -> dict[str, Any]:
        """The pattern as JSON data; raises PatternError (naming stage and field) when it is not valid."""
        document = {"stages": copy.deepcopy(self._stages), **self._options}
        if validate:
            parse_pattern(document)
        return document
