"""Store versions as the API shows them: state words, badges, the English sentence, readable definitions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sparkcep.errors import RuleError
from sparkcep.store import RuleStore, StoredVersion, definition_diff, describe_diff, summary_sentence
from sparkcep.store.versions import Unreadable, definition
from sparkcep.timeutil import format_duration, format_iso

from .schemas import FieldChange, HistoryEntry, QuarantineInfo, RuleDetail, RuleView

# The store says PAUSE and DELETE (what a version does); the API says what the rule is.
STATE_WORDS = {"ACTIVE": "ACTIVE", "PAUSE": "PAUSED", "DELETE": "DELETED"}
_DURATIONS = ("window", "deadline", "timeout", "resolution")


def state_word(state: str) -> str:
    return STATE_WORDS.get(state, state)


def readable(value: Any, field: str) -> Any:
    """Durations the store keeps in milliseconds as text (``600000`` -> ``"10m"``), as ``rules export`` does."""
    if field in _DURATIONS and isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return format_duration(value)
    return value


def editable(rule: dict[str, Any]) -> dict[str, Any]:
    """The definition without what the store sets per version (version, state, effective_from) and without
    fields left at their empty default, so sending it back with PUT records a new version the job will time."""
    shown = {}
    for name, value in definition(rule).items():
        if value is None or (name == "clear_state" and value is False):
            continue
        shown[name] = readable(value, name)
    return shown


def effective_from(version: StoredVersion) -> str | None:
    return None if version.effective_from_ms is None else format_iso(version.effective_from_ms)


def is_pending(version: StoredVersion) -> bool:
    """The job has not yet given this version the event time it takes effect at."""
    return version.effective_from_ms is None


@dataclass(frozen=True)
class Readability:
    """Which versions the job does not run as they are written, read once per answer."""

    unreadable: dict[int, RuleError]  # seq -> why the version cannot be read (the job holds its rule paused)
    without_readable: dict[str, Unreadable]  # rules of which the job runs no version -> their latest bad version

    @classmethod
    def of(cls, store: RuleStore) -> Readability:
        log = store.readable_log()
        return cls({item.version.seq: item.error for item in log.unreadable}, log.without_readable())

    def note(self, version: StoredVersion) -> str | None:
        """What an operator reads instead of the rule's sentence when the job does not run it, and how to fix it;
        None for a version that runs as written."""
        fix = (
            f"record a valid definition (PUT /api/rules/{version.rule_id}, a full rule or the fields to fix) "
            f"or delete the rule (DELETE /api/rules/{version.rule_id})"
        )
        reason = self.without_readable.get(version.rule_id)
        if reason is not None:
            return f"Not run, no readable version (version {reason.version.version}: {reason.error}); {fix}."
        error = self.unreadable.get(version.seq)
        return None if error is None else f"Held paused, this version cannot be read ({error}); {fix}."


def badges(version: StoredVersion, quarantine: QuarantineInfo | None, note: str | None = None) -> list[str]:
    found = [state_word(version.state)]
    if is_pending(version):
        found.append("PENDING")
    if quarantine is not None:
        found.append("QUARANTINED")
    if note is not None:
        found.append("UNREADABLE")
    return found


def rule_view(version: StoredVersion, quarantine: QuarantineInfo | None, note: str | None = None) -> RuleView:
    """``note``: :meth:`Readability.note` of the version, shown instead of the sentence with an UNREADABLE badge."""
    return RuleView(
        id=version.rule_id,
        type=version.rule_type,
        version=version.version,
        state=state_word(version.state),
        badges=badges(version, quarantine, note),
        effective_from=effective_from(version),
        sentence=note or summary_sentence(version.rule),
        rule=editable(version.rule),
        recorded_at=version.recorded_at,
        author=version.author,
        quarantine=quarantine,
    )


def history_entries(versions: Sequence[StoredVersion]) -> list[HistoryEntry]:
    entries = []
    previous: dict[str, Any] | None = None
    for version in versions:
        diff = definition_diff(previous, version.rule)
        changes = [
            FieldChange(field=name, before=readable(before, name), after=readable(after, name))
            for name, (before, after) in sorted(diff.items())
        ]
        entries.append(
            HistoryEntry(
                seq=version.seq,
                version=version.version,
                state=state_word(version.state),
                effective_from=effective_from(version),
                recorded_at=version.recorded_at,
                author=version.author,
                sentence=summary_sentence(version.rule),
                changes=changes,
                change_summary=describe_diff(previous, version.rule),
                rule=editable(version.rule),
            )
        )
        previous = version.rule
    return entries


def rule_detail(
    versions: Sequence[StoredVersion], quarantine: QuarantineInfo | None, note: str | None = None
) -> RuleDetail:
    view = rule_view(versions[-1], quarantine, note)
    return RuleDetail(**view.model_dump(), history=history_entries(versions))
