"""Result rows of output records (sparkcep.spark.detection): made from the record itself, as the batch plan does,
or read back from its JSON text, as the streaming plan does, they are the same row."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from sparkcep.runfiles.outputs import KIND_DEAD, KIND_LATE, KIND_METRIC, KIND_OUTPUT
from sparkcep.spark.detection import DETECTION_SCHEMA, detection_batch

FIELDS = {"order-fulfilment": ("order_number",), "fraud": ("card_id", "user_id")}
RECORDS: list[dict[str, Any]] = [
    {"rule_id": "order-fulfilment", "event_type": "ALL_PARCELS_SHIPPED", "order_number": "o-ü☃",
     "occurred_at": "2024-03-01T12:00:00.123Z", "event_id": "e1", "parcels_shipped": 3},
    {"rule_id": "fraud", "event_type": "SUSPICIOUS", "card_id": "c1", "user_id": -7, "occurred_at": 1709294400000,
     "event_id": "e2", "amounts": [1.5, 1e16, None], "nested": {"a": True}},
    {"rule_id": "pattern", "event_type": "MATCH", "key": {"card_id": "c9", "n": 2},
     "occurred_at": "2024-03-01T12:00:00Z"},
    {"rule_id": 7, "event_type": None, "occurred_at": None},  # not a rule's usual record: still the same row
]  # fmt: skip


@pytest.mark.parametrize("record", RECORDS)
def test_an_output_row_made_from_the_record_equals_the_one_read_from_its_text(record: dict[str, Any]) -> None:
    payload = orjson.dumps(record).decode()
    made = detection_batch([], [], FIELDS, records=[record])
    read = detection_batch([KIND_OUTPUT], [payload], FIELDS)
    assert made.to_pylist() == read.to_pylist()


def test_the_columns_of_an_output_row() -> None:
    rows = detection_batch([], [], FIELDS, records=RECORDS[:3]).to_pylist()
    assert [(r["kind"], r["rule_id"], r["event_type"], r["key"], r["event_time_ms"], r["event_id"]) for r in rows] == [
        ("output", "order-fulfilment", "ALL_PARCELS_SHIPPED", "order_number=o-ü☃", 1709294400123, "e1"),
        ("output", "fraud", "SUSPICIOUS", "card_id=c1,user_id=-7", 1709294400000, "e2"),
        ("output", "pattern", "MATCH", "card_id=c9,n=2", 1709294400000, None),
    ]
    assert [orjson.loads(r["record"]) for r in rows] == RECORDS[:3]


def test_rows_made_already_come_first_in_the_batch_and_the_others_keep_their_order() -> None:
    late = orjson.dumps({"key": {"order_number": "o1"}, "event_time": "2024-03-01T12:00:00.000Z"}).decode()
    dead = orjson.dumps({"reason": "not JSON", "line": "{"}).decode()
    payloads = [orjson.dumps(RECORDS[2]).decode(), late, "{}", dead]
    kinds = [KIND_OUTPUT, KIND_LATE, KIND_METRIC, KIND_DEAD]
    batch = detection_batch(kinds, payloads, FIELDS, records=RECORDS[:2])
    assert batch.schema == DETECTION_SCHEMA
    assert batch.column("event_id").to_pylist() == ["e1", "e2", None, None, None]
    assert batch.column("kind").to_pylist() == ["output", "output", "output", "late", "dead_letter"]
    assert batch.column("key").to_pylist()[3] == "order_number=o1"
    assert batch.column("reason").to_pylist()[3:] == ["late", "not JSON"]
    with_metrics = detection_batch(kinds, payloads, FIELDS, metrics=True)
    assert with_metrics.column("kind").to_pylist() == ["output", "late", "metric", "dead_letter"]


def test_a_late_rows_key_is_written_as_a_complex_events_key_is() -> None:
    """One text for a key object, whichever kind of row carries it (an empty one is no key)."""
    keys = [{"card_id": "c1", "user_id": -7}, {}, None]
    payloads = [orjson.dumps({"key": key, "event_time": "2024-03-01T12:00:00.000Z"}).decode() for key in keys]
    late = detection_batch([KIND_LATE] * 3, payloads, FIELDS).column("key").to_pylist()
    outputs = [orjson.dumps({**RECORDS[2], "key": key}).decode() for key in keys]
    made = detection_batch([KIND_OUTPUT] * 3, outputs, {}).column("key").to_pylist()
    assert late == made == ["card_id=c1,user_id=-7", None, None]
