"""PostgreSQL URLs as sparkcep takes them: ``postgresql://user@host:port/db[?schema=NAME&libpq parameters]``.

``schema`` is sparkcep's own parameter: the PostgreSQL schema (namespace) that holds every sparkcep table of
that database, ``sparkcep`` when not given. libpq refuses query parameters it does not know, so the parameter
is taken out before the URL reaches the driver; every other parameter (``sslmode=require``, ...) goes through
as written. Passwords never go in the URL (it ends up in shell history, logs and store listings): libpq takes
them from ``PGPASSWORD`` or ``~/.pgpass``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from sparkcep.store.records import StoreError

if TYPE_CHECKING:
    import psycopg

DEFAULT_SCHEMA = "sparkcep"
SCHEMA_PARAMETER = "schema"
_MAX_NAME_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1: longer names are cut silently, two could become one
CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class PgUrl:
    """A PostgreSQL URL taken apart: ``url`` as the user gave it (shown in messages), ``conninfo`` for libpq,
    ``schema`` for sparkcep's tables."""

    url: str
    conninfo: str
    schema: str


def parse_url(url: str, what: str) -> PgUrl:
    """``url`` with sparkcep's ``schema`` parameter taken out and checked; ``what`` names the URL in errors."""
    base, question, query = url.partition("?")
    kept: list[str] = []
    schemas: list[str] = []
    for item in query.split("&") if question else []:
        name, _, value = item.partition("=")
        if unquote(name) == SCHEMA_PARAMETER:
            schemas.append(unquote(value))
        elif item:
            kept.append(item)
    if len(schemas) > 1:
        raise StoreError(f"{what} {redacted(url)}: schema= is given {len(schemas)} times; expected it once")
    schema = schemas[0] if schemas else DEFAULT_SCHEMA
    problem = schema_name_problem(schema)
    if problem is not None:
        raise StoreError(f"{what} {redacted(url)}: schema={schema!r} {problem}")
    conninfo = f"{base}?{'&'.join(kept)}" if kept else base
    return PgUrl(url=url, conninfo=conninfo, schema=schema)


def schema_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a schema of sparkcep's tables, or None. Any other text is fine: names are always
    quoted (``psycopg.sql.Identifier``), so they are used exactly as written, upper case included."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= _MAX_NAME_BYTES or "\x00" in name:
        return f"is not a schema name: expected 1 to {_MAX_NAME_BYTES} bytes without NUL (e.g. ?schema=sparkcep)"
    if name.lower().startswith("pg_"):
        return "is reserved: PostgreSQL keeps names starting with pg_ for its own schemas (e.g. ?schema=sparkcep)"
    return None


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

    conninfo = parse_url(url, what).conninfo
    try:
        with psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            yield conn
    except psycopg.Error as exc:
        raise StoreError(driver_error_text(what, url, exc, f"{CONNECT_TIMEOUT_S}s")) from exc


def driver_error_text(what: str, url: str, exc: Exception, wait: str) -> str:
    """The text of a StoreError around a driver error: ``what``, the URL and the driver's words, which
    :mod:`sparkcep.diagnose` reads to tell a refused login, an unreachable server and a timeout apart. psycopg's
    own timeout names no server and no wait ("connection timeout expired"): ``wait`` says how long it was."""
    import psycopg

    waited = f"no answer within {wait}: " if isinstance(exc, psycopg.errors.ConnectionTimeout) else ""
    return f"{what} {url}: {waited}{type(exc).__name__}: {exc}".strip()
