"""The self-growing step of an event-time-aligned backfill, shared by the file and Kafka readers (pure).

An aligned backfill reads every input (file, partition) up to one event-time horizon per micro-batch, ``step``
past the earliest waiting event. A fixed step throttles a backfill whose event time is sparse: at ``step: 10m``
and one event a second a batch holds 600 records, and a job fell 40k records behind a 150 events/s producer.
So the step adapts, batch by batch, starting from the step the previous batch used (the configured one first):

- **Grow** while a batch would hold fewer than ``target`` records and more is waiting: double the step and plan
  again; a doubled plan past the ``ceiling`` (twice the target, or a read cap in records) or past the cap in
  bytes is not taken.
- **Shrink** while a batch would hold more than the ``ceiling`` records or the cap in bytes: halve the step,
  never below the configured one.

A batch thus holds at most the ceiling, or what one configured step holds where event time is denser than
that: a cap is a bound on whole steps, since cutting inside a step could leave one input's earlier events
behind another's later ones.

The plan of a batch is fixed in Spark's offset log before it runs, so a re-run batch reads the same
records whatever step planned it; the output does not depend on where batches end, only on the absence of late
events, which alignment gives at any step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

DEFAULT_STEP_MS = 600_000
DEFAULT_TARGET_RECORDS = 200_000  # about what one generated file of 200,000 lines made a batch before
# Most records a micro-batch reads by default, aligned or not: an aligned batch's ceiling (twice the target), so a
# backlog, live or backfilled, drains in batches of the size a backfill uses.
DEFAULT_MAX_BATCH_RECORDS = 2 * DEFAULT_TARGET_RECORDS
MAX_STEP_MS = 2**42  # about 139 years: past any event time a backfill holds

Plan = TypeVar("Plan")


@dataclass(frozen=True)
class Planned(Generic[Plan]):
    """One plan of a batch: the end offsets, how many records they read, and whether they read all there is."""

    ends: Plan
    records: int
    complete: bool
    bytes: int = 0  # what the plan reads, where the reader knows it (files)


@dataclass(frozen=True)
class StepRule:
    base_ms: int  # the configured step: the smallest, and the granularity of every step (base * 2**n)
    target: int = DEFAULT_TARGET_RECORDS
    cap: int | None = None  # most records a batch may hold, whatever the step (a reader's own limit)
    cap_bytes: int | None = None  # most bytes a batch may read (files)

    def __post_init__(self) -> None:
        if self.base_ms < 1:
            raise ValueError(f"aligned backfill option 'step': expected a positive duration, got {self.base_ms} ms")
        if self.target < 1:
            raise ValueError(f"aligned backfill option 'target_records': expected a positive number, got {self.target}")

    @property
    def ceiling(self) -> int:
        return 2 * self.target if self.cap is None else min(2 * self.target, self.cap)

    def over(self, planned: Planned[Plan]) -> bool:
        """Whether a plan holds more than a batch may: records past the ceiling, or bytes past the cap."""
        return planned.records > self.ceiling or (self.cap_bytes is not None and planned.bytes > self.cap_bytes)


def adapted_step(plan: Callable[[int], Planned[Plan]], step_ms: int, rule: StepRule) -> tuple[Planned[Plan], int]:
    """The plan of the next batch and the step that made it, starting from ``step_ms`` (see the module docs).

    >>> density = lambda step: Planned(step, step // 1000, step >= 86_400_000)  # one record a second
    >>> adapted_step(density, 600_000, StepRule(600_000, target=10_000))[1]  # 600 records -> 19,200
    19200000
    >>> adapted_step(density, 19_200_000, StepRule(600_000, target=1_000))[1]  # 19,200 records -> 1,200
    1200000
    """
    step_ms = max(rule.base_ms, step_ms)
    current = plan(step_ms)
    if rule.over(current):
        while rule.over(current) and step_ms > rule.base_ms:
            step_ms = max(rule.base_ms, step_ms // 2)
            current = plan(step_ms)
        return current, step_ms
    while current.records < min(rule.target, rule.ceiling) and not current.complete and step_ms < MAX_STEP_MS:
        bigger = plan(step_ms * 2)
        if rule.over(bigger):
            break  # event time grows dense here: keep the smaller batch
        current, step_ms = bigger, step_ms * 2
    return current, step_ms
