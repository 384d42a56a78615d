"""The alert store: complex events in PostgreSQL, upserted by their deterministic id. This module owns the
alerts table: its one migration history is here, applied by a job (the console only reads, with no DDL rights).

Every output record has an ``event_id`` computed from the rule, the key, the time and the events involved,
so a micro-batch that Spark runs again after a crash, a restarted job or a replay of history writes the same
ids: ``INSERT ... ON CONFLICT (event_id) DO UPDATE`` never duplicates a row. Indexes serve the queries a
dashboard makes: by rule, by key and by time (newest first).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sparkcep.outputs import KeyFields, Outputs, key_text, record_time
from sparkcep.store.postgres import applied_version, apply_migrations, connect, refuse_password
from sparkcep.store.records import StoreError, now_iso
from sparkcep.timeutil import parse_event_time

if TYPE_CHECKING:
    import psycopg

MIGRATIONS: list[tuple[str, ...]] = [
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
        # The console's stream asks "what arrived since I last looked", which event time cannot say: a number
        # from a sequence, taken on insert. Nullable, without a table rewrite: rows written before have none.
        # IF NOT EXISTS: consoles of earlier versions added the same column under their own schema table, which
        # this migration retires.
        "CREATE SEQUENCE IF NOT EXISTS sparkcep_alerts_arrival_seq",
        "ALTER TABLE sparkcep_alerts ADD COLUMN IF NOT EXISTS arrival BIGINT",
        "ALTER TABLE sparkcep_alerts ALTER COLUMN arrival SET DEFAULT nextval('sparkcep_alerts_arrival_seq')",
        "ALTER SEQUENCE sparkcep_alerts_arrival_seq OWNED BY sparkcep_alerts.arrival",
        "CREATE INDEX IF NOT EXISTS sparkcep_alerts_by_arrival ON sparkcep_alerts (arrival)",
        "DROP TABLE IF EXISTS sparkcep_console_alert_schema",
    ),
]
SCHEMA_TABLE = "sparkcep_alert_schema"
_LOCK = 0x5350_4B41_4C54  # serializes migrations between jobs starting together


class PostgresAlertStore:
    """Upserts output records of one job (or many) into ``sparkcep_alerts``; also answers dashboard queries."""

    def __init__(self, url: str) -> None:
        refuse_password(url, "alert store")
        self.url = url
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))  # jobs starting together migrate once
            apply_migrations(conn, f"alert store {url}", SCHEMA_TABLE, MIGRATIONS)

    def __repr__(self) -> str:
        return f"PostgresAlertStore({self.url!r})"

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return connect(self.url, "alert store")

    def wants(self, name: str) -> bool:
        return not name.startswith("_")  # complex events only

    def write_batch(self, batch_id: int, outputs: Outputs, key_fields: KeyFields | None = None) -> int:
        """Upsert a batch's complex events (``_late``, ``_deadletter`` and ``_errors`` stay in files)."""
        from psycopg.types.json import Json

        rows = []
        written_at = now_iso()
        for name, items in outputs.items():
            if name.startswith("_"):
                continue
            for at, payload in items:
                record = json.loads(payload)
                rows.append((
                    str(record["event_id"]), name, _text(record.get("rule_id")), key_text(record, key_fields),
                    record_time(record, at), Json(record), batch_id, written_at,
                ))  # fmt: skip
        if not rows:
            return 0
        with self._connection() as conn, conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO sparkcep_alerts (event_id, event_type, rule_id, key_text, occurred_at_ms, record, "
                "batch_id, written_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (event_id) DO UPDATE SET record = excluded.record, batch_id = excluded.batch_id, "
                "written_at = excluded.written_at",
                rows,
            )
        return len(rows)

    def query(
        self,
        *,
        rule_id: str | None = None,
        key: str | None = None,
        event_type: str | None = None,
        since: str | int | None = None,
        until: str | int | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Newest first; ``since`` inclusive, ``until`` exclusive (ISO-8601 or epoch ms)."""
        clauses: list[str] = []
        params: list[object] = []
        for column, value in (("rule_id", rule_id), ("key_text", key), ("event_type", event_type)):
            if value is not None:
                clauses.append(f"{column} = %s")
                params.append(value)
        if since is not None:
            clauses.append("occurred_at_ms >= %s")
            params.append(parse_event_time(since))
        if until is not None:
            clauses.append("occurred_at_ms < %s")
            params.append(parse_event_time(until))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = f"SELECT record FROM sparkcep_alerts {where} ORDER BY occurred_at_ms DESC, event_id LIMIT %s"  # noqa: S608
        with self._connection() as conn:
            rows = conn.execute(sql, (*params, limit)).fetchall()  # built from fixed parts
        return [row[0] if isinstance(row[0], dict) else json.loads(row[0]) for row in rows]

    def count(self) -> int:
        with self._connection() as conn:
            row = conn.execute("SELECT COUNT(*) FROM sparkcep_alerts").fetchone()
            return int(row[0]) if row else 0


def check_schema(conn: psycopg.Connection[Any], url: str) -> None:
    """For a reader (the console), which never migrates: the table exists with this version's schema."""
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (SCHEMA_TABLE,)).fetchone()
    found = applied_version(conn, SCHEMA_TABLE) if exists and exists[0] else 0
    if found > len(MIGRATIONS):
        raise StoreError(
            f"alert store {url} has alerts schema version {found}; this sparkcep reads up to {len(MIGRATIONS)} "
            "(upgrade sparkcep)"
        )
    if found < len(MIGRATIONS):
        state = "has no alerts table yet" if found == 0 else f"has alerts schema version {found}"
        raise StoreError(
            f"alert store {url} {state}; expected version {len(MIGRATIONS)}, which a job creates: "
            f"run `sparkcep run --alert-store {url}` (or a pipeline with sinks.postgres) once, then the console"
        )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def open_alert_sinks(specs: Iterable[str]) -> list[PostgresAlertStore]:
    """Alert stores from URLs (only PostgreSQL for now)."""
    sinks = []
    for spec in specs:
        scheme = spec.partition(":")[0]
        if scheme not in ("postgres", "postgresql"):
            raise StoreError(f"alert store: expected 'postgresql://user@host:port/db', got {spec!r}")
        sinks.append(PostgresAlertStore(spec))
    return sinks
