"""The PostgreSQL alert store: upserts by deterministic id, dashboard queries."""

from __future__ import annotations

import json

import pytest

from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.core.result_columns import key_text
from sparkcep.io.postgres import MIGRATIONS, PostgresAlertStore, open_alert_sinks
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


def _as_role(url: str, role: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{role}@{rest.split('@', 1)[1]}"


def test_the_console_reads_the_job_s_table_without_ddl_rights(postgres_db: str) -> None:
    import uuid

    import psycopg

    from sparkcep.console.alert_sources import AlertQuery
    from sparkcep.console.postgres_alerts import PostgresAlertSource

    expected = rf"has no alerts table yet; expected version {len(MIGRATIONS)} in schema 'sparkcep'.*sparkcep run"
    with pytest.raises(StoreError, match=expected):
        PostgresAlertSource(postgres_db)  # no job has written here: the console creates nothing
    store = PostgresAlertStore(postgres_db)  # the job owns the schema
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")  # type: ignore[arg-type]  # generated name
        conn.execute(f"GRANT USAGE ON SCHEMA sparkcep TO {role}")  # type: ignore[arg-type]
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA sparkcep TO {role}")  # type: ignore[arg-type]
        conn.execute(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC, {role}")  # type: ignore[arg-type]
    reader = _as_role(postgres_db, role)
    with psycopg.connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("CREATE TABLE t (x int)")  # the role really cannot change the schema
    source = PostgresAlertSource(reader)
    tail = source.tail()
    lines = [line("PAY", T0 + i * MINUTE, f"e{i}", payerId=1) for i in range(3)]
    records = LocalRunner(Program(ruleset(RULE)), 5_000).run([lines]).outputs
    store.write_batch(1, batch_outputs(records))
    assert [r["event_id"] for r in tail.poll()] == [r["event_id"] for r in records]
    assert len(source.recent(AlertQuery(limit=10), {})) == len(records)


def test_a_table_an_earlier_console_extended_is_taken_over_by_the_job_s_migrations(postgres_db: str) -> None:
    import pg_legacy
    import psycopg

    from sparkcep.io.postgres import COMPONENT
    from sparkcep.store.pg_schema import recorded_version

    # Before: the job's first migration, and the console's own history adding the arrival column.
    pg_legacy.create(postgres_db, rules=False, alerts=1, console=True)
    store = PostgresAlertStore(postgres_db)
    with psycopg.connect(postgres_db) as conn:
        assert recorded_version(conn, "sparkcep", "alerts") == COMPONENT.latest
        gone = conn.execute(
            "SELECT to_regclass('public.sparkcep_console_alert_schema') IS NULL "
            "AND to_regclass('public.sparkcep_alert_schema') IS NULL"
        ).fetchone()
        assert gone == (True,)
    lines = [line("PAY", T0 + i * MINUTE, f"e{i}", payerId=1) for i in range(3)]
    assert store.write_batch(1, batch_outputs(LocalRunner(Program(ruleset(RULE)), 5_000).run([lines]).outputs)) == 2
    with psycopg.connect(postgres_db) as conn:
        assert conn.execute("SELECT COUNT(arrival) FROM sparkcep.sparkcep_alerts").fetchone() == (2,)
