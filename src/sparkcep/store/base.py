"""The rule store interface: the durable log of rule versions a running job polls every micro-batch.

Each entry is one version of one rule plus store metadata (``seq``, ``recorded_at``, ``author``,
``effective_from_ms``). A backend implements two primitives, a consistent read (:meth:`RuleStore._snapshot`)
and a serialized read-plan-write (:meth:`RuleStore._transaction`); everything else, numbering and validation
included, is shared here so SQLite, the JSON file and a later PostgreSQL store behave the same.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkcep.errors import RuleError
from sparkcep.rules.documents import read_document_file
from sparkcep.rules.model import InputSpec, RuleSet
from sparkcep.store import versions as plan
from sparkcep.store.records import Change, Snapshot, StoredVersion, now_iso
from sparkcep.timeutil import format_duration, format_iso

__all__ = ["Change", "RuleStore", "Snapshot", "StoredVersion"]

_DURATIONS = ("window", "deadline", "timeout")


class RuleStore(abc.ABC):
    """A log of rule versions; ``seq`` orders every change, versions count per rule id from 1."""

    # -- backend primitives ------------------------------------------------------------------------

    @abc.abstractmethod
    def _snapshot(self) -> Snapshot:
        """The input spec and every version, from one consistent read."""

    @abc.abstractmethod
    def _transaction(self, planner: Callable[[Snapshot], Change]) -> Change:
        """Under an exclusive lock: read a snapshot, call ``planner``, persist its change; nothing if it raises.

        Writers are serialized, so version and seq numbers planned from the snapshot cannot collide.
        """

    # -- reading -----------------------------------------------------------------------------------

    def head(self) -> int:
        """The highest seq (0 when empty): polled every micro-batch, so backends make it cheap."""
        return self._snapshot().head

    def log(self, since_seq: int = 0) -> list[StoredVersion]:
        """Every version with ``seq > since_seq``, in seq order."""
        return [v for v in self._snapshot().versions if v.seq > since_seq]

    def input_spec(self) -> InputSpec:
        return self._snapshot().input

    def current(self) -> list[StoredVersion]:
        """The latest version of every rule that is not deleted, in order of first appearance."""
        latest = plan.latest_by_id(self._snapshot().versions)
        return [v for v in latest.values() if v.state != "DELETE"]

    def history(self, rule_id: str) -> list[StoredVersion]:
        """Every version of ``rule_id`` in order (empty for an unknown id)."""
        return [v for v in self._snapshot().versions if v.rule_id == rule_id]

    def rule_set(self) -> RuleSet:
        """Every version in the log as a :class:`RuleSet` (versions the job has not timed yet take effect
        right after their predecessors; an unreadable version holds its rule paused, see :meth:`unreadable`)."""
        snapshot = self._snapshot()
        return plan.validate(snapshot.input, snapshot.versions)

    def unreadable(self) -> list[plan.Unreadable]:
        """The versions no validation accepts, with the error: the job holds their rules paused."""
        return list(self.readable_log().unreadable)

    def readable_log(self) -> plan.ReadableLog:
        """The log as the job runs it, from one read: the versions it runs, the unreadable ones, the rules with no
        readable version and their pauses and deletes (tombstones), see :func:`sparkcep.store.versions.readable`."""
        snapshot = self._snapshot()
        return plan.readable(snapshot.input, snapshot.versions)

    def export(self) -> dict[str, Any]:
        """A rule file of every version that ``load_rules`` accepts (durations and times written readably): the log
        as the job runs it, so an unreadable version is exported as the PAUSE it stands for."""
        snapshot = self._snapshot()
        doc = plan.document(snapshot.input, plan.readable(snapshot.input, snapshot.versions).versions)
        for rule in doc["rules"]:
            for key in _DURATIONS:
                if isinstance(rule.get(key), int):
                    rule[key] = format_duration(rule[key])
            if isinstance(rule.get("effective_from"), int):
                rule["effective_from"] = format_iso(rule["effective_from"])
        return doc

    # -- writing -----------------------------------------------------------------------------------

    def set_input_spec(self, spec: InputSpec) -> None:
        """Set where the engine finds event time, type and id (kept with the rules, exported with them)."""
        self._transaction(lambda snapshot: Change(input=spec))

    def add(self, rule_json: dict[str, Any], author: str | None = None) -> StoredVersion:
        """Record a new rule (its id must be new) as version 1."""
        _, entries = plan.entries_of({"rules": [rule_json]})
        return self._record(entries, author, new_ids_only=True, check_versions=True)[0]

    def update(self, rule_id: str, changes_or_full_rule: dict[str, Any], author: str | None = None) -> StoredVersion:
        """Record the next version of a rule: changes merged into the latest definition, or a full definition (it
        names a ``type``); ACTIVE and effective on the job's next batch unless given."""

        def planner(snapshot: Snapshot) -> Change:
            latest = plan.latest_version(snapshot, rule_id)
            _, entries = plan.entries_of({"rules": [plan.merged_update(latest, changes_or_full_rule)]})
            return Change(self._plan(snapshot, entries, author, new_ids_only=False, check_versions=True))

        return self._transaction(planner).new_versions[0]

    def pause(self, rule_id: str, author: str | None = None) -> StoredVersion:
        """Record a PAUSE version (a rule with no readable version too: see :meth:`delete`)."""
        return self._transition(rule_id, "PAUSE", author)

    def resume(self, rule_id: str, author: str | None = None) -> StoredVersion:
        """Record an ACTIVE version of a paused rule; refused for a rule with no readable version (the message
        says how to give it one)."""
        return self._transition(rule_id, "ACTIVE", author)

    def delete(self, rule_id: str, author: str | None = None) -> StoredVersion:
        """Record a DELETE version: the engine drops the rule's state when it takes effect.

        A rule with no readable version (the job never runs it) is deleted too: the DELETE version carries its
        unreadable definition as it is, and the job, which has nothing of it to stop, skips it."""
        return self._transition(rule_id, "DELETE", author)

    def control(self, control_type: str, author: str | None = None) -> list[StoredVersion]:
        """Apply a CONTROL rule of the fraud-detection demo: DELETE_RULES_ALL records a DELETE version of every
        aggregate rule, CLEAR_STATE_ALL a new version of every active one that starts with empty windows (both
        effective on the job's next batch); EXPORT_RULES_CURRENT changes nothing (read :meth:`export`)."""

        def planner(snapshot: Snapshot) -> Change:
            entries = plan.control_entries(snapshot, control_type)
            return Change(self._plan(snapshot, entries, author, new_ids_only=False, check_versions=False))

        if control_type == "EXPORT_RULES_CURRENT":
            plan.control_entries(self._snapshot(), control_type)
            return []
        return list(self._transaction(planner).new_versions)

    def assign_effective_from(self, rule_id: str, version: int, effective_from_ms: int) -> None:
        """Record the event time the job gave an open version, so a replay uses the same one.

        Idempotent for the same value; a different value than one already recorded is an error.
        """

        def planner(snapshot: Snapshot) -> Change:
            found = next((v for v in snapshot.versions if (v.rule_id, v.version) == (rule_id, version)), None)
            if found is None:
                raise RuleError(rule_id, "version", "a version recorded in the store", version)
            if found.effective_from_ms is None:
                return Change(assignments=((rule_id, version, effective_from_ms),))
            if found.effective_from_ms == effective_from_ms:
                return Change()
            expected = f"{format_iso(found.effective_from_ms)} (assigned before; a replay must keep it)"
            raise RuleError(rule_id, "effective_from", expected, format_iso(effective_from_ms))

        if isinstance(effective_from_ms, bool) or not isinstance(effective_from_ms, int):
            raise RuleError(rule_id, "effective_from", "integer epoch milliseconds", effective_from_ms)
        self._transaction(planner)

    def import_file(self, path: str | Path, author: str | None = None) -> list[StoredVersion]:
        """Load a rule file (demo form or own form) as new versions; see :meth:`import_document`."""
        return self.import_document(read_document_file(path), author)

    def import_document(
        self, document: Any, author: str | None = None, *, new_ids_only: bool = False
    ) -> list[StoredVersion]:
        """Record every rule of a rule document in one write, in file order.

        Known ids get their next version (file version numbers are renumbered). Nothing is recorded twice: an
        entry identical to the latest version of its rule is skipped, and when a rule's entries start with its
        whole stored history (an export imported back) only the entries after it are new. With
        ``new_ids_only`` (what ``rules add`` does) every id must be new to the store instead. The file's
        ``input`` is adopted by an empty store and must match a non-empty one.
        """
        file_input, entries = plan.entries_of(document)

        def planner(snapshot: Snapshot) -> Change:
            new_input = None
            if file_input is not None and file_input != snapshot.input:
                if snapshot.versions:
                    expected = f"the store's input {snapshot.input.model_dump(mode='json')}"
                    raise RuleError("<file>", "input", expected, file_input.model_dump(mode="json"))
                new_input, snapshot = file_input, Snapshot(file_input, snapshot.versions)
            versions = self._plan(
                snapshot,
                entries,
                author,
                new_ids_only=new_ids_only,
                check_versions=False,
                skip_unchanged=not new_ids_only,
            )
            return Change(versions, input=new_input)

        return list(self._transaction(planner).new_versions)

    # -- shared helpers ----------------------------------------------------------------------------

    @staticmethod
    def _plan(
        snapshot: Snapshot, entries: list[plan.Entry], author: str | None, **options: bool
    ) -> tuple[StoredVersion, ...]:
        return plan.plan_versions(snapshot, entries, author, now_iso(), **options)

    def _record(self, entries: list[plan.Entry], author: str | None, **options: bool) -> tuple[StoredVersion, ...]:
        return self._transaction(lambda snapshot: Change(self._plan(snapshot, entries, author, **options))).new_versions

    def _transition(self, rule_id: str, state: str, author: str | None) -> StoredVersion:
        def planner(snapshot: Snapshot) -> Change:
            entry = plan.state_change(snapshot, rule_id, state)
            return Change(self._plan(snapshot, [entry], author, new_ids_only=False, check_versions=False))

        return self._transaction(planner).new_versions[0]
