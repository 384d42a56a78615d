"""What a rule store holds: versions with store metadata, a snapshot of the log, and one change to it.

These are plain values shared by every backend; the backends only decide how they are persisted.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

from sparkcep.errors import SparkcepError
from sparkcep.rules.model import InputSpec
from sparkcep.rules.registry import find_rule_type
from sparkcep.timeutil import format_iso

UNREADABLE_TYPE = "unreadable"  # the type given to a record whose rule is not a JSON object (never valid)


def decoded_rule(text: Any, rule_id: str) -> dict[str, Any]:
    """A stored rule as a dict: a record whose rule column holds no JSON object (written by hand, damaged)
    becomes a rule of the type "unreadable" that no validation accepts, so the store can still be read and
    the rule is reported and held paused instead of stopping every reader (see sparkcep.store.versions)."""
    value = text
    if isinstance(text, str | bytes):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
    if isinstance(value, dict):
        return value if "id" in value else {**value, "id": rule_id}
    return {"id": rule_id, "type": UNREADABLE_TYPE, "stored_text": str(text)[:200]}


class StoreError(SparkcepError):
    """The store itself cannot be used: an unknown spec, an unreadable file, a newer schema."""


@dataclass(frozen=True)
class StoredVersion:
    """One version of one rule as recorded in the log.

    ``rule`` is the definition in sparkcep's own form (``model_dump(mode="json", by_alias=True)``). Its
    ``effective_from`` mirrors ``effective_from_ms``: ``None`` while the version waits for the job to assign the
    event time at which it took effect ("on the next batch").
    """

    seq: int
    rule_id: str
    version: int
    effective_from_ms: int | None
    state: str
    rule: dict[str, Any]
    recorded_at: str
    author: str | None

    @classmethod
    def create(
        cls,
        seq: int,
        rule: dict[str, Any],
        effective_from_ms: int | None,
        recorded_at: str,
        author: str | None,
        version: int | None = None,
    ) -> StoredVersion:
        """Build a version from its definition; the columns are derived from the rule so they cannot disagree."""
        rule = dict(rule)
        # Rules of some types were recorded without versions before they had them (completion, inactivity): such
        # an entry (no effective_from in its definition) is version 1, in effect from the beginning, as it was
        # when it was recorded.
        rule_type = find_rule_type(rule.get("type"))
        unversioned = rule_type is not None and rule_type.recorded_unversioned
        if unversioned and "effective_from" not in rule and effective_from_ms is None:
            effective_from_ms = 0
        # The metadata is authoritative: the store assigns versions and the job assigns effective times.
        rule["effective_from"] = effective_from_ms
        if version is not None:
            rule["version"] = version
        return cls(
            seq=seq,
            rule_id=str(rule["id"]),
            version=int(rule.get("version", 1)),
            effective_from_ms=effective_from_ms,
            state=str(rule.get("state", "ACTIVE")),
            rule=rule,
            recorded_at=recorded_at,
            author=author,
        )

    @property
    def rule_type(self) -> str:
        return str(self.rule.get("type"))

    def assigned(self, effective_from_ms: int) -> StoredVersion:
        """This version once the job has assigned the event time it took effect at."""
        rule = {**self.rule, "effective_from": effective_from_ms}
        return dataclasses.replace(self, effective_from_ms=effective_from_ms, rule=rule)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredVersion:
        return cls.create(
            int(data["seq"]),
            decoded_rule(data.get("rule"), str(data.get("rule_id"))),
            data.get("effective_from_ms"),
            str(data["recorded_at"]),
            data["author"],
            data["version"] if type(data.get("version")) is int else None,  # the record's number is authoritative
        )


@dataclass(frozen=True)
class Snapshot:
    """The whole store at one point of the log, read under the lock when it is about to change."""

    input: InputSpec
    versions: tuple[StoredVersion, ...]

    @property
    def head(self) -> int:
        return self.versions[-1].seq if self.versions else 0

    def apply(self, change: Change) -> Snapshot:
        """The snapshot after ``change`` (used by backends that rewrite the whole document)."""
        wanted = {(rule_id, version): ms for rule_id, version, ms in change.assignments}
        versions = [
            v.assigned(wanted[(v.rule_id, v.version)])
            if v.effective_from_ms is None and (v.rule_id, v.version) in wanted
            else v
            for v in self.versions
        ]
        return Snapshot(change.input or self.input, (*versions, *change.new_versions))


@dataclass(frozen=True)
class Change:
    """What one write adds: new versions (seq already assigned), effective times, a new input spec."""

    new_versions: tuple[StoredVersion, ...] = ()
    # (rule_id, version, effective_from_ms): each only ever fills a null, never overwrites
    assignments: tuple[tuple[str, int, int], ...] = ()
    input: InputSpec | None = None

    @property
    def empty(self) -> bool:
        return not (self.new_versions or self.assignments or self.input is not None)


def now_iso() -> str:
    """Wall clock for ``recorded_at``: for humans reading the history, never used by the engine."""
    return format_iso(time.time_ns() // 1_000_000)
