"""sparkcep's PostgreSQL tables as they were before the shared version table: a frozen copy for upgrade tests.

Until then, every table lived where the connection's search path put it (``public``), each store counted its
migrations in a table of its own (``sparkcep_schema_version``, ``sparkcep_alert_schema``; earlier consoles kept
``sparkcep_console_alert_schema``), times were epoch-ms ``bigint`` and ISO-8601 ``text``, records ``json``. The
statements and the writes below are those of that code, copied, so the tests keep building this layout however
the stores change.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from sparkcep.core.result_columns import key_text
from sparkcep.runfiles.outputs import record_time
from sparkcep.store.records import StoredVersion

RULE_VERSION_TABLE = "sparkcep_schema_version"
ALERT_VERSION_TABLE = "sparkcep_alert_schema"
CONSOLE_VERSION_TABLE = "sparkcep_console_alert_schema"

RULE_MIGRATIONS: list[tuple[str, ...]] = [
    (
        """CREATE TABLE sparkcep_rule_versions (
            seq BIGINT PRIMARY KEY,
            rule_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            effective_from_ms BIGINT,
            state TEXT NOT NULL,
            rule_json JSON NOT NULL,
            recorded_at TEXT NOT NULL,
            author TEXT
        )""",
        "CREATE UNIQUE INDEX sparkcep_rule_versions_rule_version ON sparkcep_rule_versions (rule_id, version)",
        "CREATE TABLE sparkcep_store_settings (name TEXT PRIMARY KEY, value JSON NOT NULL)",
    ),
]
ALERT_MIGRATIONS: list[tuple[str, ...]] = [
    (
        """CREATE TABLE sparkcep_alerts (
            event_id TEXT PRIMARY KEY,
            event_type TEXT NOT NULL,
            rule_id TEXT,
            key_text TEXT,
            occurred_at_ms BIGINT NOT NULL,
            record JSON NOT NULL,
            batch_id BIGINT NOT NULL,
            written_at TEXT NOT NULL
        )""",
        "CREATE INDEX sparkcep_alerts_by_rule ON sparkcep_alerts (rule_id, occurred_at_ms DESC)",
        "CREATE INDEX sparkcep_alerts_by_key ON sparkcep_alerts (key_text, occurred_at_ms DESC)",
        "CREATE INDEX sparkcep_alerts_by_time ON sparkcep_alerts (occurred_at_ms DESC)",
        "CREATE INDEX sparkcep_alerts_by_type ON sparkcep_alerts (event_type, occurred_at_ms DESC)",
    ),
    (
        "CREATE SEQUENCE IF NOT EXISTS sparkcep_alerts_arrival_seq",
        "ALTER TABLE sparkcep_alerts ADD COLUMN IF NOT EXISTS arrival BIGINT",
        "ALTER TABLE sparkcep_alerts ALTER COLUMN arrival SET DEFAULT nextval('sparkcep_alerts_arrival_seq')",
        "ALTER SEQUENCE sparkcep_alerts_arrival_seq OWNED BY sparkcep_alerts.arrival",
        "CREATE INDEX IF NOT EXISTS sparkcep_alerts_by_arrival ON sparkcep_alerts (arrival)",
        "DROP TABLE IF EXISTS sparkcep_console_alert_schema",
    ),
]
# An earlier console's own history: the arrival column, before the job's second migration took it over.
CONSOLE_MIGRATIONS: list[tuple[str, ...]] = [ALERT_MIGRATIONS[1][:-1]]
LEGACY_TABLES = (
    RULE_VERSION_TABLE, ALERT_VERSION_TABLE, CONSOLE_VERSION_TABLE, "sparkcep_rule_versions",
    "sparkcep_store_settings", "sparkcep_alerts", "sparkcep_alerts_arrival_seq",
)  # fmt: skip


def apply_migrations(conn: psycopg.Connection[Any], version_table: str, migrations: list[tuple[str, ...]]) -> None:
    """The earlier runner: the numbered migrations not applied yet, each recorded, in the caller's transaction."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER PRIMARY KEY, applied_at TEXT)")
    row = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {version_table}").fetchone()  # noqa: S608
    applied = int(row[0]) if row else 0
    for number in range(applied + 1, len(migrations) + 1):
        for statement in migrations[number - 1]:
            conn.execute(statement)
        conn.execute(
            f"INSERT INTO {version_table} (version, applied_at) VALUES (%s, %s)",  # noqa: S608
            (number, "2026-11-01T08:00:00.000Z"),
        )


def create(url: str, *, rules: bool = True, alerts: int = 2, console: bool = False) -> None:
    """The earlier layout: the rule store's tables, the alert store's at version ``alerts`` (0: none) and, with
    ``console``, an earlier console's arrival column under its own version table."""
    with psycopg.connect(url) as conn, conn.transaction():
        if rules:
            apply_migrations(conn, RULE_VERSION_TABLE, RULE_MIGRATIONS)
        if alerts:
            apply_migrations(conn, ALERT_VERSION_TABLE, ALERT_MIGRATIONS[:alerts])
        if console:
            apply_migrations(conn, CONSOLE_VERSION_TABLE, CONSOLE_MIGRATIONS)


def write_versions(url: str, versions: list[StoredVersion], settings: dict[str, Any] | None = None) -> None:
    """Rule versions as the earlier rule store wrote them (effective_from_ms bigint, json text, text time)."""
    with psycopg.connect(url) as conn, conn.transaction():
        for v in versions:
            rule = {k: (None if k == "effective_from" else value) for k, value in v.rule.items()}
            conn.execute(
                "INSERT INTO sparkcep_rule_versions (seq, rule_id, version, effective_from_ms, state, rule_json, "
                "recorded_at, author) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (v.seq, v.rule_id, v.version, v.effective_from_ms, v.state, json.dumps(rule), v.recorded_at, v.author),
            )
        if settings is not None:
            conn.execute(
                "INSERT INTO sparkcep_store_settings (name, value) VALUES ('input', %s)", (json.dumps(settings),)
            )


def write_alerts(url: str, batch_id: int, records: list[dict[str, Any]], written_at: str) -> None:
    """Complex events as the earlier alert store wrote them (occurred_at_ms bigint, json, text time)."""
    with psycopg.connect(url) as conn, conn.transaction():
        for record in records:
            conn.execute(
                "INSERT INTO sparkcep_alerts (event_id, event_type, rule_id, key_text, occurred_at_ms, record, "
                "batch_id, written_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    str(record["event_id"]), str(record["event_type"]), record.get("rule_id"), key_text(record),
                    record_time(record, 0), json.dumps(record), batch_id, written_at,
                ),
            )  # fmt: skip
