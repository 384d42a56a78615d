"""A draft's back-test compared with the rule's current version over the same history: alerts added, removed and
unchanged.

Both are evaluated by :func:`~sparkcep.console.backtest.run_backtest`, the same code path, one after the other.
Two alerts are the same alert when they have the same ``event_id``: :func:`sparkcep.ids.output_id` makes it from the
rule id, the output type, the key and the time (plus the triggering event of an aggregate alert and the matched
events of a pattern), never from the version, so an alert both versions raise keeps its id, and one that moved in
time, changed type or matched other events is one removed and one added.

Memory: the current version's alert ids (about 100 bytes each) and two samples; the current version's records
are kept only up to :data:`KEEP_RECORDS`, beyond that a third pass finds the removed alerts to show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkcep.core.result_columns import key_text
from sparkcep.rules.model import RuleSet

from .backtest import BacktestResult, run_backtest

KEEP_RECORDS = 20_000
IDENTITY = "event_id"


def alert_identity(record: dict[str, Any]) -> str:
    """The alert's event id; a record without one (not written by sparkcep) by its type, key and time."""
    event_id = record.get("event_id")
    if isinstance(event_id, str) and event_id:
        return event_id
    return f"{record.get('event_type')}|{key_text(record)}|{record.get('occurred_at')}"


@dataclass
class AlertDiff:
    current_alerts: int = 0
    added: int = 0
    removed: int = 0
    unchanged: int = 0
    added_alerts: list[dict[str, Any]] = field(default_factory=list)
    removed_alerts: list[dict[str, Any]] = field(default_factory=list)


def _in_time_order(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: (str(r.get("occurred_at", "")), alert_identity(r)))


def compare_backtests(
    draft: RuleSet,
    current: RuleSet | None,
    input_dir: Path,
    since: int | None,
    until: int | None,
    watermark_delay_ms: int,
    sample_size: int,
    keep_records: int | None = None,
) -> tuple[BacktestResult, AlertDiff]:
    """The draft's back-test and how its alerts differ from those of ``current`` (None: no current version, so
    every alert is added). Lists hold the first ``sample_size`` added and removed alerts, in event-time order."""
    diff = AlertDiff()
    keep = KEEP_RECORDS if keep_records is None else keep_records
    remaining: dict[str, int] = {}  # current alerts by identity, not (yet) matched by the draft's
    kept: dict[str, dict[str, Any]] | None = {}

    def on_current(record: dict[str, Any]) -> None:
        nonlocal kept
        identity = alert_identity(record)
        remaining[identity] = remaining.get(identity, 0) + 1
        if kept is not None:
            kept.setdefault(identity, record)
            if len(kept) > keep:
                kept = None  # too many to hold: the removed ones are found again below

    def on_draft(record: dict[str, Any]) -> None:
        identity = alert_identity(record)
        left = remaining.get(identity, 0)
        if left:
            diff.unchanged += 1
            if left == 1:
                del remaining[identity]
            else:
                remaining[identity] = left - 1
        else:
            diff.added += 1
            if len(diff.added_alerts) < sample_size:
                diff.added_alerts.append(record)

    if current is not None:
        diff.current_alerts = run_backtest(current, input_dir, since, until, watermark_delay_ms, 0, on_current).alerts
    result = run_backtest(draft, input_dir, since, until, watermark_delay_ms, sample_size, on_draft)
    diff.removed = sum(remaining.values())
    if diff.removed and sample_size:
        diff.removed_alerts = _removed(
            kept, remaining, current, input_dir, since, until, watermark_delay_ms, sample_size
        )
    diff.added_alerts = _in_time_order(diff.added_alerts)
    return result, diff


def _removed(
    kept: dict[str, dict[str, Any]] | None,
    remaining: dict[str, int],
    current: RuleSet | None,
    input_dir: Path,
    since: int | None,
    until: int | None,
    watermark_delay_ms: int,
    sample_size: int,
) -> list[dict[str, Any]]:
    """The first removed alerts: from the kept records, or from the current version run once more."""
    if kept is not None:
        return _in_time_order([kept[identity] for identity in remaining if identity in kept][:sample_size])
    found: list[dict[str, Any]] = []
    wanted = set(remaining)

    def on_current(record: dict[str, Any]) -> None:
        identity = alert_identity(record)
        if identity in wanted and len(found) < sample_size:
            wanted.discard(identity)
            found.append(record)

    assert current is not None  # only the current version's alerts can be removed
    run_backtest(current, input_dir, since, until, watermark_delay_ms, 0, on_current)
    return _in_time_order(found)
