"""The order of events with equal time: a pattern's ``tie_break`` fields (SQL's ``ORDER BY rowtime, price DESC``).

Events are matched in event-time order; without ``tie_break``, events of one key with equal time go by event id
(the engine's order, see sparkcep.core.engine). With it they go by these fields first, each ascending or
descending, then by that same order, so the result still depends on nothing but the events (replays and
restarts give the same matches).

``"tie_break": [{"field": "price", "descending": true}, {"field": "seq"}]``: ``field`` is a top-level field;
``descending`` (default false); ``nulls_first`` (default: nulls sort as the smallest value, so first when
ascending and last when descending, as Flink orders them). Values of different kinds in one field sort by kind
(booleans, numbers, text, anything else by its JSON text), so any input has one order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from sparkcep.cep.pattern_error import PatternError

T = TypeVar("T")
MAX_TIE_FIELDS = 16  # more columns than any ORDER BY needs; bounds the work per tied event
_KEYS = {"field", "descending", "nulls_first"}


@dataclass(frozen=True)
class TieField:
    field: str
    descending: bool = False
    nulls_first: bool | None = None  # None: nulls are the smallest value

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"field": self.field}
        if self.descending:
            found["descending"] = True
        if self.nulls_first is not None:
            found["nulls_first"] = self.nulls_first
        return found


def parse_tie_break(raw: object) -> tuple[TieField, ...]:
    """The fields of a pattern's ``tie_break`` (absent: none)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_TIE_FIELDS:
        raise PatternError("pattern", "tie_break", f"a list of 1 to {MAX_TIE_FIELDS} fields", raw)
    fields: list[TieField] = []
    for item in raw:
        shape = 'objects like {"field": "price", "descending": true}'
        if not isinstance(item, Mapping) or not set(item) <= _KEYS:
            raise PatternError("pattern", "tie_break", shape, item)
        name, descending, nulls_first = item.get("field"), item.get("descending", False), item.get("nulls_first")
        if not isinstance(name, str) or not name or not isinstance(descending, bool):
            raise PatternError("pattern", "tie_break", shape, item)
        if nulls_first is not None and not isinstance(nulls_first, bool):
            raise PatternError("pattern", "tie_break", "'nulls_first' true or false", nulls_first)
        if any(known.field == name for known in fields):
            raise PatternError("pattern", "tie_break", "each field once", name)
        fields.append(TieField(name, descending, nulls_first))
    return tuple(fields)


def _kind_and_value(value: object) -> tuple[int, Any]:
    """A value's place among values of any kind: its kind's rank, then the value within the kind."""
    if isinstance(value, bool):
        return 0, value
    if isinstance(value, int | float | Decimal):
        return 1, value
    if isinstance(value, str):
        return 2, value
    return 3, json.dumps(value, sort_keys=True, default=str)


def tie_ordered(items: Sequence[T], fields: tuple[TieField, ...], row: Callable[[T], Mapping[str, Any]]) -> list[T]:
    """``items`` (events of one time, in the engine's order) sorted by ``fields`` of ``row(item)``; items equal
    on every field keep their order. One stable sort per field, the last field first."""
    ordered = list(items)
    for tie in reversed(fields):
        # Nulls are the smallest value unless ``nulls_first`` says where they go; a descending sort runs reversed,
        # so nulls first there need the largest flag.
        null_flag = 0 if tie.nulls_first is None or tie.nulls_first != tie.descending else 2

        def key(item: T, name: str = tie.field, flag: int = null_flag) -> tuple[int, int, Any]:
            value = row(item).get(name)
            return (flag, 0, None) if value is None else (1, *_kind_and_value(value))

        ordered.sort(key=key, reverse=tie.descending)
    return ordered
