"""A rule store in SQLite (stdlib ``sqlite3``): WAL mode, numbered migrations, serialized writers.

Writers take the database write lock first (``BEGIN IMMEDIATE``), then read the log and insert the next
versions, so two clients editing the same rule cannot both compute the same version; the unique index on
``(rule_id, version)`` is the backstop. Readers in WAL mode never wait for a writer, which keeps the job's
per-batch :meth:`head` poll cheap. The SQL sticks to what PostgreSQL also accepts (``seq`` is assigned by the
store, not by an autoincrement, and upserts use ``ON CONFLICT``) so a PostgreSQL store can reuse it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from sparkcep.rules.model import InputSpec
from sparkcep.store.base import RuleStore
from sparkcep.store.records import Change, Snapshot, StoredVersion, StoreError, decoded_rule, now_iso

# Each migration is a list of statements applied in one transaction; append, never edit a released one.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        """CREATE TABLE rule_versions (
            seq BIGINT PRIMARY KEY,
            rule_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            effective_from_ms BIGINT,
            state TEXT NOT NULL,
            rule_json TEXT NOT NULL,
            recorded_at TEXT NOT NULL,
            author TEXT
        )""",
        "CREATE UNIQUE INDEX rule_versions_rule_version ON rule_versions (rule_id, version)",
        "CREATE TABLE store_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ),
]

_COLUMNS = "seq, rule_id, version, effective_from_ms, state, rule_json, recorded_at, author"
_BUSY_TIMEOUT_S = 30.0  # a writer waits this long for another writer's transaction before giving up


class SqliteStore(RuleStore):
    """Rule versions in one SQLite database file; safe for several processes and threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._migrate()

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # A connection per operation: sqlite3 connections must not cross threads, and opening one is cheap
    # next to a micro-batch. SQLite's own errors (a locked or corrupt file) become StoreError.
    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        try:
            with closing(sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)) as conn:
                yield conn
        except sqlite3.Error as exc:
            raise StoreError(f"rule store {self.path}: {exc}") from exc

    @contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _migrate(self) -> None:
        with self._connection() as conn:
            # Persistent per database file; must be set outside a transaction.
            conn.execute("PRAGMA journal_mode=WAL")
        with self._locked() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
            applied = self._applied(conn)
            if applied > len(MIGRATIONS):
                raise StoreError(
                    f"rule store {self.path} has schema version {applied}; this sparkcep knows up to "
                    f"{len(MIGRATIONS)} (upgrade sparkcep)"
                )
            for number in range(applied + 1, len(MIGRATIONS) + 1):
                for statement in MIGRATIONS[number - 1]:
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", (number, now_iso()))

    @staticmethod
    def _applied(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
        return int(row[0])

    def schema_version(self) -> int:
        """The number of migrations applied to this database."""
        with self._connection() as conn:
            return self._applied(conn)

    # -- reading -----------------------------------------------------------------------------------

    def head(self) -> int:
        with self._connection() as conn:
            return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM rule_versions").fetchone()[0])

    def log(self, since_seq: int = 0) -> list[StoredVersion]:
        with self._connection() as conn:
            return self._versions(conn, since_seq)

    def _snapshot(self) -> Snapshot:
        with self._connection() as conn:
            conn.execute("BEGIN")  # one read transaction: the spec and the log from the same moment
            try:
                return self._read(conn)
            finally:
                conn.execute("COMMIT")

    def _read(self, conn: sqlite3.Connection) -> Snapshot:
        row = conn.execute("SELECT value FROM store_settings WHERE name = 'input'").fetchone()
        spec = InputSpec() if row is None else InputSpec.model_validate(json.loads(row[0]))
        return Snapshot(spec, tuple(self._versions(conn, 0)))

    @staticmethod
    def _versions(conn: sqlite3.Connection, since_seq: int) -> list[StoredVersion]:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM rule_versions WHERE seq > ? ORDER BY seq", (since_seq,))  # noqa: S608
        return [_version(row) for row in rows]

    # -- writing -----------------------------------------------------------------------------------

    def _transaction(self, planner: Callable[[Snapshot], Change]) -> Change:
        with self._locked() as conn:
            change = planner(self._read(conn))
            conn.executemany(
                f"INSERT INTO rule_versions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                [_row(v) for v in change.new_versions],
            )
            conn.executemany(
                "UPDATE rule_versions SET effective_from_ms = ? "
                "WHERE rule_id = ? AND version = ? AND effective_from_ms IS NULL",
                [(ms, rule_id, version) for rule_id, version, ms in change.assignments],
            )
            if change.input is not None:
                conn.execute(
                    "INSERT INTO store_settings (name, value) VALUES ('input', ?) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (json.dumps(change.input.model_dump(mode="json")),),
                )
        return change


def _row(version: StoredVersion) -> tuple[Any, ...]:
    # The column is authoritative for effective_from (the JSON copy would go stale when the job assigns it);
    # the key stays, as null, so reading the rule back keeps its field order.
    rule = {k: (None if k == "effective_from" else v) for k, v in version.rule.items()}
    return (
        version.seq,
        version.rule_id,
        version.version,
        version.effective_from_ms,
        version.state,
        json.dumps(rule),
        version.recorded_at,
        version.author,
    )


def _version(row: tuple[Any, ...]) -> StoredVersion:
    seq, rule_id, version, effective_from_ms, _state, rule_json, recorded_at, author = row
    return StoredVersion.create(seq, decoded_rule(rule_json, rule_id), effective_from_ms, recorded_at, author, version)
