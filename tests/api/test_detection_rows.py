"""Result rows of output records (sparkcep.spark.detection): made from the record itself, as the batch plan does,
or read back from its JSON text, as the streaming plan does, they are the same row."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from sparkcep.runfiles.outputs import KIND_OUTPUT
from sparkcep.spark.detection import DETECTION_SCHEMA, detection_batch, detection_row, output_row

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
    assert output_row(record, payload, FIELDS) == detection_row(KIND_OUTPUT, payload, FIELDS)


def test_rows_made_already_come_first_in_the_batch() -> None:
    made = [output_row(r, orjson.dumps(r).decode(), FIELDS) for r in RECORDS[:2]]
    payloads = [orjson.dumps(r).decode() for r in RECORDS[2:]]
    batch = detection_batch([KIND_OUTPUT] * len(payloads), payloads, FIELDS, first=made)
    assert batch.schema == DETECTION_SCHEMA
    assert batch.column("event_id").to_pylist() == ["e1", "e2", None, None]
