"""A complex event's correlation key, and the result columns of :func:`sparkcep.api.detect` made of records.

Compiled with the engine (sparkcep.native): the batch plan turns every complex event into a result row, a
quarter of the events at 10M orders. As interpreted Python (a tuple per record from a few lookups, its key text,
its time read back, then the tuples turned into columns) that was 4.2-4.5 µs a record, a sixth of the batch plan's
Python time; here the columns are filled directly, in compiled code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from sparkcep.timeutil import read_formatted

KeyFields = Mapping[str, tuple[str, ...]]  # rule id -> the fields that key its outputs
# The ``kind`` column's value of a complex event (sparkcep.spark.detection.KINDS).
OUTPUT = "output"


def key_values(record: dict[str, Any], key_fields: KeyFields) -> list[tuple[str, object]]:
    """The correlation key of a complex event as (field, value) pairs: its ``key`` object (aggregate and pattern
    rules) or the rule's key fields at the top level (completion and inactivity rules)."""
    key = record.get("key")
    if isinstance(key, dict):
        return list(key.items())
    fields = key_fields.get(str(record.get("rule_id")), ())
    return [(name, record[name]) for name in fields if name in record]


def key_text(record: dict[str, Any], key_fields: KeyFields | None = None) -> str | None:
    """The key as one searchable text, ``payerId=25,beneficiaryId=12``; None when the record has none."""
    pairs = key_values(record, key_fields or {})
    return ",".join(f"{name}={value}" for name, value in pairs) if pairs else None


def text_or_none(value: object) -> str | None:
    """A record's field as a result column's text: None stays None (a rule id of 7 is "7")."""
    return None if value is None else str(value)


class ResultColumns:
    """Result rows as columns (the order of sparkcep.spark.detection.DETECTION_SCHEMA), in the order added."""

    __slots__ = ("event_ids", "event_times", "event_types", "keys", "kinds", "reasons", "records", "rule_ids")

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.rule_ids: list[str | None] = []
        self.event_types: list[str | None] = []
        self.keys: list[str | None] = []
        self.event_times: list[int | None] = []
        self.event_ids: list[str | None] = []
        self.reasons: list[str | None] = []
        self.records: list[str] = []

    def add_output(self, record: dict[str, Any], payload: str, key_fields: KeyFields) -> None:
        """A complex event ``record`` (a dict of JSON values) whose JSON text is ``payload``."""
        self.kinds.append(OUTPUT)
        self.rule_ids.append(text_or_none(record.get("rule_id")))
        self.event_types.append(text_or_none(record.get("event_type")))
        self.keys.append(key_text(record, key_fields))
        self.event_times.append(read_formatted(record.get("occurred_at")))
        self.event_ids.append(text_or_none(record.get("event_id")))
        self.reasons.append(None)
        self.records.append(payload)

    def add_outputs(self, records: list[dict[str, Any]], key_fields: KeyFields) -> None:
        """Complex events made by the engine: their JSON text is made here."""
        for record in records:
            self.add_output(record, orjson.dumps(record).decode(), key_fields)

    def add_row(self, row: tuple[Any, ...]) -> None:
        """A result row of another kind, whole."""
        kind, rule_id, event_type, key, event_time, event_id, reason, record = row
        self.kinds.append(kind)
        self.rule_ids.append(rule_id)
        self.event_types.append(event_type)
        self.keys.append(key)
        self.event_times.append(event_time)
        self.event_ids.append(event_id)
        self.reasons.append(reason)
        self.records.append(record)

    def columns(self) -> list[list[Any]]:
        return [
            self.kinds, self.rule_ids, self.event_types, self.keys, self.event_times, self.event_ids, self.reasons,
            self.records,
        ]  # fmt: skip
