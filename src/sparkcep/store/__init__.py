"""Rule stores: the durable, ordered log of rule versions a running job polls every micro-batch.

Usage::

    store = open_store("sqlite:rules.db")
    store.add({"type": "aggregate", "id": "big", "group_by": ["payerId"], "function": "SUM", ...})
    store.update("big", {"limit": "300000"}, author="ana")   # version 2
    store.pause("big")                                       # version 3, same definition, state PAUSE

A job reads :meth:`RuleStore.head` each batch and, when it moved, :meth:`RuleStore.log` since the last seq it
saw; it gives versions without an effective time one in event time and records it with
:meth:`RuleStore.assign_effective_from`, so a replay of the same log takes the same decisions.

Specs understood by :func:`open_store`: ``sqlite:PATH`` (or a path ending in ``.db``, ``.sqlite``,
``.sqlite3``), ``file:PATH`` (or a path ending in ``.json``) and ``postgresql://user@host:port/db`` (the
password from ``PGPASSWORD`` or ``~/.pgpass``, never in the URL).
"""

from __future__ import annotations

from pathlib import Path

from sparkcep.store.base import RuleStore
from sparkcep.store.jsonfile import JsonFileStore
from sparkcep.store.records import Change, Snapshot, StoredVersion, StoreError
from sparkcep.store.sqlite import SqliteStore
from sparkcep.store.summary import definition_diff, describe_diff, summary_sentence

__all__ = [
    "Change",
    "JsonFileStore",
    "RuleStore",
    "Snapshot",
    "SqliteStore",
    "StoreError",
    "StoredVersion",
    "definition_diff",
    "describe_diff",
    "open_store",
    "summary_sentence",
]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_EXPECTED = "'sqlite:PATH', 'file:PATH', 'postgresql://user@host:port/db' or a path ending in .db, .sqlite or .json"


def open_store(spec: str | Path) -> RuleStore:
    """Open (creating on first write or, for SQLite, on open) the rule store that ``spec`` names."""
    text = str(spec).strip()
    scheme, colon, rest = text.partition(":")
    if colon and scheme == "sqlite" and rest:
        return SqliteStore(rest)
    if colon and scheme == "file" and rest:
        return JsonFileStore(rest)
    if colon and scheme in ("postgres", "postgresql"):
        from sparkcep.store.postgres import PostgresStore  # needs the PostgreSQL driver

        return PostgresStore(text)
    suffix = Path(text).suffix.lower()
    if text and suffix in _SQLITE_SUFFIXES:
        return SqliteStore(text)
    if text and suffix == ".json":
        return JsonFileStore(text)
    raise StoreError(f"rule store spec: expected {_EXPECTED}, got {text!r}")
