"""Which rules the job quarantined: from its error records (OUTPUT/_errors/) and its PAUSE versions in the store.

When a rule raises, the engine stops it for the failing key and writes an error record; after the batch the job
pauses the rule in the store with the author ``sparkcep quarantine``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkcep.errors import EventTimeError
from sparkcep.store import StoredVersion
from sparkcep.store.quarantine import QUARANTINE_AUTHOR
from sparkcep.timeutil import parse_event_time

from .schemas import QuarantineInfo


@dataclass
class RuleErrors:
    """The error records of one rule: how many, and the latest in event time."""

    count: int
    latest: dict[str, Any]
    latest_ms: int | None


def read_errors(errors_dir: Path | None) -> dict[str, RuleErrors]:
    """Error records per rule id (an absent directory: none). Lines that are not records are passed over."""
    found: dict[str, RuleErrors] = {}
    if errors_dir is None or not errors_dir.is_dir():
        return found
    for path in sorted(errors_dir.glob("part-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(record, dict) or "rule_id" not in record:
                continue
            rule_id = str(record["rule_id"])
            at = _event_ms(record.get("event_time"))
            entry = found.get(rule_id)
            if entry is None:
                found[rule_id] = RuleErrors(1, record, at)
                continue
            entry.count += 1
            if at is not None and (entry.latest_ms is None or at >= entry.latest_ms):
                entry.latest, entry.latest_ms = record, at
    return found


def _event_ms(value: object) -> int | None:
    try:
        return parse_event_time(value)
    except EventTimeError:
        return None


def _info(rule_id: str, errors: RuleErrors | None, paused_at: str | None) -> QuarantineInfo:
    latest = errors.latest if errors is not None else {}
    return QuarantineInfo(
        rule_id=rule_id,
        error=_text(latest.get("error")),
        at=_text(latest.get("event_time")),
        key=_text(latest.get("key")),
        trigger=_text(latest.get("trigger")),
        errors=errors.count if errors is not None else 0,
        paused_at=paused_at,
    )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def quarantined(
    current: Iterable[StoredVersion], errors: dict[str, RuleErrors], store_ids: set[str] | None = None
) -> dict[str, QuarantineInfo]:
    """The quarantined rules among the store's latest versions (``current``), and rules with errors that the store
    never had (``store_ids``: every id in its log; a job may run from a rule file).

    A version an operator recorded after the failure (resume, update, delete) lifts the quarantine, unless the rule
    failed again after that version took effect.
    """
    out: dict[str, QuarantineInfo] = {}
    known: set[str] = set(store_ids or ())
    for version in current:
        known.add(version.rule_id)
        rule_errors = errors.get(version.rule_id)
        if version.state == "PAUSE" and version.author == QUARANTINE_AUTHOR:
            out[version.rule_id] = _info(version.rule_id, rule_errors, version.recorded_at)
        elif rule_errors is None:
            continue
        elif _failed_under(version, rule_errors):
            out[version.rule_id] = _info(version.rule_id, rule_errors, None)
    for rule_id, rule_errors in errors.items():
        if rule_id not in known:  # a job run with a rule file, or a rule deleted since
            out[rule_id] = _info(rule_id, rule_errors, None)
    return dict(sorted(out.items()))


def _failed_under(version: StoredVersion, errors: RuleErrors) -> bool:
    """Whether the rule failed while ``version`` was in effect (the job pauses it at the end of the batch)."""
    if version.state != "ACTIVE" or version.effective_from_ms is None or errors.latest_ms is None:
        return False
    return errors.latest_ms >= version.effective_from_ms
