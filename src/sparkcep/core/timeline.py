"""The versions of one rule on the event-time axis: which one is in effect at a time, and when each takes effect.

Versions are ordered by ``(effective_from, version)``; at a time ``t`` the last version with
``effective_from <= t`` is in effect. A version that shares its effective time with a higher version number
therefore never takes effect at all (a DELETE tied with a later version deletes nothing).

Rule logic keeps version *numbers* in its state, never positions in this order: a later rule log may slot a
version in between (one given an explicit effective time), and a number always names the same definition.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar


class _Version(Protocol):
    @property
    def version(self) -> int: ...

    @property
    def effective_from_ms(self) -> int: ...


V = TypeVar("V", bound=_Version)


class Timeline(Generic[V]):
    def __init__(self, versions: Sequence[V]) -> None:
        self.versions: list[V] = sorted(versions, key=lambda v: (v.effective_from_ms, v.version))
        self.starts = [v.effective_from_ms for v in self.versions]
        self._by_number = {v.version: v for v in self.versions}

    def index_at(self, time: int) -> int:
        """Position of the version in effect at ``time``; -1 before the first one."""
        return bisect.bisect_right(self.starts, time) - 1

    def takes_effect(self, index: int) -> bool:
        return self.index_at(self.starts[index]) == index

    def end_of(self, index: int) -> int | None:
        """When the version at ``index`` stops being in effect (the next effective time), None if it never does."""
        following = bisect.bisect_right(self.starts, self.starts[index])
        return self.starts[following] if following < len(self.starts) else None

    def times_where(self, wanted: Callable[[V], bool]) -> list[int]:
        """Sorted effective times of the versions that take effect and satisfy ``wanted``."""
        return [
            self.starts[index]
            for index, version in enumerate(self.versions)
            if wanted(version) and self.takes_effect(index)
        ]

    def numbered(self, number: int | None, time: int) -> V:
        """The version with ``number``; without one (state written before versions were kept), the one in effect
        at ``time``, else the first."""
        found = self._by_number.get(number) if number is not None else None
        if found is not None:
            return found
        return self.versions[max(self.index_at(time), 0)]


def first_after(times: list[int], after: int) -> int | None:
    """The first of the sorted ``times`` later than ``after``."""
    position = bisect.bisect_right(times, after)
    return times[position] if position < len(times) else None


def earliest(timer: int | None, other: int | None) -> int | None:
    if timer is None:
        return other
    return timer if other is None or timer <= other else other
