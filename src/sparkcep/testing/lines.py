"""The reference evaluator's reading of one line: checks 1-5 of the input contract (docs/semantics.md), and the
field checks every rule type's evaluator shares, each giving the dead-letter reason it finds."""

from __future__ import annotations

import json

from sparkcep.arrival import ARRIVAL_REASON, is_arrival
from sparkcep.core.control import BUCKET_FIELD, CONTROL_FIELD
from sparkcep.errors import SparkcepError
from sparkcep.rules.model import RuleSet
from sparkcep.timeutil import EXPECTED_EVENT_TIME, parse_event_time

MISSING = object()  # a field the event does not have (null is a value)
EXPECTED_STR_OR_INT = "a string or an integer"
EXPECTED_KEY = "a string without the character U+001F or an integer"


def is_str_or_int(value: object) -> bool:
    # bool is an int subclass in Python, but JSON true/false are not numbers
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _show(value: object) -> str:
    if value is MISSING:
        return "nothing (field missing)"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def bad_field(name: str, expected: str, got: object) -> str:
    return f"field {name!r}: expected {expected}, got {_show(got)}"


def _reject_constant(name: str) -> object:
    # json.loads accepts NaN and Infinity by default; they are not JSON
    raise ValueError(f"{name} is not valid JSON")


# One decoder for all lines: json.loads(..., parse_constant=...) would build a new one per line.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


# one return per check of the contract, in the contract's order, reads best here
def parse_line(  # noqa: PLR0911
    rules: RuleSet, consumed: set[str] | None, line: str, arrival: int | None = None
) -> tuple[int, str, str, dict[str, object]] | str:
    """Checks 1-5 of the contract: (time, event type, event id, object), or a dead-letter reason.

    ``consumed`` is None when some rule consumes every event type; without a type field every event's type is "".
    ``arrival``: the line's arrival time, its time when the rules run on arrival time (no field is read then).
    """
    spec = rules.input
    try:
        obj = _DECODER.decode(line)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return f"malformed JSON: {exc}"
    if not isinstance(obj, dict):
        kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        kind = kinds.get(type(obj), "a number")
        return f"not a JSON object: the line is {kind}"
    if obj.get(CONTROL_FIELD) is not None or obj.get(BUCKET_FIELD) is not None:
        return f"fields {CONTROL_FIELD!r} and {BUCKET_FIELD!r} are reserved for sparkcep's control records"
    if is_arrival(spec.time_field):
        if arrival is None:
            return f"field {spec.time_field!r}: {ARRIVAL_REASON}"
        event_time = arrival
    else:
        raw_time = obj.get(spec.time_field, MISSING)
        if raw_time is MISSING:
            return bad_field(spec.time_field, "an event time", raw_time)
        try:
            event_time = parse_event_time(raw_time)
        except SparkcepError:
            return bad_field(spec.time_field, EXPECTED_EVENT_TIME, raw_time)
    event_type = "" if spec.type_field is None else obj.get(spec.type_field, MISSING)
    if not isinstance(event_type, str):
        assert spec.type_field is not None
        return bad_field(spec.type_field, "an event type string", event_type)
    if consumed is not None and event_type not in consumed:
        return f"no rule consumes event_type {event_type!r}"
    event_id = obj.get(spec.id_field, MISSING)
    if event_id is not MISSING and not is_str_or_int(event_id):
        return bad_field(spec.id_field, f"{EXPECTED_STR_OR_INT} (or no field)", event_id)
    return event_time, event_type, "" if event_id is MISSING else str(event_id), obj


def is_key(value: object) -> bool:
    # U+001F joins the fields of a composite key: a key value containing it would collide with another key
    return is_str_or_int(value) and not (isinstance(value, str) and "\x1f" in value)


def key_problem(rule_id: str, field_name: str, obj: dict[str, object]) -> str | None:
    value = obj.get(field_name, MISSING)
    return None if is_key(value) else f"rule {rule_id!r}, " + bad_field(field_name, EXPECTED_KEY, value)
