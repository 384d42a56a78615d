"""sparkcep's tables in PostgreSQL: one schema, one version table, numbered migrations per component.

- **Schema**: every sparkcep table of a database lives in one PostgreSQL schema, ``sparkcep`` unless the URL
  names another (``?schema=NAME``, see :mod:`sparkcep.store.pg_url`). Names are always quoted
  (``psycopg.sql.Identifier``), never formatted into SQL text.
- **Version table**: ``<schema>.sparkcep_migrations`` records every applied migration of every component (the rule
  store's tables are component ``rules``, the alert store's ``alerts``). Components keep their own numbering, so
  a job with only an alert store creates no rule tables, and each store upgrades its own tables.
- **Migrations** are appended, never edited once released. Each runs in a transaction of its own holding an
  advisory lock that every sparkcep migrator of the database takes, and reads the version again under it: two
  processes starting together apply each migration once. A database whose version is newer than the code is
  refused before anything changes.
- **Earlier layout**: before this module, a component's tables lived wherever the connection's search path put
  them (``public``), counted in a version table of their own (``sparkcep_schema_version`` for the rules,
  ``sparkcep_alert_schema`` for the alerts, ``sparkcep_console_alert_schema`` of earlier consoles). The first
  migrator of such a database records that history in ``sparkcep_migrations``, moves the tables into the schema
  (``ALTER TABLE ... SET SCHEMA`` keeps rows, indexes and owned sequences) and drops the old version tables, in
  one transaction; the migrations that follow convert the columns in place.
- **Readers** (the console) never create or migrate: :func:`installed` tells what is there with no more rights
  than ``USAGE`` on the schema and ``SELECT`` on its tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from sparkcep.store.pg_url import PgUrl, connect, parse_url
from sparkcep.store.records import StoreError

VERSION_TABLE = "sparkcep_migrations"
# Any fixed number: every sparkcep migrator of one database, of any component, takes the same lock.
_MIGRATION_LOCK = 0x5350_4B4D_4947  # "SPKMIG"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Migration:
    """One step of a component's history. The statements run with the search path set to the schema alone, so
    their text names tables unqualified."""

    description: str
    statements: tuple[str, ...]


@dataclass(frozen=True)
class EarlierLayout:
    """A component's tables as sparkcep kept them before the shared version table."""

    version_table: str  # where that layout counted its migrations (the component's first ones)
    versions: int  # how many it knew
    retired: tuple[str, ...] = ()  # other version tables of that layout, dropped with it


@dataclass(frozen=True)
class Component:
    """A set of tables with one migration history."""

    name: str  # its key in the version table
    what: str  # how messages name its store ("rule store")
    tables: tuple[str, ...]  # moved from the earlier layout (their indexes and owned sequences go along)
    migrations: tuple[Migration, ...]
    earlier: EarlierLayout | None = None

    @property
    def latest(self) -> int:
        return len(self.migrations)


@dataclass(frozen=True)
class Installed:
    """What a reader finds in a database: the component's version (0: none) and, when its tables are still in
    the earlier layout, the schema holding them."""

    version: int
    earlier_schema: str | None


def timestamp_of(ms: int) -> datetime:
    """Epoch milliseconds as the value of a ``timestamptz`` column (exact: integer arithmetic)."""
    return _EPOCH + ms * _MS


def ms_of(value: datetime) -> int:
    """A ``timestamptz`` column's value as epoch milliseconds (exact for values written from milliseconds)."""
    return (value - _EPOCH) // _MS


def migrate(url: str, component: Component) -> None:
    """Bring ``component``'s tables in the URL's schema to this code's newest version (creating schema and
    tables on first use, taking over the earlier layout). A database already up to date needs no DDL rights."""
    target = parse_url(url, component.what)
    with connect(url, component.what) as conn:
        while True:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                applied = _prepare(conn, target, component)
                if applied == component.latest:
                    return
                _apply(conn, target, component, applied + 1)


def recorded_version(conn: psycopg.Connection[Any], schema: str, component: str) -> int:
    """The component's version in the schema's version table; 0 when the table or its rows are not there."""
    if not _exists(conn, schema, VERSION_TABLE):
        return 0
    query = sql.SQL("SELECT COALESCE(MAX(version), 0) FROM {} WHERE component = %s").format(
        sql.Identifier(schema, VERSION_TABLE)
    )
    row = conn.execute(query, (component,)).fetchone()
    return int(row[0]) if row else 0


def installed(conn: psycopg.Connection[Any], target: PgUrl, component: Component) -> Installed:
    """For a reader, which never changes anything: the version found and where an earlier layout lies."""
    earlier = _earlier_schema(conn, component)
    if not _schema_exists(conn, target.schema):
        return Installed(0, earlier)
    allowed = conn.execute("SELECT has_schema_privilege(%s, 'USAGE')", (target.schema,)).fetchone()
    if not (allowed and allowed[0]):
        raise _no_read_rights(conn, target, component)
    try:
        return Installed(recorded_version(conn, target.schema, component.name), earlier)
    except psycopg.errors.InsufficientPrivilege:
        conn.rollback()  # the failed statement ended the transaction: the message reads the role afterwards
        raise _no_read_rights(conn, target, component) from None


def newer_than_code(target: PgUrl, component: Component, found: int, where: str) -> StoreError:
    return StoreError(
        f"{component.what} {target.url}: its {component.name} tables are at version {found} ({where}), this "
        f"sparkcep knows up to version {component.latest}: upgrade sparkcep (pip install -U sparkcep) to the "
        "release that wrote them or a later one"
    )


# -- inside the migrator's locked transaction ---------------------------------------------------------------


def _prepare(conn: psycopg.Connection[Any], target: PgUrl, component: Component) -> int:
    """Schema and version table in place, the earlier layout taken over: the version now applied."""
    if not _schema_exists(conn, target.schema):
        _create_schema(conn, target, component)
    versions = sql.Identifier(target.schema, VERSION_TABLE)
    if not _exists(conn, target.schema, VERSION_TABLE):
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (component TEXT NOT NULL, version INTEGER NOT NULL, description TEXT NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (component, version))"
            ).format(versions)
        )
    applied = recorded_version(conn, target.schema, component.name)
    earlier = _earlier_schema(conn, component)
    if earlier is not None:
        if applied:
            raise _both_layouts(target, component, earlier)
        applied = _adopt(conn, target, component, earlier)
    if applied > component.latest:
        raise newer_than_code(target, component, applied, f"{target.schema}.{VERSION_TABLE}")
    return applied


def _adopt(conn: psycopg.Connection[Any], target: PgUrl, component: Component, old_schema: str) -> int:
    """Take over the earlier layout: its history into the version table, its tables into the schema."""
    assert component.earlier is not None
    old_versions = sql.Identifier(old_schema, component.earlier.version_table)
    rows = conn.execute(sql.SQL("SELECT version, applied_at FROM {} ORDER BY version").format(old_versions)).fetchall()
    found = max((int(version) for version, _ in rows), default=0)
    if found > component.earlier.versions:
        raise newer_than_code(target, component, found, f"{old_schema}.{component.earlier.version_table}")
    insert = sql.SQL(
        "INSERT INTO {} (component, version, description, applied_at) VALUES (%s, %s, %s, COALESCE(%s, now()))"
    ).format(sql.Identifier(target.schema, VERSION_TABLE))
    for version, applied_at in rows:
        description = f"{component.migrations[int(version) - 1].description} (taken over from {old_schema})"
        conn.execute(insert, (component.name, int(version), description, _time_or_none(applied_at)))
    if old_schema != target.schema:
        for name in component.tables:
            if not _exists(conn, old_schema, name):
                continue
            if _exists(conn, target.schema, name):
                raise _both_layouts(target, component, old_schema)
            conn.execute(
                sql.SQL("ALTER TABLE {} SET SCHEMA {}").format(
                    sql.Identifier(old_schema, name), sql.Identifier(target.schema)
                )
            )
    conn.execute(sql.SQL("DROP TABLE {}").format(old_versions))
    for name in component.earlier.retired:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(old_schema, name)))
    return found


def _apply(conn: psycopg.Connection[Any], target: PgUrl, component: Component, number: int) -> None:
    migration = component.migrations[number - 1]
    conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(target.schema)))
    try:
        for statement in migration.statements:
            conn.execute(statement)  # fixed text of this module's callers, never user input
    except psycopg.Error as exc:
        raise StoreError(
            f"{component.what} {target.url}: migration {component.name} {number} ({migration.description}) failed "
            f"and was rolled back, the tables are as before: {type(exc).__name__}: {exc}"
        ) from exc
    conn.execute(
        sql.SQL("INSERT INTO {} (component, version, description) VALUES (%s, %s, %s)").format(
            sql.Identifier(target.schema, VERSION_TABLE)
        ),
        (component.name, number, migration.description),
    )


def _create_schema(conn: psycopg.Connection[Any], target: PgUrl, component: Component) -> None:
    # CREATE SCHEMA IF NOT EXISTS wants the CREATE right even when the schema exists: only create a missing one.
    try:
        with conn.transaction():  # a savepoint: the refusal below leaves the outer transaction usable
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(target.schema)))
    except psycopg.errors.InsufficientPrivilege as exc:
        quoted = sql.Identifier(target.schema).as_string(conn)
        raise StoreError(
            f"{component.what} {target.url}: schema {target.schema!r} does not exist and this role may not create "
            f"it ({exc}): create it once as the database owner (CREATE SCHEMA {quoted} AUTHORIZATION "
            f"<this role>) or name an existing schema with ?schema=NAME"
        ) from exc


# -- catalog reads (no rights needed beyond connecting) ------------------------------------------------------


def _schema_exists(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s)", (schema,)).fetchone()
    return bool(row and row[0])


def _exists(conn: psycopg.Connection[Any], schema: str, name: str) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s)",
        (schema, name),
    ).fetchone()
    return bool(row and row[0])


def _earlier_schema(conn: psycopg.Connection[Any], component: Component) -> str | None:
    """The schema holding the component's earlier version table, found the way the earlier code named it
    (unqualified: the connection's search path, ``public`` unless configured otherwise)."""
    if component.earlier is None:
        return None
    row = conn.execute(
        "SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.oid = to_regclass(%s)",
        (component.earlier.version_table,),
    ).fetchone()
    return str(row[0]) if row else None


# -- messages ----------------------------------------------------------------------------------------------


def _both_layouts(target: PgUrl, component: Component, old_schema: str) -> StoreError:
    assert component.earlier is not None
    return StoreError(
        f"{component.what} {target.url}: {component.name} tables of an earlier sparkcep are in {old_schema} "
        f"({old_schema}.{component.earlier.version_table}) while schema {target.schema!r} has this version's: an "
        f"older sparkcep still writes to {old_schema}; stop it, keep what you need of its tables and drop "
        f"{old_schema}.{component.earlier.version_table}"
    )


def _no_read_rights(conn: psycopg.Connection[Any], target: PgUrl, component: Component) -> StoreError:
    quoted = sql.Identifier(target.schema).as_string(conn)
    row = conn.execute("SELECT current_user").fetchone()
    role = sql.Identifier(str(row[0]) if row else "this_role").as_string(conn)
    return StoreError(
        f"{component.what} {target.url}: role {role} may not read schema {target.schema!r}: as its owner run "
        f"GRANT USAGE ON SCHEMA {quoted} TO {role}; GRANT SELECT ON ALL TABLES IN SCHEMA {quoted} TO {role}"
    )


def _time_or_none(text: object) -> datetime | None:
    """An earlier version table's ``applied_at`` (ISO-8601 text) as a time; None when it is not one."""
    if isinstance(text, datetime):
        return text
    try:
        value = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
