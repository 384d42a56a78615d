"""One English sentence per complex event, built from the fields the job wrote into it.

Aggregate alerts carry the function, the value, the limit and the window; pattern matches the events of each
stage and the measures; completion and inactivity events their key fields and counts. Whatever a record lacks
is left out of its sentence rather than guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkcep.core.result_columns import KeyFields, key_text

_FUNCTION_WORDS = {"SUM": "sum", "AVG": "average", "MIN": "minimum", "MAX": "maximum", "COUNT": "count"}


def _rule(record: Mapping[str, Any], version_field: str) -> str:
    version = record.get(version_field)
    rule_id = record.get("rule_id", "?")
    return f"rule {rule_id} v{version}" if version is not None else f"rule {rule_id}"


def _key(record: Mapping[str, Any], key_fields: KeyFields) -> str:
    text = key_text(dict(record), key_fields)
    return f" for {text}" if text else ""


def _values(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in values.items())


def explain_aggregate(record: Mapping[str, Any], key_fields: KeyFields) -> str:
    aggregate = record.get("aggregate") or {}
    limit = record.get("limit") or {}
    window = record.get("window") or {}
    function = str(aggregate.get("function", ""))
    word = _FUNCTION_WORDS.get(function, function.lower())
    subject = "count of events" if function == "COUNT" else f"{word} of {aggregate.get('field')}"
    text = f"{record.get('event_type')} from {_rule(record, 'rule_version')}: {subject}{_key(record, key_fields)}"
    if window.get("size"):
        text += f" over {window['size']}"
        if window.get("start_exclusive") and window.get("end_inclusive"):
            text += f" ({window['start_exclusive']} exclusive to {window['end_inclusive']})"
    text += f" is {aggregate.get('value')} {limit.get('operator')} {limit.get('value')}"
    if record.get("events_in_window") is not None:
        text += f"; {record['events_in_window']} events in the window"
    if record.get("trigger_event_id") is not None:
        text += f", the last {record['trigger_event_id']}"
    return text


def explain_pattern(record: Mapping[str, Any], key_fields: KeyFields) -> str:
    stages = record.get("stages") or {}
    parts = []
    for name, events in stages.items():
        ids = ", ".join(str(event.get("event_id")) for event in events)
        parts.append(f"{name} [{ids}]")
    head = f"{record.get('event_type')} from {_rule(record, 'pattern_version')}{_key(record, key_fields)}"
    span = f"between {record.get('first_event_at')} and {record.get('last_event_at')}"
    if record.get("timed_out"):
        matched = "; ".join(parts) if parts else "no events"
        return f"{head}: partial match {matched} {span} not completed within {record.get('within')}"
    text = f"{head}: matched {' then '.join(parts)} {span}" if parts else f"{head}: matched"
    measures = record.get("measures") or {}
    if measures:
        text += f"; {_values(measures)}"
    return text


def explain_other(record: Mapping[str, Any], key_fields: KeyFields) -> str:
    """Completion and inactivity events: their key, and their other fields as values."""
    key = key_fields.get(str(record.get("rule_id")), ())
    skip = {"event_type", "event_id", "occurred_at", "rule_id", "rule_version", *key}
    values = {name: value for name, value in record.items() if name not in skip and not isinstance(value, dict | list)}
    text = f"{record.get('event_type')} from {_rule(record, 'rule_version')}{_key(record, key_fields)}"
    text += f" at {record.get('occurred_at')}"
    return f"{text}; {_values(values)}" if values else text


def explain(record: Mapping[str, Any], key_fields: KeyFields) -> str:
    if isinstance(record.get("aggregate"), dict):
        return explain_aggregate(record, key_fields)
    if isinstance(record.get("stages"), dict):
        return explain_pattern(record, key_fields)
    return explain_other(record, key_fields)


def with_explanation(record: dict[str, Any], key_fields: KeyFields) -> dict[str, Any]:
    """The record with ``explanation`` (the job's own short one for aggregates is replaced by a fuller one) and
    ``key_text``: completion and inactivity events carry their key as a plain field, which only the rule names,
    so the page could not show or filter by it otherwise."""
    return {**record, "key_text": key_text(record, key_fields), "explanation": explain(record, key_fields)}
