"""``/api/backtest``: what a draft rule would have raised over the history in --input."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from sparkcep.arrival import is_arrival
from sparkcep.errors import RuleError
from sparkcep.rules.model import rule_keys
from sparkcep.store import Snapshot, StoredVersion
from sparkcep.store import versions as plan
from sparkcep.timeutil import format_iso

from .auth import require_token
from .backtest import run_backtest
from .backtest_diff import IDENTITY, AlertDiff, compare_backtests
from .context import Console, event_time, get_console
from .errors import ApiError
from .explanations import with_explanation
from .responses import WRITE, refusals
from .schemas import BacktestAlertDiff, BacktestRequest, BacktestResponse
from .validation import draft_rule_set

# A back-test can read a long history: it is a write-protected operation like the edits (it costs the server).
router = APIRouter(prefix="/api", tags=["backtest"], dependencies=[Depends(require_token)])


@router.post(
    "/backtest", summary="Back-test a draft rule", response_model=BacktestResponse,
    responses=refusals(*WRITE, 422, 503),
)  # fmt: skip
def backtest(body: BacktestRequest, console: Annotated[Console, Depends(get_console)]) -> BacktestResponse:
    """Evaluates the draft alone, active over the whole range, on the events in [since, until) with the engine
    the job runs. Writes nothing. ``rule`` may hold only changes to a rule in the store. With ``compare`` (the
    default) the rule's current version in the store runs over the same events by the same code, and
    ``comparison`` counts and lists the alerts the draft adds and removes (the same alert: the same event id)."""
    input_dir = console.require_input()
    since, until = event_time(body.since, "since"), event_time(body.until, "until")
    rules = draft_rule_set(console.store, body.rule)
    if is_arrival(rules.input.time_field):  # not replayable: history read now would get today's read times
        expected = "rules on event time for a back-test (arrival-time rules are not replayable)"
        raise ApiError.single(422, "input.time_field", expected, rules.input.time_field)
    delay = console.settings.watermark_delay_ms
    key_fields = {rule.id: rule_keys(rule) for rule in rules.rules}
    comparison = None
    if body.compare:
        stored = current_version(console, body.rule)
        current = draft_rule_set(console.store, stored.rule) if stored and stored.state == "ACTIVE" else None
        if current is not None:
            key_fields.update({rule.id: rule_keys(rule) for rule in current.rules})
        result, diff = compare_backtests(rules, current, input_dir, since, until, delay, body.sample)
        comparison = comparison_view(stored, diff, key_fields)
    else:
        result = run_backtest(rules, input_dir, since, until, delay, body.sample)
    return BacktestResponse(
        alerts=result.alerts,
        by_type=dict(sorted(result.by_type.items())),
        events=result.events,
        skipped=result.skipped,
        late=result.late,
        dead_letters=result.dead_letters,
        seconds=round(result.seconds, 3),
        files=result.files,
        since=None if since is None else format_iso(since),
        until=None if until is None else format_iso(until),
        sample=[with_explanation(record, key_fields) for record in result.sample],
        comparison=comparison,
    )


def current_version(console: Console, rule: dict[str, Any]) -> StoredVersion | None:
    """The version of the draft's rule the job runs now; None for a rule not in the store or deleted."""
    if console.store is None or rule.get("id") is None:
        return None
    store = console.store
    try:
        latest = plan.latest_version(Snapshot(store.input_spec(), tuple(store.log())), str(rule["id"]))
    except RuleError:
        return None  # a new rule
    return None if latest.state == "DELETE" else latest


def comparison_view(
    stored: StoredVersion | None, diff: AlertDiff, key_fields: dict[str, tuple[str, ...]]
) -> BacktestAlertDiff:
    return BacktestAlertDiff(
        current_version=None if stored is None else stored.version,
        current_state=None if stored is None else ("PAUSED" if stored.state == "PAUSE" else stored.state),
        identity=IDENTITY, current_alerts=diff.current_alerts, added=diff.added, removed=diff.removed,
        unchanged=diff.unchanged,
        added_alerts=[with_explanation(record, key_fields) for record in diff.added_alerts],
        removed_alerts=[with_explanation(record, key_fields) for record in diff.removed_alerts],
    )  # fmt: skip
