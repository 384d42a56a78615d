"""``/api/backtest``: what a draft rule would have raised over the history in --input."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from sparkcep.rules.model import rule_keys
from sparkcep.timeutil import format_iso

from .auth import require_token
from .backtest import run_backtest
from .context import Console, event_time, get_console
from .explanations import with_explanation
from .responses import WRITE, refusals
from .schemas import BacktestRequest, BacktestResponse
from .validation import draft_rule_set

# A back-test can read a long history: it is a write-protected operation like the edits (it costs the server).
router = APIRouter(prefix="/api", tags=["backtest"], dependencies=[Depends(require_token)])


@router.post(
    "/backtest", summary="Back-test a draft rule", response_model=BacktestResponse,
    responses=refusals(*WRITE, 422, 503),
)  # fmt: skip
def backtest(body: BacktestRequest, console: Annotated[Console, Depends(get_console)]) -> BacktestResponse:
    """Evaluates the draft alone, active over the whole range, on the events in [since, until) with the engine
    the job runs. Writes nothing. ``rule`` may hold only changes to a rule in the store."""
    input_dir = console.require_input()
    since, until = event_time(body.since, "since"), event_time(body.until, "until")
    rules = draft_rule_set(console.store, body.rule)
    result = run_backtest(rules, input_dir, since, until, console.settings.watermark_delay_ms, body.sample)
    key_fields = {rule.id: rule_keys(rule) for rule in rules.rules}
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
    )
