"""What one call of the engine produced (outputs, errors, late events, dead letters and their counts), and a
batch's rows once decoded."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkcep.core.bucket_state import Buffered
from sparkcep.core.logic import Record


@dataclass(slots=True)
class BatchResult:
    """What one call produced. ``late`` holds (line, keyset, key, event time); ``dead`` (line, reason).

    ``late_by_rule`` and ``dead_by_rule`` count them per rule id, for the operators' health view: a late event
    counts for every rule that would have used it, a dead letter for the rule whose field it failed ("" when no
    rule is to blame: not JSON, no readable time).
    """

    outputs: list[Record] = field(default_factory=list)
    errors: list[Record] = field(default_factory=list)
    late: list[tuple[str, int, str, int]] = field(default_factory=list)
    dead: list[tuple[str, str]] = field(default_factory=list)
    late_by_rule: dict[str, int] = field(default_factory=dict)
    dead_by_rule: dict[str, int] = field(default_factory=dict)
    # Copies of an event (same id and time, same content) dropped, once per grouping that dropped one, and per
    # rule that would have taken the copy.
    duplicates: int = 0
    duplicates_by_rule: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    accepted: int = 0  # rows some rule took, late ones included
    # The other rows, so that rows = control + refused + skipped + accepted: control records of the engine's own
    # stream, rows no rule took because of a problem (their dead letters are in ``dead``), rows no rule has a
    # use for (a paused rule, a filter that leaves the event out).
    control: int = 0
    refused: int = 0
    skipped: int = 0
    max_event_time: int | None = None

    def extend(self, other: BatchResult) -> None:
        self.outputs.extend(other.outputs)
        self.errors.extend(other.errors)
        self.late.extend(other.late)
        self.dead.extend(other.dead)
        add_counts(self.late_by_rule, other.late_by_rule)
        add_counts(self.dead_by_rule, other.dead_by_rule)
        self.duplicates += other.duplicates
        add_counts(self.duplicates_by_rule, other.duplicates_by_rule)
        self.rows += other.rows
        self.accepted += other.accepted
        self.control += other.control
        self.refused += other.refused
        self.skipped += other.skipped
        if other.max_event_time is not None and (
            self.max_event_time is None or other.max_event_time > self.max_event_time
        ):
            self.max_event_time = other.max_event_time


@dataclass(slots=True)
class Admitted:
    """A batch's rows after decoding: the result so far (dead letters, late events, counts) and the on-time
    events, each with its key slot ``(keyset, key)``, in input order."""

    result: BatchResult
    arrivals: list[tuple[tuple[int, str], Buffered]]


def add_counts(into: dict[str, int], counts: dict[str, int]) -> None:
    for name, count in counts.items():
        into[name] = into.get(name, 0) + count
