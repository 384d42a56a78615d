"""A rule store in PostgreSQL (psycopg 3): the production backend, same log and rules as the SQLite store.

Writers serialize on a transaction-scoped advisory lock, then read the log and insert the next versions in the
same transaction, so two clients editing one rule cannot both compute the same version (the unique index on
``(rule_id, version)`` is the backstop); readers never wait.

The tables, ``sparkcep_rule_versions`` and ``sparkcep_store_settings``, live in the URL's schema (``sparkcep``;
``?schema=NAME`` for another) and are created and upgraded by the numbered migrations below, recorded as
component ``rules`` in the schema's ``sparkcep_migrations`` (:mod:`sparkcep.store.pg_schema`). Times are
``timestamptz``: ``effective_from`` (the event time a version took effect; null while the job has not given it
one) and ``recorded_at`` (the wall clock of the write). Definitions are ``jsonb``.

The spec is a libpq URL, ``postgresql://user@host:port/dbname``. Passwords never go in the URL (it ends up
in shell history, logs and rule-store listings): libpq takes them from ``PGPASSWORD`` or ``~/.pgpass``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import ValidationError

from sparkcep.rules.model import InputSpec
from sparkcep.rules.registry import find_rule_type
from sparkcep.store.base import RuleStore
from sparkcep.store.pg_schema import (
    Component,
    EarlierLayout,
    Migration,
    migrate,
    ms_of,
    recorded_version,
    timestamp_of,
)
from sparkcep.store.pg_url import connect, parse_url, refuse_password
from sparkcep.store.records import Change, Snapshot, StoredVersion, StoreError, decoded_rule
from sparkcep.timeutil import format_iso, parse_event_time

# Each migration is applied in one transaction; append, never edit a released one.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "rule versions and store settings",
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
    ),
    Migration(
        "timestamptz times, jsonb definitions",
        (
            "ALTER TABLE sparkcep_rule_versions RENAME COLUMN effective_from_ms TO effective_from",
            # Epoch ms to a time with integer arithmetic (to_timestamp of a fraction rounds through a double).
            # jsonb cannot hold a NUL character (json can): an escaped NUL becomes U+FFFD.
            r"""ALTER TABLE sparkcep_rule_versions
                ALTER COLUMN effective_from TYPE TIMESTAMPTZ
                    USING to_timestamp(effective_from / 1000) + (effective_from % 1000) * interval '1 millisecond',
                ALTER COLUMN recorded_at TYPE TIMESTAMPTZ USING recorded_at::timestamptz,
                ALTER COLUMN rule_json TYPE JSONB
                    USING regexp_replace(rule_json::text, '(?<![\\])((?:\\\\)*)\\u0000', '\1\\ufffd', 'g')::jsonb""",
            r"""ALTER TABLE sparkcep_store_settings ALTER COLUMN value TYPE JSONB
                USING regexp_replace(value::text, '(?<![\\])((?:\\\\)*)\\u0000', '\1\\ufffd', 'g')::jsonb""",
        ),
    ),
)
COMPONENT = Component(
    name="rules",
    what="rule store",
    tables=("sparkcep_rule_versions", "sparkcep_store_settings"),
    migrations=MIGRATIONS,
    earlier=EarlierLayout(version_table="sparkcep_schema_version", versions=1),
)

_COLUMNS = ("seq", "rule_id", "version", "effective_from", "state", "rule_json", "recorded_at", "author")
# Any fixed number: all sparkcep writers of one database take the same transaction-scoped lock.
_WRITER_LOCK = 0x5350_4B43_4550  # "SPKCEP"


class PostgresStore(RuleStore):
    """Rule versions in PostgreSQL tables; safe for any number of jobs and editing clients."""

    def __init__(self, url: str) -> None:
        refuse_password(url, "rule store")
        self.url = url
        self.schema = parse_url(url, "rule store").schema
        migrate(url, COMPONENT)

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return connect(self.url, "rule store")

    def _table(self, name: str) -> sql.Identifier:
        return sql.Identifier(self.schema, name)

    @contextmanager
    def _locked(self) -> Iterator[psycopg.Connection[Any]]:
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITER_LOCK,))
            yield conn

    def schema_version(self) -> int:
        with self._connection() as conn:
            return recorded_version(conn, self.schema, COMPONENT.name)

    # -- reading

    def head(self) -> int:
        with self._connection() as conn:
            query = sql.SQL("SELECT COALESCE(MAX(seq), 0) FROM {}").format(self._table("sparkcep_rule_versions"))
            row = conn.execute(query).fetchone()
            return int(row[0]) if row else 0

    def log(self, since_seq: int = 0) -> list[StoredVersion]:
        with self._connection() as conn:
            return self._versions(conn, since_seq)

    def _snapshot(self) -> Snapshot:
        # REPEATABLE READ: the input spec and the log from the same moment.
        with self._connection() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            try:
                return self._read(conn)
            finally:
                conn.execute("COMMIT")

    def _read(self, conn: psycopg.Connection[Any]) -> Snapshot:
        query = sql.SQL("SELECT value FROM {} WHERE name = 'input'").format(self._table("sparkcep_store_settings"))
        row = conn.execute(query).fetchone()
        spec = InputSpec() if row is None else InputSpec.model_validate(row[0])
        return Snapshot(spec, tuple(self._versions(conn, 0)))

    def _versions(self, conn: psycopg.Connection[Any], since_seq: int) -> list[StoredVersion]:
        query = sql.SQL("SELECT {} FROM {} WHERE seq > %s ORDER BY seq").format(
            sql.SQL(", ").join(map(sql.Identifier, _COLUMNS)), self._table("sparkcep_rule_versions")
        )
        return [_version(row) for row in conn.execute(query, (since_seq,)).fetchall()]

    # -- writing

    def _transaction(self, planner: Callable[[Snapshot], Change]) -> Change:
        versions = self._table("sparkcep_rule_versions")
        with self._locked() as conn:
            change = planner(self._read(conn))
            with conn.cursor() as cursor:
                cursor.executemany(
                    sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                        versions,
                        sql.SQL(", ").join(map(sql.Identifier, _COLUMNS)),
                        sql.SQL(", ").join(sql.Placeholder() * len(_COLUMNS)),
                    ),
                    [_row(v) for v in change.new_versions],
                )
                cursor.executemany(
                    sql.SQL(
                        "UPDATE {} SET effective_from = %s WHERE rule_id = %s AND version = %s "
                        "AND effective_from IS NULL"
                    ).format(versions),
                    [(timestamp_of(ms), rule_id, version) for rule_id, version, ms in change.assignments],
                )
            if change.input is not None:
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (name, value) VALUES ('input', %s) "
                        "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
                    ).format(self._table("sparkcep_store_settings")),
                    (Jsonb(change.input.model_dump(mode="json")),),
                )
        return change


def _row(version: StoredVersion) -> tuple[Any, ...]:
    # The column is authoritative for effective_from; the key stays, as null, so the definition keeps its fields.
    rule = {k: (None if k == "effective_from" else v) for k, v in version.rule.items()}
    return (
        version.seq,
        version.rule_id,
        version.version,
        None if version.effective_from_ms is None else timestamp_of(version.effective_from_ms),
        version.state,
        Jsonb(rule),
        _recorded_time(version.recorded_at),
        version.author,
    )


def _version(row: tuple[Any, ...]) -> StoredVersion:
    seq, rule_id, version, effective_from, _state, rule, recorded_at, author = row
    effective_from_ms = None if effective_from is None else ms_of(effective_from)
    # psycopg gives jsonb decoded: an object is the definition, anything else is kept as its JSON text.
    decoded = decoded_rule(rule if isinstance(rule, dict) else json.dumps(rule), rule_id)
    return StoredVersion.create(
        seq, in_written_order(decoded), effective_from_ms, format_iso(ms_of(recorded_at)), author, version
    )


def _recorded_time(text: str) -> datetime:
    try:
        return timestamp_of(parse_event_time(text))
    except ValueError as exc:  # recorded_at is the store's own now_iso(): anything else is a bug
        raise StoreError(f"rule store: recorded_at {text!r} is not an ISO-8601 time") from exc


def in_written_order(rule: dict[str, Any]) -> dict[str, Any]:
    """The definition with its fields in the order sparkcep writes them (its model's, as in a SQLite store or an
    export): jsonb keeps an object's members in an order of its own (shorter names first). A definition its model
    does not accept keeps jsonb's order."""
    rule_type = find_rule_type(rule.get("type"))
    if rule_type is None:
        return rule
    try:
        model = rule_type.model.model_validate({**rule, "effective_from": 0})
    except (ValidationError, ValueError, TypeError):
        return rule
    ordered = _ordered_like(rule, model.model_dump(mode="json", by_alias=True))
    assert isinstance(ordered, dict)
    return ordered


def _ordered_like(value: Any, template: Any) -> Any:
    if isinstance(value, dict) and isinstance(template, dict):
        names = [name for name in template if name in value] + [name for name in value if name not in template]
        return {name: _ordered_like(value[name], template.get(name)) for name in names}
    if isinstance(value, list) and isinstance(template, list) and len(value) == len(template):
        return [_ordered_like(item, shape) for item, shape in zip(value, template, strict=True)]
    return value
