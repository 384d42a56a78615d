"""A rule store in PostgreSQL (psycopg 3): the production backend, same log and rules as the SQLite store.

Writers serialize on a transaction-scoped advisory lock, then read the log and insert the next versions in the
same transaction, so two clients editing one rule cannot both compute the same version (the unique index on
``(rule_id, version)`` is the backstop); readers never wait. Tables are created and upgraded by numbered
migrations recorded in ``sparkcep_schema_version``.

The spec is a libpq URL, ``postgresql://user@host:port/dbname``. Passwords never go in the URL (it ends up
in shell history, logs and rule-store listings): libpq takes them from ``PGPASSWORD`` or ``~/.pgpass``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sparkcep.rules.model import InputSpec
from sparkcep.store.base import RuleStore
from sparkcep.store.records import Change, Snapshot, StoredVersion, StoreError, decoded_rule, now_iso

if TYPE_CHECKING:
    import psycopg

# Each migration is applied in one transaction; append, never edit a released one.
MIGRATIONS: list[tuple[str, ...]] = [
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

_COLUMNS = "seq, rule_id, version, effective_from_ms, state, rule_json, recorded_at, author"
# Any fixed number: all sparkcep writers of one database take the same transaction-scoped lock.
_WRITER_LOCK = 0x5350_4B43_4550  # "SPKCEP"


def redacted(url: str) -> str:
    """The URL as it may be shown: without any password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ":***@"
    port = f":{parts.port}" if parts.port else ""
    return parts._replace(netloc=f"{user}{host}{port}").geturl()


def refuse_password(url: str, what: str) -> None:
    """Passwords never go in a URL (shell history, logs, listings): libpq reads PGPASSWORD or ~/.pgpass."""
    if urlsplit(url).password is not None:
        raise StoreError(f"{what} {redacted(url)}: put the password in PGPASSWORD (or ~/.pgpass), not in the URL")


@contextmanager
def connect(url: str, what: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose driver errors become StoreError naming ``what`` (e.g. "rule store") and the URL."""
    import psycopg  # only stores that use PostgreSQL need the driver

    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            yield conn
    except psycopg.Error as exc:
        raise StoreError(f"{what} {url}: {type(exc).__name__}: {exc}".strip()) from exc


def applied_version(conn: psycopg.Connection[Any], version_table: str) -> int:
    row = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {version_table}").fetchone()  # noqa: S608  # fixed names
    return int(row[0]) if row else 0


def apply_migrations(
    conn: psycopg.Connection[Any], what: str, version_table: str, migrations: list[tuple[str, ...]]
) -> None:
    """Inside the caller's locked transaction: the numbered migrations not applied yet, each recorded."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER PRIMARY KEY, applied_at TEXT)")
    applied = applied_version(conn, version_table)
    if applied > len(migrations):
        raise StoreError(
            f"{what} has schema version {applied}; this sparkcep knows up to {len(migrations)} (upgrade sparkcep)"
        )
    for number in range(applied + 1, len(migrations) + 1):
        for statement in migrations[number - 1]:
            conn.execute(statement)  # fixed text, not user input
        conn.execute(f"INSERT INTO {version_table} (version, applied_at) VALUES (%s, %s)", (number, now_iso()))  # noqa: S608


class PostgresStore(RuleStore):
    """Rule versions in PostgreSQL tables; safe for any number of jobs and editing clients."""

    def __init__(self, url: str) -> None:
        refuse_password(url, "rule store")
        self.url = url
        self._migrate()

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return connect(self.url, "rule store")

    @contextmanager
    def _locked(self) -> Iterator[psycopg.Connection[Any]]:
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITER_LOCK,))
            yield conn

    def _migrate(self) -> None:
        with self._locked() as conn:
            apply_migrations(conn, f"rule store {self.url}", "sparkcep_schema_version", MIGRATIONS)

    def schema_version(self) -> int:
        with self._connection() as conn:
            return applied_version(conn, "sparkcep_schema_version")

    # -- reading

    def head(self) -> int:
        with self._connection() as conn:
            row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM sparkcep_rule_versions").fetchone()
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
        row = conn.execute("SELECT value FROM sparkcep_store_settings WHERE name = 'input'").fetchone()
        spec = InputSpec() if row is None else InputSpec.model_validate(row[0])
        return Snapshot(spec, tuple(self._versions(conn, 0)))

    @staticmethod
    def _versions(conn: psycopg.Connection[Any], since_seq: int) -> list[StoredVersion]:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM sparkcep_rule_versions WHERE seq > %s ORDER BY seq",  # noqa: S608
            (since_seq,),
        ).fetchall()
        return [_version(row) for row in rows]

    # -- writing

    def _transaction(self, planner: Callable[[Snapshot], Change]) -> Change:
        from psycopg.types.json import Json

        with self._locked() as conn:
            change = planner(self._read(conn))
            with conn.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO sparkcep_rule_versions ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",  # noqa: S608
                    [_row(v, Json) for v in change.new_versions],
                )
                cursor.executemany(
                    "UPDATE sparkcep_rule_versions SET effective_from_ms = %s "
                    "WHERE rule_id = %s AND version = %s AND effective_from_ms IS NULL",
                    [(ms, rule_id, version) for rule_id, version, ms in change.assignments],
                )
            if change.input is not None:
                conn.execute(
                    "INSERT INTO sparkcep_store_settings (name, value) VALUES ('input', %s) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (Json(change.input.model_dump(mode="json")),),
                )
        return change


def _row(version: StoredVersion, jsonb: Callable[[Any], Any]) -> tuple[Any, ...]:
    # The column is authoritative for effective_from; the key stays, as null, so the rule keeps its field order
    # (JSON, not JSONB, keeps the text as written).
    rule = {k: (None if k == "effective_from" else v) for k, v in version.rule.items()}
    return (
        version.seq,
        version.rule_id,
        version.version,
        version.effective_from_ms,
        version.state,
        jsonb(rule),
        version.recorded_at,
        version.author,
    )


def _version(row: tuple[Any, ...]) -> StoredVersion:
    seq, rule_id, version, effective_from_ms, _state, rule, recorded_at, author = row
    return StoredVersion.create(seq, decoded_rule(rule, rule_id), effective_from_ms, recorded_at, author, version)
