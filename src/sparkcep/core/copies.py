"""Copies of an event (the same non-empty id at the same time) among the events a key releases: each rule takes
the first, a later copy with the same content is a duplicate for it, one with other content a dead letter."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import orjson

from sparkcep.core.batch_result import BatchResult
from sparkcep.core.bucket_state import (
    EVENT_CRC,
    EVENT_ID,
    EVENT_TIME,
    EVENT_TYPE,
    EVENT_VALUES,
    Buffered,
    event_line,
    rule_values,
)
from sparkcep.core.logic import RuleLogic
from sparkcep.timeutil import format_iso


def has_copies(ready: list[Buffered]) -> bool:
    """Whether two neighbours of ``ready`` (sorted) share a non-empty id and a time: most keys have no copies, and
    finding none is cheaper than :func:`drop_copies`'s bookkeeping."""
    # Distinct ids rule copies out in one pass of C-level set building, for the usual key whose events all have
    # ids of their own; only a repeated id (or empty ones) needs the exact check over neighbours.
    if len({event[EVENT_ID] for event in ready}) == len(ready):
        return False
    return any(
        later[EVENT_ID] and later[EVENT_ID] == earlier[EVENT_ID] and later[EVENT_TIME] == earlier[EVENT_TIME]
        for earlier, later in pairwise(ready)
    )


def _same_content(kept: Buffered, copy: Buffered) -> bool:
    """Whether two buffered events with one id and time carry the same JSON value."""
    if kept[EVENT_CRC] == copy[EVENT_CRC] and event_line(kept) == event_line(copy):
        return True
    kept_line, copy_line = event_line(kept), event_line(copy)
    if kept_line is None or copy_line is None:  # buffered before lines were kept: what the rules read decides
        same_values = rule_values(kept[EVENT_VALUES]) == rule_values(copy[EVENT_VALUES])
        return kept[EVENT_TYPE] == copy[EVENT_TYPE] and same_values
    return bool(orjson.loads(kept_line) == orjson.loads(copy_line))


def _described(event: Buffered) -> str:
    """A stand-in line for an event buffered without its line."""
    return orjson.dumps({"event_id": event[EVENT_ID], "time": format_iso(event[EVENT_TIME])}).decode()


def drop_copies(ready: list[Buffered], result: BatchResult, logics: Sequence[RuleLogic]) -> list[Buffered]:
    """``ready`` (sorted) without the copies of an event: the same non-empty id at the same time.

    Every on-time copy of an event is released in the same call as the first: a copy arriving after the
    release is behind the watermark, hence late (reported, never processed), so no memory of past ids is
    needed. Each rule takes the first copy in the tie-break order (time, id, crc32 of the line) that it
    takes at all; a later copy with the same content (the same JSON value, however written) counts as a
    duplicate for that rule, one with other content is a dead letter for it, ``conflicting duplicate``.
    """
    kept: list[Buffered] = []
    ident: tuple[int, str] | None = None  # (time, id) of the current run of copies
    taken: dict[int, Buffered] = {}  # rule index -> the copy that rule took, in the current run
    for event in ready:
        if not event[EVENT_ID] or (event[EVENT_TIME], event[EVENT_ID]) != ident:
            ident = (event[EVENT_TIME], event[EVENT_ID]) if event[EVENT_ID] else None
            taken = {index: event for index, _value in rule_values(event[EVENT_VALUES])}
            kept.append(event)
            continue
        fresh: list[tuple[tuple[int, ...] | int, Any]] = []
        duplicate = False
        for index, value in rule_values(event[EVENT_VALUES]):
            first = taken.get(index)
            if first is None:  # no earlier copy reached this rule: this one is its first
                taken[index] = event
                fresh.append(((index,), value))
                continue
            rule_id = logics[index].rule_id
            if _same_content(first, event):
                duplicate = True
                result.duplicates_by_rule[rule_id] = result.duplicates_by_rule.get(rule_id, 0) + 1
                continue
            reason = (
                f"rule {rule_id!r}: conflicting duplicate: event {event[EVENT_ID]!r} at "
                f"{format_iso(event[EVENT_TIME])} has the id and time of an earlier copy with other content "
                "(each rule keeps the first copy in (time, id, crc32 of the line) order)"
            )
            result.dead.append((event_line(event) or _described(event), reason))
            result.dead_by_rule[rule_id] = result.dead_by_rule.get(rule_id, 0) + 1
        result.duplicates += duplicate
        if fresh:
            kept.append((*event[:EVENT_VALUES], tuple(fresh), *event[EVENT_VALUES + 1 :]))
    return kept
