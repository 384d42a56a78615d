"""Detection.records: one rule's complex events with their records' fields as typed columns, for every built-in
rule type (and a pattern written as MATCH_RECOGNIZE), read from a Kafka-shaped frame so that origins are typed too."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest
from count_rule_type import COUNT, EVERY_THIRD

from sparkcep.api import ApiError, detect
from sparkcep.api_input import JSON_OPTIONS
from sparkcep.rules.registry import registered

from helpers import COMPLETION_RULE, INACTIVITY_RULE, MINUTE, PAYMENT_RULE, T0, line, order, parcel, track

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

BUSY = {"type": "aggregate", "id": "busy", "group_by": ["card_id"], "function": "SUM", "field": "amount",
        "operator": ">", "limit": "0.5", "window": "10m", "output_event": "BUSY_CARD"}  # fmt: skip
SMALL_THEN_LARGE = {**PAYMENT_RULE, "output": {
    "event_type": "SMALL_THEN_LARGE", "timeout_event_type": "SMALL_ALONE",
    "measures": {"small": "first(small).amount", "large": "first(large).amount", "flag": "true"},
}}  # fmt: skip
SQL_RULE = {"type": "pattern", "id": "by-sql", "event_types": ["PAYMENT"], "sql": """
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY card_id ORDER BY occurred_at
  MEASURES FIRST(S.amount) AS small, LAST(L.amount) AS large
  PATTERN (S L) WITHIN INTERVAL '10' MINUTE
  DEFINE S AS S.amount < 5, L AS L.amount > 100 * S.amount
)"""}  # fmt: skip
RULES = [COMPLETION_RULE, INACTIVITY_RULE, BUSY, SMALL_THEN_LARGE, SQL_RULE]
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def events() -> list[str]:
    """Orders that complete and that miss their deadline, devices that go quiet and come back, payments."""
    lines = [order("o1", T0, 2), parcel("o1", "p1", T0 + MINUTE), parcel("o1", "p2", T0 + 2 * MINUTE)]
    lines += [order("o2", T0 + 3 * MINUTE, 3), parcel("o2", "p3", T0 + 4 * MINUTE)]
    lines += [track("d1", T0 + n * 20 * MINUTE) for n in (0, 1, 4, 5)] + [track("d2", T0 + 5 * MINUTE)]
    for card in range(4):
        for step in range(8):
            amount = 2 if step % 3 == 0 else 150 + card * 40 + step
            lines.append(line("PAYMENT", T0 + (card * 5 + step * 3) * MINUTE, f"p{card}-{step}", card_id=f"c{card}",
                              amount=amount))  # fmt: skip
    lines.append(line("PAYMENT", T0 + 8 * 24 * 60 * MINUTE, "late-end", card_id="c9", amount=1))  # deadlines pass
    return lines


def as_written(record: dict[str, Any]) -> dict[str, Any]:
    """A record as its typed columns give it back: measures are text (a number's JSON text)."""
    if "measures" in record:
        measures = {name: v if isinstance(v, str) else json.dumps(v) for name, v in record["measures"].items()}
        record = {**record, "measures": measures}
    return record


def test_records_type_every_field_of_every_built_in_rule_types_records(spark: SparkSession) -> None:
    rows = [(text, "orders", n % 3, n) for n, text in enumerate(events())]
    frame = spark.createDataFrame(rows, "value string, topic string, partition int, offset long")
    found = detect(frame, RULES, buckets=4, watermark_delay=0)
    from pyspark.sql import functions as F

    seen_types = set()
    for rule in RULES:
        typed = found.records(str(rule["id"]))
        columns = [name for name in typed.columns if name != "record"]
        written = F.to_json(F.struct(*[typed[name] for name in columns]), JSON_OPTIONS)
        back = typed.select(written.alias("back"), "record")
        pairs = [(json.loads(row["back"]), json.loads(row["record"])) for row in back.collect()]
        assert pairs, rule["id"]
        for typed_record, record in pairs:
            assert set(record) <= set(columns), (rule["id"], set(record) - set(columns))  # no field left out
            assert typed_record == as_written(record)  # every value, typed, reads back as written
        for name, dtype in typed.dtypes:  # times are timestamps, counts are integers
            values = [record[name] for _, record in pairs if name in record]
            if values and all(isinstance(v, str) and ISO_TIME.fullmatch(v) for v in values):
                assert dtype == "timestamp", (rule["id"], name)
            if values and all(type(v) is int for v in values):
                assert dtype in ("int", "bigint"), (rule["id"], name)
        seen_types |= {record["event_type"] for _, record in pairs}
        assert all(record["rule_id"] == rule["id"] for _, record in pairs)
    # Each kind of record was there to be typed: completed and missed, offline and online, timed-out matches.
    assert seen_types >= {"ALL_PARCELS_SHIPPED", "THRESHOLD_EXCEEDED", "DEVICE_OFFLINE", "DEVICE_ONLINE",
                          "BUSY_CARD", "SMALL_THEN_LARGE", "SMALL_ALONE", "BY_SQL"}  # fmt: skip
    schema = dict(found.records("order-fulfilment").dtypes)
    typed_counts = (schema["occurred_at"], schema["parcels_to_ship"], schema["parcels_shipped"])
    assert typed_counts == ("timestamp", "bigint", "bigint")
    assert dict(found.records("busy").dtypes)["key"] == "struct<card_id:string>"
    assert dict(found.records("by-sql").dtypes)["measures"] == "struct<small:string,large:string>"


def test_records_name_what_they_cannot_type(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(line("TRACK", T0, "t1", device_id="d1"),)], "value string")
    found = detect(frame, [INACTIVITY_RULE], buckets=2)
    with pytest.raises(ApiError, match=r"argument 'rule_id'.*one of this detection's rules \(device-offline\).*'nope'"):
        found.records("nope")
    with registered(COUNT):  # a rule type registered from outside that does not declare its records' fields
        counted = detect(frame, [EVERY_THIRD], buckets=2)
        with pytest.raises(ApiError, match=r"declares its record fields.*'every-third-track', of type 'count'"):
            counted.records("every-third-track")
