"""A rule store in one JSON document: easy to read, diff and commit next to the code that uses it.

Writers hold an exclusive ``flock`` on ``PATH.lock`` while they read the document, plan the change and write
the new document to a temporary file that replaces ``PATH`` atomically (``os.replace``), so two processes never
lose each other's updates and a reader never sees half a file. Readers take no lock; they parse the document
again only when its bytes changed, which keeps the job's per-batch :meth:`head` poll cheap.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkcep.rules.model import InputSpec
from sparkcep.store.base import RuleStore
from sparkcep.store.records import Change, Snapshot, StoredVersion, StoreError

FORMAT = "sparkcep-rule-store"
SCHEMA_VERSION = 1
_EMPTY = Snapshot(InputSpec(), ())


class JsonFileStore(RuleStore):
    """Rule versions in a JSON file; a missing file is an empty store, created by the first write."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._cache: tuple[bytes, Snapshot] | None = None

    def __repr__(self) -> str:
        return f"JsonFileStore({str(self.path)!r})"

    def _snapshot(self) -> Snapshot:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return _EMPTY
        # Reading a small file is cheap; parsing it again is what the cache saves. Comparing bytes rather
        # than (inode, mtime) stays right when a freed inode is reused within the clock's granularity.
        cached = self._cache
        if cached is not None and cached[0] == data:
            return cached[1]
        snapshot = self._parse(data)
        self._cache = (data, snapshot)
        return snapshot

    def _parse(self, data: bytes) -> Snapshot:
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                raise StoreError(f'{self.path} is not a sparkcep rule store (no "format": {FORMAT!r})')
            if doc.get("schema_version") != SCHEMA_VERSION:
                raise StoreError(
                    f"rule store {self.path} has schema version {doc.get('schema_version')!r}; "
                    f"this sparkcep reads {SCHEMA_VERSION}"
                )
            versions = tuple(StoredVersion.from_json(item) for item in doc["versions"])
            return Snapshot(InputSpec.model_validate(doc["input"]), versions)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise StoreError(f"rule store {self.path} cannot be read: {exc}") from exc

    def _transaction(self, planner: Callable[[Snapshot], Change]) -> Change:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # flock locks belong to the open file description, so threads of one process exclude each other too.
        with self._lock_path.open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                snapshot = self._snapshot()
                change = planner(snapshot)
                if not change.empty:
                    self._write_document(snapshot.apply(change))
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
        return change

    def _write_document(self, snapshot: Snapshot) -> None:
        doc: dict[str, Any] = {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "input": snapshot.input.model_dump(mode="json"),
            "versions": [v.to_json() for v in snapshot.versions],
        }
        fd, temp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(doc, out, indent=1)
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())  # the data is on disk before the name points at it
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
        _fsync_directory(self.path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (a crash could otherwise bring back the old file)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
