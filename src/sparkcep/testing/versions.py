"""The versions of one completion or inactivity rule id on the event-time axis, for the reference evaluator."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from sparkcep.rules.completion import CompletionRule
from sparkcep.rules.inactivity import InactivityRule

_V = TypeVar("_V", CompletionRule, InactivityRule)


class Versions(Generic[_V]):
    """All versions of one completion or inactivity rule id on the event-time axis."""

    def __init__(self, versions: Iterable[_V]) -> None:
        # At a time, the last version by (effective_from, version) with effective_from <= that time is in effect.
        self.ordered: list[_V] = sorted(versions, key=lambda version: (version.effective_from_ms, version.version))
        self.starts: list[int] = [version.effective_from_ms for version in self.ordered]

    def at(self, time_ms: int) -> _V | None:
        index = bisect_right(self.starts, time_ms)
        return self.ordered[index - 1] if index else None

    def in_effect_sometime(self, version: _V) -> bool:
        """False for a version tied with a later version's effective time: it never takes effect."""
        return self.at(version.effective_from_ms) is version

    def replaced_at(self, version: _V) -> int | None:
        """When the next version takes over from ``version`` (None: it stays in effect)."""
        later = [start for start in self.starts if start > version.effective_from_ms]
        return min(later) if later else None

    def times(self, wanted: Callable[[_V], bool]) -> list[int]:
        """Sorted effective times of the versions that take effect and are ``wanted``."""
        return sorted(v.effective_from_ms for v in self.ordered if wanted(v) and self.in_effect_sometime(v))


def first_after(times: list[int], after: int) -> int | None:
    later = [time for time in times if time > after]
    return min(later) if later else None
