"""A rule file seen as a read-only rule store: what the console shows for a job run with ``--rules FILE`` (or a
pipeline file's ``rules: {file: ...}``).

The file's rules are numbered as importing it into an empty store would number them (file order; a rule listed
twice has two versions), so the console's pages and its back-tests work on them unchanged. Every change is
refused with :class:`ReadOnlyRulesError`: the job reads its rule file once, at start, so an edit here could never
reach it. The file is read again when it changes on disk (by modification time and size); a job that has not
restarted since still runs the rules it read at its start.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from sparkcep.rules.documents import read_document_file
from sparkcep.rules.model import InputSpec
from sparkcep.store import versions as plan
from sparkcep.store.base import RuleStore
from sparkcep.store.records import Change, Snapshot, StoreError
from sparkcep.timeutil import format_iso

AUTHOR = "rule file"


class ReadOnlyRulesError(StoreError):
    """A change asked of a rule file's rules."""


class RuleFileStore(RuleStore):
    """The rules of one rule file, read-only."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._cached: tuple[tuple[int, int], Snapshot] | None = None

    def __repr__(self) -> str:
        return f"RuleFileStore({str(self.path)!r})"

    def refusal(self) -> str:
        return (
            f"the job's rules come from the rule file {self.path}, which the console does not change (the job "
            "reads it once, at start): edit the file and restart the job, or run the job with a rule store "
            "(--rules-store, or rules: {store: ...} in the pipeline file) to edit rules here"
        )

    def _snapshot(self) -> Snapshot:
        try:
            info = os.stat(self.path)
        except OSError as exc:
            raise StoreError(f"rule file {self.path}: expected a readable file, got {exc.strerror or exc}") from None
        stamp = (info.st_mtime_ns, info.st_size)
        with self._lock:
            if self._cached is not None and self._cached[0] == stamp:
                return self._cached[1]
            file_input, entries = plan.entries_of(read_document_file(self.path))
            empty = Snapshot(file_input or InputSpec(), ())
            recorded_at = format_iso(info.st_mtime_ns // 1_000_000)
            versions = plan.plan_versions(empty, entries, AUTHOR, recorded_at, new_ids_only=False,
                                          check_versions=False)  # fmt: skip
            snapshot = Snapshot(empty.input, versions)
            self._cached = (stamp, snapshot)
            return snapshot

    def _transaction(self, planner: Callable[[Snapshot], Change]) -> Change:
        raise ReadOnlyRulesError(self.refusal())
