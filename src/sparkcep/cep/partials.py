"""A key's partial matches as plain data (they pickle into the engine's state): the layout of a partial match,
the matcher's state per key, and the results it hands back. See sparkcep.cep.nfa for how they are made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from sparkcep.cep.conditions import Path

NEVER = 1 << 62
# A partial match: (state index, start time, start seq, stage, event, stage, event, ...), the matched events
# with their stages flat in the tuple (see the module docstring; :func:`path_of` gives them as a Path).
Partial = tuple[Any, ...]
STRIDE: Final = 6  # an event's items in a partial match: its stage, seq, time, id, fields and origin
Found = tuple[Partial, int]  # a match and the time it was found
# Completed matches waiting for earlier partial matches (a skip strategy): a tuple, () when there are none (no
# container of its own to pickle and collect); states saved by earlier versions hold a list.
# Partial matches: a list, or a tuple when read from a caller's state (the matcher builds new lists, never
# changing the one it is given).
NfaState = tuple[Sequence[Partial], Sequence[Found], int]


class Result:
    """A match (``timed_out`` False) or a timed-out partial match, found at ``time``. Never changed once made."""

    # A plain class, not a frozen dataclass: compiled (sparkcep.native), a dataclass's generated ``__init__``
    # stays a Python function, and a frozen one sets each field through ``object.__setattr__``.
    __slots__ = ("dropped", "path", "time", "timed_out", "within")

    def __init__(
        self, timed_out: bool, time: int, path: Path, dropped: bool = False, within: int | None = None
    ) -> None:
        self.timed_out = timed_out
        self.time = time
        self.path = path
        self.dropped = dropped  # pushed out by the pattern's max_partial_matches
        self.within = within  # for a timeout: the window that ran out

    def _fields(self) -> tuple[bool, int, Path, bool, int | None]:
        return self.timed_out, self.time, self.path, self.dropped, self.within

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Result) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Result(timed_out={self.timed_out!r}, time={self.time!r}, path={self.path!r}, "
            f"dropped={self.dropped!r}, within={self.within!r})"
        )

    @property
    def kind(self) -> str:
        return "timeout" if self.timed_out else "dropped" if self.dropped else "match"

    def stages(self) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for stage, event in self.path:
            grouped.setdefault(stage, []).append(event[2])
        return grouped


def path_of(partial: Partial) -> Path:
    """The events of a partial match with their stages, in order."""
    if len(partial) == 3 + STRIDE:  # the usual length: one event
        return ((partial[3], partial[4:]),)
    return tuple([(partial[at], partial[at + 1 : at + STRIDE]) for at in range(3, len(partial), STRIDE)])


def seqs_of(partial: Partial) -> tuple[int, ...]:
    """The seqs of a partial match's events, in order."""
    return partial[4::STRIDE]


def match_order(partial: Partial) -> tuple[int, int, tuple[int, ...]]:
    return partial[1], partial[2], seqs_of(partial)
