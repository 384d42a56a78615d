"""The contract between the engine and a rule type.

A rule's per-key state is an immutable tuple whose first element is the key's next timer (epoch ms)
or ``None``. Keeping the timer in a fixed slot lets the engine find due timers without asking the
rule, and keeps state plain data that pickles into one blob per Spark grouping key.

Handlers return the new state, or ``None`` to forget the key for this rule. They never read a clock:
time comes in as arguments.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import orjson
from mypy_extensions import mypyc_attr

State = tuple[Any, ...]
Record = dict[str, object]


class FieldProblem(Exception):
    """An input field a rule needs is missing or has the wrong type (becomes a dead letter)."""

    def __init__(self, field: str, expected: str, got: object) -> None:
        super().__init__(field, expected, got)
        self.field = field
        self.expected = expected
        self.got = got

    def describe(self) -> str:
        """``expected ..., got ...`` (or the expected part alone when it already is the whole story)."""
        return self.expected if self.got is _COMPLETE else f"expected {self.expected}, got {self.got}"


_COMPLETE = object()  # FieldProblem.got for problems whose message says everything (e.g. a filter's error)


def whole_problem(field: str, message: str) -> FieldProblem:
    return FieldProblem(field, message, _COMPLETE)


_MISSING = object()
SKIP = object()  # returned by extract() for an event outside the rule's scope


def describe(value: object) -> str:
    """How a dead-letter reason shows what came (at most about 100 characters of it: the line is in the record)."""
    if value is _MISSING:
        return "nothing (field missing)"
    text = repr(value)
    if len(text) > 100:
        text = f"{text[:100]}... ({len(text)} characters)"
    return f"{text} ({type(value).__name__})"


# Joins the fields of a composite key (ASCII unit separator): a key value may not contain it, or two keys
# could read alike (and the key could not be split back into its fields).
KEY_SEPARATOR = "\x1f"


def require_key(obj: dict[str, Any], field: str) -> str:
    """A grouping key: a string without :data:`KEY_SEPARATOR` or an integer (booleans are not keys)."""
    value = obj.get(field, _MISSING)
    if type(value) is str and KEY_SEPARATOR not in value:
        return value
    if type(value) is int:
        return str(value)
    raise FieldProblem(field, "a string without the character U+001F or an integer", describe(value))


def require_positive_int(obj: dict[str, Any], field: str) -> int:
    value = obj.get(field, _MISSING)
    if type(value) is int and value >= 1:
        return value
    raise FieldProblem(field, "an integer >= 1", describe(value))


def trigger_origin(record: Record, origin: str | None) -> Record:
    """``record`` with the origin of the event that triggered it (as JSON), when that origin is known."""
    if origin is not None:
        record["trigger_origin"] = orjson.loads(origin)
    return record


# A rule type registered from outside the package subclasses this in plain Python, also where the built-in logics
# are compiled (sparkcep.native): the compiled class must allow that.
@mypyc_attr(allow_interpreted_subclasses=True)
class RuleLogic(ABC):
    """Running logic of one rule definition (immutable; all per-key data lives in the state tuple)."""

    def __init__(self, rule_id: str, key_fields: tuple[str, ...], event_types: tuple[str, ...]) -> None:
        self.rule_id = rule_id
        self.key_fields = key_fields
        self.event_types = event_types
        # Event types that can give a key without state for this rule some state; None: any type may.
        # The engine does not call on_event for a key without state and an event of another type, which
        # is most events for most sequence patterns (a promise on_event must keep: it would return None).
        self.start_types: frozenset[str] | None = None
        # True when extract returns the event's object itself for every event routed to this rule, at any time
        # (no filter, no version that pauses it): decoding then hands it over without calling extract.
        self.takes_whole_event = False

    @abstractmethod
    def extract(self, event_type: str, obj: dict[str, Any], time: int) -> object:
        """Validate and keep only what this rule needs of an event; raise :class:`FieldProblem`.

        Return :data:`SKIP` when the event is outside the rule's scope at ``time`` (not an error)."""

    @abstractmethod
    def on_event(
        self,
        state: State | None,
        time: int,
        event_id: str,
        event_type: str,
        value: Any,
        key: str,
        out: list[Record],
        origin: str | None = None,
    ) -> State | None:
        """Handle one event in event-time order; append output records to ``out``.

        ``origin`` is where the event's input record came from (JSON text, e.g. a Kafka topic, partition and
        offset; None when unknown): a complex event that this event triggers carries it as ``trigger_origin``.
        """

    @abstractmethod
    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        """The key's timer (``state[0]``) fired at ``time``."""
