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
    "check_store_exists",
    "definition_diff",
    "describe_diff",
    "open_store",
    "store_spec_relative_to",
    "summary_sentence",
]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_POSTGRES_SCHEMES = ("postgres", "postgresql")
_EXPECTED = "'sqlite:PATH', 'file:PATH', 'postgresql://user@host:port/db' or a path ending in .db, .sqlite or .json"


def _local_store(text: str) -> tuple[str, str, str] | None:
    """``(kind, prefix, path)`` of a spec naming a local file store (kind "sqlite" or "file"; prefix "sqlite:",
    "file:" or "" for a bare path), else None."""
    scheme, colon, rest = text.partition(":")
    if colon and scheme in ("sqlite", "file") and rest:
        return scheme, f"{scheme}:", rest
    if colon and scheme in _POSTGRES_SCHEMES:
        return None
    suffix = Path(text).suffix.lower()
    if text and suffix in _SQLITE_SUFFIXES:
        return "sqlite", "", text
    if text and suffix == ".json":
        return "file", "", text
    return None


def check_store_exists(spec: str | Path) -> None:
    """Refuse a SQLite or JSON-file store whose file is missing or is a directory (other specs pass): the message
    names the spec and the file, and says how a store is created."""
    text = str(spec).strip()
    local = _local_store(text)
    if local is None:
        return
    path = Path(local[2]).expanduser().absolute()
    if path.is_dir():
        example = "rules.db" if local[0] == "sqlite" else "rules.json"
        raise StoreError(
            f"rule store {text}: {path} is a directory, expected the store's file\n"
            f"Fix: give the path of the store file itself (for example {local[1]}{path / example})"
        )
    if not path.exists():
        missing = next(p for p in reversed((path, *path.parents)) if not p.exists())
        why = "does not exist" if missing == path else f"does not exist ({missing} is missing)"
        raise StoreError(
            f"rule store {text}: {path} {why}\n"
            f"Fix: check the path, or create the store with 'sparkcep rules add FILE --store {text}' "
            f"(or 'rules import FILE --store {text}')"
        )


def store_spec_relative_to(spec: str, base: Path) -> str:
    """``spec`` with a relative local store path made relative to ``base`` (other specs unchanged)."""
    local = _local_store(spec.strip())
    if local is None or Path(local[2]).is_absolute():
        return spec
    return f"{local[1]}{(base / local[2]).resolve()}"


def open_store(spec: str | Path, *, create: bool = True) -> RuleStore:
    """Open the rule store that ``spec`` names.

    ``create``: a missing SQLite or JSON-file store is created (SQLite on open, a JSON file on the first write);
    without it a missing store file is refused (:func:`check_store_exists`), so a mistyped path in a command
    that reads a store is an error rather than an empty store. PostgreSQL stores create their tables either way.
    """
    text = str(spec).strip()
    local = _local_store(text)
    if local is not None:
        kind, _prefix, path = local
        if not create:
            check_store_exists(text)
        return SqliteStore(path) if kind == "sqlite" else JsonFileStore(path)
    scheme, colon, _rest = text.partition(":")
    if colon and scheme in _POSTGRES_SCHEMES:
        from sparkcep.store.postgres import PostgresStore  # needs the PostgreSQL driver

        return PostgresStore(text)
    raise StoreError(f"rule store spec: expected {_EXPECTED}, got {text!r}")
