"""The alert store: complex events in PostgreSQL, upserted by their deterministic id. This module owns the
alerts table: its one migration history is here, applied by a job (the console only reads, with no DDL rights).

Every output record has an ``event_id`` computed from the rule, the key, the time and the events involved,
so a micro-batch that Spark runs again after a crash, a restarted job or a replay of history writes the same
ids: ``INSERT ... ON CONFLICT (event_id) DO UPDATE`` never duplicates a row. Indexes serve the queries a
dashboard makes: by rule, by key and by time (newest first).

The table lives in the URL's schema (``sparkcep``; ``?schema=NAME`` for another), its history is component
``alerts`` of the schema's ``sparkcep_migrations`` (:mod:`sparkcep.store.pg_schema`). ``occurred_at`` (the
complex event's time) and ``written_at`` (when a job last wrote the row) are ``timestamptz``, ``record`` is the
output record as ``jsonb``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from sparkcep.core.result_columns import KeyFields, key_text, text_or_none
from sparkcep.runfiles.outputs import Outputs, record_time
from sparkcep.store.pg_schema import (
    VERSION_TABLE,
    Component,
    EarlierLayout,
    Migration,
    installed,
    migrate,
    newer_than_code,
    timestamp_of,
)
from sparkcep.store.pg_url import connect, parse_url, refuse_password
from sparkcep.store.records import StoreError
from sparkcep.timeutil import parse_event_time

WHAT = "alert store"
TABLE = "sparkcep_alerts"
# Each migration is applied in one transaction; append, never edit a released one.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "alerts table and its indexes",
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
    ),
    Migration(
        "arrival numbers for the console's stream",
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
    ),
    Migration(
        "timestamptz times, jsonb records",
        (
            "ALTER TABLE sparkcep_alerts RENAME COLUMN occurred_at_ms TO occurred_at",
            # Epoch ms to a time with integer arithmetic (to_timestamp of a fraction rounds through a double). The
            # indexes on occurred_at follow the column. jsonb cannot hold a NUL character (json can): an escaped
            # NUL becomes U+FFFD, as write_batch does for new rows.
            r"""ALTER TABLE sparkcep_alerts
                ALTER COLUMN occurred_at TYPE TIMESTAMPTZ
                    USING to_timestamp(occurred_at / 1000) + (occurred_at % 1000) * interval '1 millisecond',
                ALTER COLUMN written_at TYPE TIMESTAMPTZ USING written_at::timestamptz,
                ALTER COLUMN record TYPE JSONB
                    USING regexp_replace(record::text, '(?<![\\])((?:\\\\)*)\\u0000', '\1\\ufffd', 'g')::jsonb""",
        ),
    ),
)
COMPONENT = Component(
    name="alerts",
    what=WHAT,
    tables=(TABLE,),  # its arrival sequence is owned by the table and moves with it
    migrations=MIGRATIONS,
    earlier=EarlierLayout(
        version_table="sparkcep_alert_schema", versions=2, retired=("sparkcep_console_alert_schema",)
    ),
)

# Characters PostgreSQL's text and jsonb cannot hold, and their escapes in a JSON text (a quick test first).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


class PostgresAlertStore:
    """Upserts output records of one job (or many) into ``sparkcep_alerts``; also answers dashboard queries."""

    def __init__(self, url: str) -> None:
        refuse_password(url, WHAT)
        self.url = url
        self.table = sql.Identifier(parse_url(url, WHAT).schema, TABLE)
        migrate(url, COMPONENT)  # jobs starting together migrate once

    def __repr__(self) -> str:
        return f"PostgresAlertStore({self.url!r})"

    @property
    def label(self) -> str:
        """``postgres:<schema>``: no host or user, which a metrics label would publish."""
        return f"postgres:{parse_url(self.url, WHAT).schema}"

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return connect(self.url, WHAT)

    def wants(self, name: str) -> bool:
        return not name.startswith("_")  # complex events only

    def write_batch(self, batch_id: int, outputs: Outputs, key_fields: KeyFields | None = None) -> int:
        """Upsert a batch's complex events (``_late``, ``_deadletter`` and ``_errors`` stay in files)."""
        rows = []
        for name, items in outputs.items():
            if name.startswith("_"):
                continue
            for at, payload in items:
                record = json.loads(payload)
                if _UNSTORABLE_ESCAPE.search(payload):
                    record = storable(record)
                rows.append((
                    str(record["event_id"]), name, text_or_none(record.get("rule_id")), key_text(record, key_fields),
                    timestamp_of(record_time(record, at)), Jsonb(record), batch_id,
                ))  # fmt: skip
        if not rows:
            return 0
        with self._connection() as conn, conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(
                sql.SQL(
                    "INSERT INTO {} (event_id, event_type, rule_id, key_text, occurred_at, record, batch_id, "
                    "written_at) VALUES (%s, %s, %s, %s, %s, %s, %s, now()) "
                    "ON CONFLICT (event_id) DO UPDATE SET record = excluded.record, batch_id = excluded.batch_id, "
                    "written_at = excluded.written_at"
                ).format(self.table),
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
        clauses: list[sql.Composable] = []
        params: list[object] = []
        for column, value in (("rule_id", rule_id), ("key_text", key), ("event_type", event_type)):
            if value is not None:
                clauses.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
                params.append(value)
        if since is not None:
            clauses.append(sql.SQL("occurred_at >= %s"))
            params.append(timestamp_of(parse_event_time(since)))
        if until is not None:
            clauses.append(sql.SQL("occurred_at < %s"))
            params.append(timestamp_of(parse_event_time(until)))
        query = sql.SQL("SELECT record FROM {} {} ORDER BY occurred_at DESC, event_id LIMIT %s").format(
            self.table, where(clauses)
        )
        with self._connection() as conn:
            rows = conn.execute(query, (*params, limit)).fetchall()
        return [decoded(row[0]) for row in rows]

    def count(self) -> int:
        with self._connection() as conn:
            row = conn.execute(sql.SQL("SELECT COUNT(*) FROM {}").format(self.table)).fetchone()
            return int(row[0]) if row else 0


def where(clauses: list[sql.Composable]) -> sql.Composable:
    """``WHERE a AND b`` of fixed clauses (values are parameters), or nothing."""
    return sql.SQL("WHERE {}").format(sql.SQL(" AND ").join(clauses)) if clauses else sql.SQL("")


def decoded(value: Any) -> dict[str, Any]:
    """A ``record`` as psycopg gives it (decoded from jsonb; text only from a json column)."""
    record = value if isinstance(value, dict) else json.loads(value)
    assert isinstance(record, dict)
    return record


def storable(value: Any) -> Any:
    """``value`` with every NUL character and unpaired surrogate (an input event may carry them in a key or an
    id; PostgreSQL's text and jsonb cannot hold them) replaced by U+FFFD; files and Kafka keep them."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(name): storable(item) for name, item in value.items()}
    if isinstance(value, list):
        return [storable(item) for item in value]
    return value


def check_schema(conn: psycopg.Connection[Any], url: str) -> None:
    """For a reader (the console), which never migrates: the table exists with this version's schema."""
    target = parse_url(url, WHAT)
    found = installed(conn, target, COMPONENT)
    if found.version > COMPONENT.latest:
        raise newer_than_code(target, COMPONENT, found.version, f"{target.schema}.{VERSION_TABLE}")
    if found.version == COMPONENT.latest:
        return
    expected = f"expected version {COMPONENT.latest} in schema {target.schema!r}, which a job creates"
    if found.version:
        state = f"has alerts schema version {found.version}"
    elif found.earlier_schema is not None:
        state = f"holds alerts in an earlier sparkcep's layout ({found.earlier_schema}.{TABLE})"
        expected = f"expected version {COMPONENT.latest} in schema {target.schema!r}, to which a job moves them"
    else:
        state = "has no alerts table yet" + _elsewhere(conn, target.schema)
    raise StoreError(
        f"alert store {url} {state}; {expected}: run `sparkcep run --alert-store {url}` (or a pipeline with "
        "sinks.postgres) once, then the console"
    )


def _elsewhere(conn: psycopg.Connection[Any], schema: str) -> str:
    """Where else the database has an alerts table (a URL without the job's ?schema= is an easy mistake)."""
    rows = conn.execute(
        "SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relname = %s AND n.nspname <> %s ORDER BY n.nspname",
        (TABLE, schema),
    ).fetchall()
    names = [str(row[0]) for row in rows]
    hint = f"?schema={quote(names[0], safe='')}" if names else ""
    return f" in schema {schema!r} (schema {names[0]!r} has one: add {hint} to the URL)" if names else ""


def open_alert_sinks(specs: Iterable[str]) -> list[PostgresAlertStore]:
    """Alert stores from URLs (only PostgreSQL for now)."""
    sinks = []
    for spec in specs:
        scheme = spec.partition(":")[0]
        if scheme not in ("postgres", "postgresql"):
            raise StoreError(f"alert store: expected 'postgresql://user@host:port/db', got {spec!r}")
        sinks.append(PostgresAlertStore(spec))
    return sinks
