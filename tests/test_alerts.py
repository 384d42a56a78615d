"""The PostgreSQL alert store: upserts by deterministic id, dashboard queries."""

from __future__ import annotations

import json

import pytest

from sparkcep.alerts import PostgresAlertStore, key_text, open_alert_sinks
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.store.records import StoreError

from helpers import MINUTE, T0, line, ruleset

RULE = {
    "type": "aggregate",
    "id": "busy",
    "group_by": ["payerId"],
    "function": "COUNT",
    "operator": ">=",
    "limit": 2,
    "window": "10m",
}


def batch_outputs(records: list[dict[str, object]]) -> dict[str, list[tuple[int, str]]]:
    from sparkcep.timeutil import parse_event_time

    grouped: dict[str, list[tuple[int, str]]] = {}
    for record in records:
        grouped.setdefault(str(record["event_type"]), []).append(
            (parse_event_time(str(record["occurred_at"])), json.dumps(record))
        )
    return grouped


def test_a_batch_written_twice_and_a_replay_leave_one_row_per_alert(postgres_db: str) -> None:
    lines = [line("PAY", T0 + i * MINUTE, f"e{i}", payerId=1 + i % 2) for i in range(8)]
    records = LocalRunner(Program(ruleset(RULE)), 5_000).run([lines]).outputs
    assert len(records) == 6
    store = PostgresAlertStore(postgres_db)
    outputs = batch_outputs(records)
    outputs["_late"] = [(T0, json.dumps({"line": "x"}))]  # not a complex event: stays in files
    assert store.write_batch(3, outputs) == 6
    assert store.write_batch(3, outputs) == 6  # Spark runs batch 3 again after a crash
    assert PostgresAlertStore(postgres_db).write_batch(0, batch_outputs(records)) == 6  # a replay, new job
    assert store.count() == 6
    newest = store.query(limit=2)
    assert [r["occurred_at"] for r in newest] == ["2024-01-01T00:07:00.000Z", "2024-01-01T00:06:00.000Z"]
    by_key = store.query(key="payerId=1")
    assert {r["key"]["payerId"] for r in by_key} == {1} and len(by_key) == 3
    assert len(store.query(rule_id="busy", since=T0 + 4 * MINUTE, until="2024-01-01T00:06:00Z")) == 2
    assert store.query(rule_id="other") == []


def test_urls_with_passwords_and_other_schemes_are_refused() -> None:
    with pytest.raises(StoreError, match="PGPASSWORD"):
        PostgresAlertStore("postgresql://ana:secret@127.0.0.1:1/alerts")
    with pytest.raises(StoreError, match="expected 'postgresql://"):
        open_alert_sinks(["sqlite:alerts.db"])
    assert key_text({"key": {"payerId": 25, "beneficiaryId": 12}}) == "payerId=25,beneficiaryId=12"
