"""Validated, immutable pattern specs: what pattern JSON becomes (sparkcep.cep.pattern_json checks a pattern
and sparkcep.cep.stage_json each stage of it) and what the compiler and the matcher read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sparkcep.cep.ties import TieField
from sparkcep.expr import Expression, FunctionRegistry

Contiguity = Literal["strict", "relaxed", "any"]
CONTIGUITIES: dict[str, Contiguity] = {"next": "strict", "followed_by": "relaxed", "followed_by_any": "any"}
NEGATIONS = ("not_next", "not_followed_by")
SKIPS = ("NO_SKIP", "SKIP_TO_NEXT", "SKIP_PAST_LAST_EVENT", "SKIP_TO_FIRST", "SKIP_TO_LAST")
Negation = Literal["not_next", "not_followed_by"]


@dataclass(frozen=True)
class StageSpec:
    name: str
    where: Expression | None
    # How this stage follows the previous one; the first stage has "strict" (it starts a match).
    contiguity: Contiguity
    negated: Literal["not_next", "not_followed_by"] | None
    min_times: int
    max_times: int | None  # None: unbounded (a looping stage)
    optional: bool
    greedy: bool
    inner: Contiguity  # between the events of a looping or repeated stage
    until: Expression | None
    # Flink's within(..., PREVIOUS_AND_CURRENT): a partial match waiting in this stage dies when this much
    # time has passed since its last event.
    within_ms: int | None = None
    members: tuple[StageSpec, ...] = ()  # a group's stages; empty for a plain stage
    place: str = field(default="", compare=False)  # where it is in the pattern JSON: "stages[2].group[0]"
    # SQL's RUNNING semantics: stage functions over this stage count the event being tested.
    running: bool = False

    @property
    def is_group(self) -> bool:
        return bool(self.members)

    def leaves(self) -> tuple[StageSpec, ...]:
        """The plain stages in this stage (itself, or a group's members, nested groups flattened)."""
        if not self.members:
            return (self,)
        return tuple(leaf for member in self.members for leaf in member.leaves())

    @property
    def looping(self) -> bool:
        return self.max_times is None

    @property
    def repeated(self) -> bool:
        return self.max_times is None or self.max_times > 1


@dataclass(frozen=True)
class SkipSpec:
    strategy: str
    stage: str | None = None

    def describe(self) -> str:
        return self.strategy if self.stage is None else f"{self.strategy}({self.stage})"


@dataclass(frozen=True)
class PatternSpec:
    stages: tuple[StageSpec, ...]
    within_ms: int | None
    skip: SkipSpec
    functions: FunctionRegistry = field(compare=False, repr=False)  # what conditions and measures compile with
    # Partial matches kept per key (None: no cap); beyond it the oldest is dropped and reported.
    max_partial_matches: int | None = None
    # Fields that order events of equal time before the event id (SQL's ORDER BY time, c, ...; see cep.ties).
    tie_break: tuple[TieField, ...] = ()

    def leaves(self) -> tuple[StageSpec, ...]:
        """Every plain stage in matching order, group members included (the names events are matched under)."""
        return tuple(leaf for stage in self.stages for leaf in stage.leaves())

    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.leaves())

    @property
    def stage_windows(self) -> bool:
        """Whether any stage has a within of its own (PREVIOUS_AND_CURRENT)."""
        return any(stage.within_ms is not None for stage in self.leaves())
